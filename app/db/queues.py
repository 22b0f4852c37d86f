"""Repository functions for queues. Each takes a connection and never commits."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from app.db.rows import Conn
from app.db.statements import NoRow, execute, fetch, fetch_one, statement
from app.domain import DeadLetter, DedupScope, PeekedMessage, Queue, QueueAttributes, QueueStats

# Advisory lock class of the per-queue send/delete fence (two-key form: class, queue id).
QUEUE_LOCK_CLASS = 0x5051


class QueueRow(NamedTuple):
    """A `queues` row, with the name of its dead-letter queue."""

    id: int
    name: str
    fifo: bool
    visibility_timeout: int
    delay_seconds: int
    retention_seconds: int
    max_message_bytes: int
    receive_wait_seconds: int
    content_based_deduplication: bool
    deduplication_scope: DedupScope
    dead_letter_queue_id: int | None
    max_receive_count: int | None
    created_at: datetime
    updated_at: datetime
    dead_letter_for: list[str] | None
    dead_letter_queue_name: str | None


class Created(NamedTuple):
    """The id of a queue just created."""

    id: int


class Stats(NamedTuple):
    """queue_stats' counts."""

    visible: int
    in_flight: int
    delayed: int
    oldest_age_seconds: float | None


class Source(NamedTuple):
    """A queue whose dead-letter queue this is."""

    id: int
    name: str


class Tag(NamedTuple):
    """One tag of a queue."""

    key: str
    value: str


class Peeked(NamedTuple):
    """A message_peek_* row."""

    sequence_number: int
    message_id: UUID
    body: Any
    group_id: str | None
    dedup_id: str | None
    state: str
    receive_count: int
    sent_at: datetime
    visible_at: datetime
    first_received_at: datetime | None
    last_error: Any
    attributes: dict[str, str]
    attribute_types: dict[str, dict[str, str]] | None
    sender_id: str | None
    trace_header: str | None
    source_queue: str | None


_INSERT = statement("queue_insert", Created)
# A FIFO send's first statement, and the look-up behind the queue cache: prepared (app.db.prepared).
_GET = {
    for_send: statement(name, QueueRow, hot=True)
    for for_send, name in ((False, "queue_get"), (True, "queue_get_for_send"))
}
_GET_BY_ID = statement("queue_get_by_id", QueueRow)
_LIST = statement("queue_list", QueueRow)
_UPDATE = statement("queue_update", NoRow)
_LOCK_FOR_DELETE = statement("queue_lock_for_delete", NoRow)
_DELETE = statement("queue_delete", NoRow)
_CLEAR = [
    statement(name, NoRow)
    for name in (
        "queue_groups_clear",
        "queue_dedup_clear",
        "queue_attempts_clear",
        "queue_minutes_clear",
        "queue_census_clear",
    )
]
_STATS = statement("queue_stats", Stats)
_DEAD_LETTER_SOURCES = statement("queue_dead_letter_sources", Source)
_DEAD_LETTER_SOURCES_PAGE = statement("queue_dead_letter_sources_page", Source)
_LOCK_FOR_TAGS = statement("queue_lock_for_tags", Created)
_TAGS_SET = statement("queue_tags_set", NoRow)
_TAGS_REMOVE = statement("queue_tags_remove", NoRow)
_TAGS_LIST = statement("queue_tags_list", Tag)
_PEEK = {fifo: statement(f"message_peek_{'fifo' if fifo else 'standard'}", Peeked) for fifo in (False, True)}


