"""The enqueue rules, stated once: how entries enter a queue, for the API's send
(MessageService) and the Spark backfill (app/pipeline/backfill/task.py) alike.

- Dedup scope: a dedup id is unique in the whole queue, or in its FIFO group when the queue's
  deduplication_scope is "group" (dedup_scope_key).
- Dedup key: the scope key and the dedup id. A send keys its batch by the pair; the backfill's
  Arrow columns hold it as text, `scope<TAB>dedup` (dedup_key_text): ids are tokens, which hold no
  tab, so the text is as unique as the pair.
- Repeats inside a batch: the first entry with a key is enqueued, every later one is answered
  as a duplicate of it, not inserted (repeats). The backfill marks them with Arrow's kernels
  (rows.py `_repeats`), a test holds the two to the same answers.
- The group fence: the FIFO groups the entries write to are locked (created if new), in sorted
  order, before sequence numbers are drawn, so a group's messages are numbered in the order
  their transactions commit and two batches never deadlock on each other's groups.
- The dedup window: an inserted entry claims its key for `dedup_window` seconds; a key still
  claimed makes a duplicate, whether a send or a backfill claimed it.
- The wake after commit: long polls of the queue are woken once the messages are committed
  (wake_after_commit), not by a NOTIFY inside the transaction (see app/service/wakeup.py).

The two ways in are `enqueue_entries` (a send's entries, checked here by check_entry and handed
to the database as one JSON document) and `enqueue_staged` (a backfill task's rows, checked
before and staged by COPY into this transaction's staging table); both take the group fence here
and claim their keys through app/db/send.py. Neither commits: the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from datetime import datetime
from typing import TypeVar

from app.db import send
from app.db.engine import Database
from app.db.rows import Conn
from app.db.send import NewMessage
from app.domain import EntryFailure, MessageInput, Queue, QueueAttributes, SendResult
from app.errors import PqsError
from app.ids import message_ids
from app.service.validation import check_entry, typed_document
from app.service.wakeup import Wakeup

K = TypeVar("K", bound=Hashable)


def dedup_scope_key(attributes: QueueAttributes, group_id: str | None) -> str:
    """Where a dedup id is unique: '' for the whole queue, the group id for group scope."""
    if attributes.deduplication_scope == "group" and group_id is not None:
        return group_id
    return ""


def dedup_key_text(scope_key: str, dedup_id: str) -> str:
    """An entry's dedup key as one text (the backfill's staged `dedup_key` column)."""
    return f"{scope_key}\t{dedup_id}"


def repeats(keys: Iterable[K | None]) -> dict[int, int]:
    """Repeats inside a batch: position of each entry whose dedup key an earlier entry has ->
    position of the first entry with that key (the one enqueued; the repeat is answered as its
    duplicate). None is no key: such an entry never repeats another."""
    first: dict[K, int] = {}
    found: dict[int, int] = {}
    for index, key in enumerate(keys):
        if key is not None:
            earlier = first.setdefault(key, index)
            if earlier != index:
                found[index] = earlier
    return found


async def _group_fence(conn: Conn, queue_id: int, delays: dict[str, int], now: datetime | None) -> None:
    """Lock (creating) the groups entries write to, before their sequence numbers are drawn;
    `delays` maps each group to its first message's delay."""
    if delays:
        await send.group_lock_for_send(conn, queue_id, delays, now)


