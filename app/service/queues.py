"""Queue management: create (idempotent), read, list, change, delete, purge, redrive."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from app.db import finish, history, moves, send
from app.db import queues as qdb
from app.db.engine import Database
from app.db.moves import Redrivable
from app.db.rows import Conn
from app.domain import (
    HISTORY_OUTCOMES,
    HistoryOutcome,
    HistoryPage,
    PeekedMessage,
    Queue,
    QueueAttributes,
    QueueStats,
    RedriveFilter,
)
from app.errors import (
    InvalidAttributes,
    InvalidInput,
    NotADeadLetterQueue,
    QueueAttributesConflict,
    QueueInUse,
    QueueNotFound,
    quote,
)
from app.service.validation import (
    MAX_TAGS,
    check_attributes,
    check_queue_name,
    check_tag_keys,
    check_tags,
    check_text,
)
from app.service.wakeup import Wakeup

# Messages a peek shows at most: a look, not an export (the pipeline's archive is for that).
MAX_PEEK = 100
# History entries a page shows at most, and looks at at most to find them (a filter that
# matches rarely gives a short page, which `next_before` continues: queries/history.sql).
MAX_HISTORY = 100
HISTORY_WALK = 5_000
REDRIVE_BATCH = 500
REDRIVE_MAX_BATCHES = 10_000


@dataclass(frozen=True)
class QueuePage:
    """One page of a queue listing; `next_after` continues it."""

    queues: list[Queue]
    next_after: str | None


async def get_queue(conn: Conn, name: str, *, for_send: bool = False) -> Queue:
    """The queue called `name`, or QueueNotFound."""
    queue = await qdb.queue_get(conn, name, for_send=for_send)
    if queue is None:
        raise QueueNotFound(name)
    return queue


async def cached_queue(db: Database, name: str) -> Queue:
    """The queue called `name` from the process's short-lived cache (QueueNotFound if unknown)."""
    return await db.queue_cache.get(name, lambda: db.run_single(lambda conn: get_queue(conn, name)))


