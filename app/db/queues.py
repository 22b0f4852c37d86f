"""Repository functions for queues. Each takes a connection and never commits."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from app.db import prepared
from app.db.rows import Conn, queue_from_row
from app.db.sql import QUERIES
from app.domain import Queue, QueueAttributes, QueueStats

# Advisory lock class of the per-queue send/delete fence (two-key form: class, queue id).
QUEUE_LOCK_CLASS = 0x5051


async def queue_insert(conn: Conn, name: str, attrs: QueueAttributes, dead_letter_queue_id: int | None) -> bool:
    """Insert a queue; False when the name is taken."""
    cur = await conn.execute(
        QUERIES["queue_insert"].sql,
        {
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
        },
    )
    return await cur.fetchone() is not None


# A FIFO send's first statement, and the look-up behind the queue cache: prepared (app.db.prepared).
_QUEUE_GET = {
    for_send: prepared.statement(name, QUERIES[name].text)
    for for_send, name in ((False, "queue_get"), (True, "queue_get_for_send"))
}


async def queue_get(conn: Conn, name: str, *, for_send: bool = False) -> Queue | None:
    """The queue called `name`; `for_send` also key-share-locks it against a concurrent delete."""
    rows = await prepared.rows(conn, _QUEUE_GET[for_send], {"name": name, "lock_class": QUEUE_LOCK_CLASS})
    return queue_from_row(rows[0]) if rows else None


async def queue_get_by_id(conn: Conn, queue_id: int) -> Queue | None:
    """The queue with this id."""
    row = await (await conn.execute(QUERIES["queue_get_by_id"].sql, {"id": queue_id})).fetchone()
    return queue_from_row(row) if row else None


async def queue_list(conn: Conn, prefix: str, after: str, limit: int) -> list[Queue]:
    """A page of queues in name order."""
    cur = await conn.execute(QUERIES["queue_list"].sql, {"prefix": prefix, "after": after, "limit": limit})
    return [queue_from_row(row) for row in await cur.fetchall()]


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
    params["id"] = queue_id
    await conn.execute(QUERIES["queue_update"].sql, params)


async def queue_delete(conn: Conn, queue_id: int) -> None:
    """Delete the queue row, after the sends in progress on it have finished."""
    await conn.execute(QUERIES["queue_lock_for_delete"].sql, {"id": queue_id, "lock_class": QUEUE_LOCK_CLASS})
    await conn.execute(QUERIES["queue_delete"].sql, {"id": queue_id})


async def queue_clear(conn: Conn, queue_id: int) -> None:
    """Drop the group rows, dedup ids and receive attempts of a deleted queue (messages first)."""
    await conn.execute(QUERIES["queue_groups_clear"].sql, {"id": queue_id})
    await conn.execute(QUERIES["queue_dedup_clear"].sql, {"id": queue_id})
    await conn.execute(QUERIES["queue_attempts_clear"].sql, {"id": queue_id})


async def queue_stats(conn: Conn, queue_id: int, now: datetime | None) -> QueueStats:
    """Message counts of a queue."""
    cur = await conn.execute(QUERIES["queue_stats"].sql, {"queue_id": queue_id, "now": now})
    row = await cur.fetchone()
    assert row is not None
    return QueueStats(
        visible=row["visible"],
        in_flight=row["in_flight"],
        delayed=row["delayed"],
        oldest_age_seconds=row["oldest_age_seconds"],
    )


async def queue_dead_letter_sources(conn: Conn, queue_id: int) -> list[tuple[int, str]]:
    """(id, name) of the queues whose dead-letter queue this is."""
    cur = await conn.execute(QUERIES["queue_dead_letter_sources"].sql, {"id": queue_id})
    return [(row["id"], row["name"]) for row in await cur.fetchall()]


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