async def enqueue_entries(
    conn: Conn,
    queue: Queue,
    entries: Sequence[MessageInput],
    dedup_window: int,
    now: datetime | None,
    *,
    fenced: bool = False,
) -> list[SendResult | EntryFailure] | None:
    """Check `entries` (check_entry) and enqueue those that pass, in one statement; per entry in
    order its SendResult (a duplicate answered with the first message's id and sequence number)
    or why it was refused.

    `fenced` (a standard queue's send outside a transaction): the statement takes the queue's
    send fence itself (message_send_fenced); None when the queue turned out to be gone, and
    nothing was written."""
    if fenced and queue.fifo:
        raise ValueError("a FIFO send locks its groups inside the fence: it runs in a transaction")
    attributes = queue.attributes
    count = len(entries)
    results: list[SendResult | EntryFailure | None] = [None] * count
    # Every entry that passes is made a NewMessage in this one loop, a repeat too (rare; dropped
    # below): a second loop over the batch would cost a send of 1,000 entries measurably more.
    checked: list[NewMessage | None] = [None] * count
    keys: list[tuple[str, str] | None] = [None] * count
    ids = message_ids(count)  # one draw for the batch (an id of a refused entry is unused)
    for index, entry in enumerate(entries):
        try:
            dedup_id, delay, body_json = check_entry(attributes, entry)
        except PqsError as exc:
            results[index] = EntryFailure(exc.code, exc.message)
            continue
        scope_key = ""
        if dedup_id is not None:
            scope_key = dedup_scope_key(attributes, entry.group_id)
            keys[index] = (scope_key, dedup_id)
        message = NewMessage(ids[index], body_json, entry.group_id, dedup_id, scope_key, entry.attributes, delay)
        if entry.sender_id is not None or entry.trace_header is not None or entry.attribute_types:
            message.attribute_types = typed_document(entry.attribute_types) if entry.attribute_types else None
            message.sender_id = entry.sender_id
            message.trace_header = entry.trace_header
        checked[index] = message
    repeated = repeats(keys)
    fresh = [(i, msg) for i, msg in enumerate(checked) if msg is not None and i not in repeated]
    if fresh:
        new = [msg for _, msg in fresh]
        if queue.fifo:
            delays: dict[str, int] = {}
            for msg in new:
                assert msg.group_id is not None
                delays[msg.group_id] = min(delays.get(msg.group_id, msg.delay_seconds), msg.delay_seconds)
            await _group_fence(conn, queue.id, delays, now)
        outcome = await send.message_send(conn, queue.id, new, dedup_window, now, fenced=fenced)
        if len(outcome) != len(new):
            return None  # fenced, and the queue is gone (nothing was inserted)
        duplicates = [
            (msg.scope_key, msg.dedup_id)
            for msg, sent in zip(new, outcome, strict=True)
            if not sent.inserted and msg.dedup_id is not None
        ]
        originals = await send.dedup_lookup(conn, queue.id, duplicates) if duplicates else {}
        for (index, msg), sent in zip(fresh, outcome, strict=True):
            if sent.inserted:
                results[index] = SendResult(msg.message_id, sent.id, duplicate=False)
            else:
                assert msg.dedup_id is not None
                original_id, original_seq = originals[(msg.scope_key, msg.dedup_id)]
                results[index] = SendResult(str(original_id), original_seq, duplicate=True)
    for index, earlier in repeated.items():
        first = results[earlier]
        assert isinstance(first, SendResult)
        results[index] = SendResult(first.message_id, first.sequence_number, duplicate=True)
    return [r for r in results if r is not None]


async def enqueue_staged(conn: Conn, queue_id: int, fifo: bool, dedup_window: int, now: datetime | None) -> int:
    """Enqueue the rows this transaction staged (a backfill task's, send.message_stage, each
    checked by check_entry or proven by Spark to pass it, repeats marked); how many were
    inserted (the others are duplicates by dedup key)."""
    if fifo:
        await _group_fence(conn, queue_id, await send.message_staged_groups(conn), now)
    return await send.message_insert_staged(conn, queue_id, dedup_window, now)


async def wake_after_commit(via: Wakeup | Database | Conn, queue_id: int) -> None:
    """After the commit that made messages of the queue receivable: wake its long polls, in
    every process. Through the process's Wakeup when there is one (its own waiters at once, a
    NOTIFY coalesced with others); else a NOTIFY from a pooled connection of the Database, or
    from `via` itself, a connection outside any transaction (autocommit)."""
    if isinstance(via, Wakeup):
        via.publish(queue_id)
    elif isinstance(via, Database):
        await via.run_single(lambda conn: send.queue_wake(conn, queue_id))
    else:
        await send.queue_wake(via, queue_id)