class QueueService:
    """Queue-level operations; each public method is one transaction (redrive: one per batch)."""

    def __init__(self, db: Database, wakeup: Wakeup | None = None) -> None:
        self.db = db
        self.wakeup = wakeup

    async def _dead_letter_id(self, conn: Conn, name: str, attrs: QueueAttributes) -> int | None:
        if attrs.dead_letter is None:
            return None
        if attrs.dead_letter.queue == name:
            raise InvalidAttributes("a queue cannot be its own dead-letter queue")
        target = await qdb.queue_get(conn, attrs.dead_letter.queue)
        if target is None:
            raise InvalidAttributes(f"dead-letter queue {quote(attrs.dead_letter.queue)} does not exist")
        if target.fifo != attrs.fifo:
            raise InvalidAttributes("a dead-letter queue must be of the same kind (FIFO or standard)")
        allowed = target.attributes.dead_letter_for
        if allowed is not None and name not in allowed:
            raise InvalidAttributes(
                f"dead-letter queue {quote(target.name)} does not allow {quote(name)} as a source (its dead_letter_for)"
            )
        return target.id

    async def create(self, name: str, attrs: QueueAttributes, tags: dict[str, str] | None = None) -> tuple[Queue, bool]:
        """Create the queue; (queue, True) when created, (queue, False) when it exists identically.
        `tags` are the new queue's; a queue that exists keeps its own (as SQS: only attributes
        decide whether a CreateQueue matches the queue)."""
        check_queue_name(name, attrs.fifo)
        check_attributes(attrs)
        check_tags(tags or {})

        async def work(conn: Conn) -> tuple[Queue, bool]:
            dead_letter_id = await self._dead_letter_id(conn, name, attrs)
            created = await qdb.queue_insert(conn, name, attrs, dead_letter_id)
            queue = await get_queue(conn, name)
            if not created and queue.attributes != attrs:
                raise QueueAttributesConflict(
                    f"queue {quote(name)} exists with other attributes; PATCH it to change them"
                )
            if created:
                await qdb.queue_tags_set(conn, queue.id, tags or {})
            return queue, created

        return await self.db.run(work)

    async def name_by_id(self, queue_id: int) -> str | None:
        """The name of the queue with this id (None: it was deleted since)."""

        async def work(conn: Conn) -> str | None:
            queue = await qdb.queue_get_by_id(conn, queue_id)
            return queue.name if queue else None

        return await self.db.run_single(work)

    async def tags(self, name: str) -> dict[str, str]:
        """The queue's tags."""

        async def work(conn: Conn) -> dict[str, str]:
            return await qdb.queue_tags(conn, (await get_queue(conn, name)).id)

        return await self.db.run(work)

    async def tag(self, name: str, tags: dict[str, str]) -> None:
        """Add tags, replacing the values of keys the queue has; InvalidInput (nothing changed)
        when the queue would have more than MAX_TAGS."""
        check_tags(tags)

        async def work(conn: Conn) -> None:
            queue = await get_queue(conn, name)
            await qdb.queue_lock_for_tags(conn, queue.id)
            await qdb.queue_tags_set(conn, queue.id, tags)
            count = len(await qdb.queue_tags(conn, queue.id))
            if count > MAX_TAGS:
                raise InvalidInput(f"a queue has at most {MAX_TAGS} tags: these would give {quote(name)} {count}")

        await self.db.run(work)

    async def untag(self, name: str, keys: list[str]) -> None:
        """Remove these tag keys; keys the queue does not have are ignored."""
        check_tag_keys(keys)

        async def work(conn: Conn) -> None:
            queue = await get_queue(conn, name)
            await qdb.queue_lock_for_tags(conn, queue.id)
            await qdb.queue_tags_remove(conn, queue.id, keys)

        await self.db.run(work)

    async def dead_letter_sources(self, name: str, after: str = "", limit: int = 100) -> tuple[list[str], str | None]:
        """A page of the names of the queues whose dead-letter queue this is, in name order, and
        the name to continue after (None on the last page)."""
        check_text("after", after)

        async def work(conn: Conn) -> list[str]:
            queue = await get_queue(conn, name)
            return await qdb.queue_dead_letter_sources_page(conn, queue.id, after, limit + 1)

        found = await self.db.run(work)
        page = found[:limit]
        return page, page[-1] if len(found) > limit and page else None

    async def get(self, name: str, now: datetime | None = None) -> tuple[Queue, QueueStats]:
        """A queue's attributes and message counts."""

        async def work(conn: Conn) -> tuple[Queue, QueueStats]:
            queue = await get_queue(conn, name)
            return queue, await qdb.queue_stats(conn, queue.id, now)

        return await self.db.run(work)

    async def peek(self, name: str, limit: int = 10) -> list[PeekedMessage]:
        """Up to `limit` (1 to MAX_PEEK) of the queue's messages, looked at without receiving
        them: nothing changes (no receive count, no lease). A standard queue's in the order a
        receive considers them; a FIFO queue's group by group (by group id), each in order."""
        if not 1 <= limit <= MAX_PEEK:
            raise InvalidInput(f"limit must be between 1 and {MAX_PEEK}, not {limit}")

        async def work(conn: Conn) -> list[PeekedMessage]:
            return await qdb.message_peek(conn, await get_queue(conn, name), limit)

        return await self.db.run(work)

    async def history(
        self,
        name: str,
        *,
        outcome: HistoryOutcome | None = None,
        group_id: str | None = None,
        before: int | None = None,
        limit: int = 20,
        walk: int = HISTORY_WALK,
    ) -> HistoryPage:
        """A page of the queue's finished messages, newest first, below the history id `before`
        (None: from the newest); of that outcome and group when given. The page looks at `walk`
        entries at most, so a filtered one may be short and still have a next (`next_before`)."""
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput(f"limit must be between 1 and {MAX_HISTORY}, not {limit}")
        if outcome is not None and outcome not in HISTORY_OUTCOMES:
            raise InvalidInput(f"outcome must be one of {', '.join(HISTORY_OUTCOMES)}, not {quote(outcome)}")
        if group_id is not None:
            check_text("group_id", group_id)

        async def work(conn: Conn) -> HistoryPage:
            queue = await get_queue(conn, name)
            return await history.history_page(
                conn, queue.id, outcome=outcome, group_id=group_id, before_id=before, limit=limit, walk=walk
            )

        return await self.db.run(work)

    async def list(self, prefix: str = "", after: str = "", limit: int = 100) -> QueuePage:
        """A page of queues in name order."""
        check_text("prefix", prefix)
        check_text("after", after)

        async def work(conn: Conn) -> list[Queue]:
            return await qdb.queue_list(conn, prefix, after, limit + 1)

        found = await self.db.run(work)
        more = len(found) > limit
        page = found[:limit]
        return QueuePage(page, page[-1].name if more and page else None)

    async def update(self, name: str, changes: dict[str, Any]) -> Queue:
        """Change attributes; `changes` holds only the keys the client sent."""

        async def work(conn: Conn) -> Queue:
            queue = await get_queue(conn, name)
            if "fifo" in changes and changes["fifo"] != queue.fifo:
                raise InvalidAttributes("fifo cannot change; create a new queue instead")
            fields = {k: v for k, v in changes.items() if k not in ("fifo", "dead_letter")}
            merged = replace(queue.attributes, **fields)
            if "dead_letter" in changes:
                merged = replace(merged, dead_letter=changes["dead_letter"])
            check_attributes(merged)
            params: dict[str, Any] = dict(fields)
            if "dead_letter_for" in changes:
                params["dead_letter_for"] = merged.dead_letter_for  # as normalized
            if "dead_letter" in changes:
                params["dead_letter_queue_id"] = await self._dead_letter_id(conn, name, merged)
                params["max_receive_count"] = merged.dead_letter.max_receive_count if merged.dead_letter else None
            await qdb.queue_update(conn, queue.id, params)
            return await get_queue(conn, name)

        try:
            return await self.db.run(work)
        finally:
            self.db.queue_cache.forget(name)

    async def delete(self, name: str, now: datetime | None = None) -> None:
        """Delete a queue; its messages are recorded in history as purged."""

        async def work(conn: Conn) -> None:
            queue = await get_queue(conn, name)
            sources = await qdb.queue_dead_letter_sources(conn, queue.id)
            if sources:
                # Not named: the caller may have no right to know of those queues.
                raise QueueInUse(
                    f"queue {quote(name)} is the dead-letter queue of {len(sources)} other queue(s):"
                    " change their dead_letter first"
                )
            try:
                async with conn.transaction():
                    await qdb.queue_delete(conn, queue.id)
            except QueueInUse:  # app.db.errors: by the dead-letter foreign key
                raise QueueInUse(f"queue {quote(name)} became the dead-letter queue of another queue") from None
            await moves.message_purge(conn, queue.id, queue.name, now)
            await qdb.queue_clear(conn, queue.id)

        try:
            await self.db.run(work)
        finally:
            self.db.queue_cache.forget(name)

    async def purge(self, name: str, now: datetime | None = None) -> int:
        """Remove every message of the queue (recorded in history as purged); how many."""

        async def work(conn: Conn) -> int:
            queue = await get_queue(conn, name)
            return await moves.message_purge(conn, queue.id, queue.name, now)

        return await self.db.run(work)

    async def redrive(
        self,
        name: str,
        now: datetime | None = None,
        *,
        batch: int = REDRIVE_BATCH,
        check_destination: Callable[[str], None] = lambda _: None,
        only: RedriveFilter = RedriveFilter(),
        dry_run: bool = False,
    ) -> int:
        """Move the ready messages of a dead-letter queue back to their source queues; how many.
        `only`: those of one group, or from one source queue (a source unknown, or a group on a
        standard queue, matches none);
        `dry_run`: move nothing, count what would move now.

        `check_destination(source name)` runs before anything moves into a source queue (a dry
        run: for each source something would move into), in that batch's transaction: whatever
        it raises (the caller's right to send there) ends the redrive with that batch undone and
        the batches before it kept.

        Batches of at most `batch` messages, each its own transaction (a FIFO group larger than
        a batch goes back over several). Messages keep their group and their relative order in
        the group (FIFO); a standard DLQ goes back earliest due first, each batch in its old
        relative order. In the source they are new messages (new sequence numbers, receive count
        0) behind whatever the group already holds.
        """
        if only.group_id is not None:
            check_text("group_id", only.group_id)
        if only.source_queue is not None:
            check_text("source_queue", only.source_queue)

        async def dead_letter_queue(conn: Conn) -> tuple[Queue, Subset | None]:
            queue = await get_queue(conn, name)
            if not await qdb.queue_dead_letter_sources(conn, queue.id):
                raise NotADeadLetterQueue(f"queue {quote(name)} is not the dead-letter queue of any queue")
            if only.group_id is not None and not queue.fifo:
                return queue, None  # a standard queue's messages have no group: none is of this one
            subset = Subset(only.group_id, None)
            if only.source_queue is not None:
                source = await qdb.queue_get(conn, only.source_queue)
                if source is None:
                    return queue, None  # no such queue: nothing comes from it
                subset = Subset(only.group_id, source.id)
            return queue, subset

        if dry_run:

            async def would_move(conn: Conn) -> int:
                queue, subset = await dead_letter_queue(conn)
                if subset is None:
                    return 0
                counted = await moves.redrive_count(
                    conn, queue.id, queue.fifo, now, group_id=subset.group_id, source_queue_id=subset.source_queue_id
                )
                # What the redrive would check, before it moved into each of them: a dry run
                # is refused where the redrive would be, and counts nothing it would not tell.
                for source in counted:
                    check_destination(source.source_queue)
                return sum(source.total for source in counted)

            return await self.db.run(would_move)

        moved = 0
        for _ in range(REDRIVE_MAX_BATCHES):

            async def move(conn: Conn) -> int:
                queue, subset = await dead_letter_queue(conn)
                if subset is None:
                    return 0
                return await redrive_batch(conn, queue, batch, now, check_destination=check_destination, subset=subset)

            count = await self.db.run(move)
            moved += count
            if count == 0:
                break
        return moved