def queue_from_row(row: QueueRow) -> Queue:
    """A `queues` row (with `dead_letter_queue_name`) as a Queue."""
    dead_letter = None
    if row.dead_letter_queue_id is not None:
        dead_letter = DeadLetter(queue=row.dead_letter_queue_name or "", max_receive_count=row.max_receive_count or 0)
    return Queue(
        id=row.id,
        name=row.name,
        attributes=QueueAttributes(
            fifo=row.fifo,
            visibility_timeout=row.visibility_timeout,
            delay_seconds=row.delay_seconds,
            retention_seconds=row.retention_seconds,
            max_message_bytes=row.max_message_bytes,
            receive_wait_seconds=row.receive_wait_seconds,
            content_based_deduplication=row.content_based_deduplication,
            deduplication_scope=row.deduplication_scope,
            dead_letter=dead_letter,
            dead_letter_for=None if row.dead_letter_for is None else tuple(row.dead_letter_for),
        ),
        dead_letter_queue_id=row.dead_letter_queue_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def queue_insert(conn: Conn, name: str, attrs: QueueAttributes, dead_letter_queue_id: int | None) -> bool:
    """Insert a queue; False when the name is taken."""
    params = {
        "name": name,
        "fifo": attrs.fifo,
        "visibility_timeout": attrs.visibility_timeout,
        "delay_seconds": attrs.delay_seconds,
        "retention_seconds": attrs.retention_seconds,
        "max_message_bytes": attrs.max_message_bytes,
        "receive_wait_seconds": attrs.receive_wait_seconds,
        "content_based_deduplication": attrs.content_based_deduplication,
        "deduplication_scope": attrs.deduplication_scope,
        "dead_letter_queue_id": dead_letter_queue_id,
        "max_receive_count": attrs.dead_letter.max_receive_count if attrs.dead_letter else None,
        "dead_letter_for": None if attrs.dead_letter_for is None else list(attrs.dead_letter_for),
    }
    return await fetch_one(conn, _INSERT, params) is not None


async def queue_get(conn: Conn, name: str, *, for_send: bool = False) -> Queue | None:
    """The queue called `name`; `for_send` also key-share-locks it against a concurrent delete."""
    row = await fetch_one(conn, _GET[for_send], {"name": name, "lock_class": QUEUE_LOCK_CLASS})
    return queue_from_row(row) if row else None


async def queue_get_by_id(conn: Conn, queue_id: int) -> Queue | None:
    """The queue with this id."""
    row = await fetch_one(conn, _GET_BY_ID, {"id": queue_id})
    return queue_from_row(row) if row else None


async def queue_list(conn: Conn, prefix: str, after: str, limit: int) -> list[Queue]:
    """A page of queues in name order."""
    rows = await fetch(conn, _LIST, {"prefix": prefix, "after": after, "limit": limit})
    return [queue_from_row(row) for row in rows]


async def queue_update(conn: Conn, queue_id: int, changes: dict[str, Any]) -> None:
    """Apply attribute changes (keys absent or None keep their value)."""
    params: dict[str, Any] = {
        key: changes.get(key)
        for key in (
            "visibility_timeout",
            "delay_seconds",
            "retention_seconds",
            "max_message_bytes",
            "receive_wait_seconds",
            "content_based_deduplication",
            "deduplication_scope",
        )
    }
    params["set_dead_letter"] = "dead_letter_queue_id" in changes
    params["dead_letter_queue_id"] = changes.get("dead_letter_queue_id")
    params["max_receive_count"] = changes.get("max_receive_count")
    params["set_dead_letter_for"] = "dead_letter_for" in changes
    names = changes.get("dead_letter_for")
    params["dead_letter_for"] = None if names is None else list(names)
    params["id"] = queue_id
    await execute(conn, _UPDATE, params)


async def message_peek(conn: Conn, queue: Queue, limit: int) -> list[PeekedMessage]:
    """The queue's next `limit` messages, read without receiving them (see the SQL blocks)."""
    rows = await fetch(conn, _PEEK[queue.fifo], {"queue_id": queue.id, "limit": limit})
    return [PeekedMessage(*row) for row in rows]


async def queue_delete(conn: Conn, queue_id: int) -> None:
    """Delete the queue row, after the sends in progress on it have finished. QueueInUse when
    another queue has meanwhile made it its dead-letter queue (app.db.errors)."""
    await execute(conn, _LOCK_FOR_DELETE, {"id": queue_id, "lock_class": QUEUE_LOCK_CLASS})
    await execute(conn, _DELETE, {"id": queue_id})


async def queue_clear(conn: Conn, queue_id: int) -> None:
    """Drop the group rows, dedup ids, receive attempts, minutes and group census of a deleted
    queue (messages first)."""
    for clear in _CLEAR:
        await execute(conn, clear, {"id": queue_id})


async def queue_stats(conn: Conn, queue_id: int, now: datetime | None) -> QueueStats:
    """Message counts of a queue."""
    [row] = await fetch(conn, _STATS, {"queue_id": queue_id, "now": now})
    return QueueStats(*row)


async def queue_dead_letter_sources(conn: Conn, queue_id: int) -> list[tuple[int, str]]:
    """(id, name) of the queues whose dead-letter queue this is."""
    return [(row.id, row.name) for row in await fetch(conn, _DEAD_LETTER_SOURCES, {"id": queue_id})]


async def queue_dead_letter_sources_page(conn: Conn, queue_id: int, after: str, limit: int) -> list[str]:
    """Names of the queues whose dead-letter queue this is, after `after` in name order."""
    rows = await fetch(conn, _DEAD_LETTER_SOURCES_PAGE, {"id": queue_id, "after": after, "limit": limit})
    return [row.name for row in rows]


async def queue_lock_for_tags(conn: Conn, queue_id: int) -> None:
    """Hold off other tag changes of this queue until the transaction ends."""
    await execute(conn, _LOCK_FOR_TAGS, {"id": queue_id})


async def queue_tags_set(conn: Conn, queue_id: int, tags: dict[str, str]) -> None:
    """Add these tags, replacing the values of keys the queue has."""
    if tags:
        await execute(conn, _TAGS_SET, {"id": queue_id, "keys": list(tags), "values": list(tags.values())})


async def queue_tags_remove(conn: Conn, queue_id: int, keys: list[str]) -> None:
    """Remove these tag keys (absent ones are ignored)."""
    if keys:
        await execute(conn, _TAGS_REMOVE, {"id": queue_id, "keys": keys})


async def queue_tags(conn: Conn, queue_id: int) -> dict[str, str]:
    """The queue's tags."""
    return {row.key: row.value for row in await fetch(conn, _TAGS_LIST, {"id": queue_id})}


class QueueCache:
    """Queues by name for a short time, so the hot paths (receive, ack, nack, visibility) skip
    the lookup. Changes made through this process forget the entry at once; changes made by
    another process are seen within `ttl` seconds. A standard queue's send checks its entries
    against it and takes the queue's fence in its insert (message_entry_json_fenced); a FIFO
    send reads the queue inside the fence (queue_get_for_send), in its own transaction."""

    def __init__(self, ttl: float = 1.0) -> None:
        self.ttl = ttl
        self._entries: dict[str, tuple[Queue, float]] = {}

    async def get(self, name: str, load: Callable[[], Awaitable[Queue]]) -> Queue:
        """The cached queue, or `load()` it (which raises QueueNotFound for an unknown name)."""
        hit = self._entries.get(name)
        now = time.monotonic()
        if hit is not None and hit[1] > now:
            return hit[0]
        queue = await load()
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[name] = (queue, now + self.ttl)
        return queue

    def forget(self, name: str) -> None:
        """Drop a queue from the cache (after a local change)."""
        self._entries.pop(name, None)