@dataclass(frozen=True)
class Subset:
    """A redrive's filter as the picks take it: one group, one source queue's id (None: any)."""

    group_id: str | None = None
    source_queue_id: int | None = None


async def redrive_batch(
    conn: Conn,
    queue: Queue,
    limit: int,
    now: datetime | None,
    *,
    destination: str | None = None,
    before_id: int | None = None,
    check_destination: Callable[[str], None] = lambda _: None,
    subset: Subset = Subset(),
) -> int:
    """One batch of a redrive of the dead-letter queue `queue`, in the caller's transaction: up
    to `limit` of its ready messages, none after `before_id` (None: no limit), move to
    `destination`, or (None) each to its source queue; how many moved. Fewer than `limit`:
    nothing more can move now.

    Each queue they move into is read as a send reads it (queue_get_for_send: the send fence
    and a key-share lock), so a concurrent delete of it waits, or is seen. A source queue
    deleted meanwhile is skipped (its messages stay); a destination deleted meanwhile is
    QueueNotFound. `check_destination(name)` runs before anything moves into a queue: whatever
    it raises ends the batch.
    """
    picked = await moves.redrive_pick(
        conn,
        queue.id,
        queue.fifo,
        limit,
        now,
        before_id,
        group_id=subset.group_id,
        source_queue_id=subset.source_queue_id,
    )
    # Source queues in id order: two redrives take their fences in one order.
    targets: list[tuple[str | None, list[Redrivable]]] = []
    if destination is not None and picked:
        targets.append((destination, picked))
    elif destination is None:
        by_source: dict[int, list[Redrivable]] = {}
        for row in picked:
            by_source.setdefault(row.source_queue_id, []).append(row)
        for source_id in sorted(by_source):
            source = await qdb.queue_get_by_id(conn, source_id)
            targets.append((source.name if source else None, by_source[source_id]))
    count = 0
    for name, rows in targets:
        target = await qdb.queue_get(conn, name, for_send=True) if name is not None else None
        if target is None:
            if destination is not None:
                raise QueueNotFound(destination)
            continue
        check_destination(target.name)
        if target.fifo:
            groups = {r.group_id: 0 for r in rows if r.group_id is not None}
            await send.group_lock_for_send(conn, target.id, groups, now)
        done = await moves.message_move(conn, queue.id, target.id, [r.id for r in rows], now)
        count += len(done)
        await send.queue_wake(conn, target.id)
    if queue.fifo and picked:
        groups_picked = [r.group_id for r in picked if r.group_id is not None]
        await finish.group_release(conn, queue.id, groups_picked, served=False, now=now)
    return count
