"""Repository functions that move or remove messages wholesale (queries/moves.sql): dead-letter,
redrive, move, purge, and retention's expiry. Each takes a connection and never commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from app.db.rows import Conn, Group, Moved
from app.db.statements import NoRow, execute, fetch, statement


class Redrivable(NamedTuple):
    """A dead-letter message that can go back, locked: its group and its source queue."""

    id: int
    group_id: str | None
    source_queue_id: int


class SourceCount(NamedTuple):
    """How many dead letters would go back into one source queue."""

    source_queue: str
    total: int


class Purged(NamedTuple):
    """How many messages a purge removed."""

    purged: int


_DEAD_LETTER = statement("message_dead_letter", Moved)
_FINISH = statement("message_finish", Moved)
_REDRIVE_PICK_STANDARD = statement("redrive_pick_standard", Redrivable)
_REDRIVE_PICK_GROUPS = statement("redrive_pick_groups", Group)
_REDRIVE_PICK_FIFO = statement("redrive_pick_fifo", Redrivable)
_REDRIVE_COUNT = {
    fifo: statement(f"redrive_count_{'fifo' if fifo else 'standard'}", SourceCount) for fifo in (False, True)
}
_MOVE = statement("message_move", Moved)
_GROUP_LOCK_ALL = statement("group_lock_all", NoRow)
_PURGE = statement("message_purge", Purged)
_GROUP_RESET_ALL = statement("group_reset_all", NoRow)
_EXPIRED_GROUPS = statement("expired_groups", Group)
_GROUP_LOCK = statement("group_lock", Group)
_EXPIRE = statement("message_expire", Moved)


async def message_dead_letter(
    conn: Conn,
    queue_id: int,
    queue_name: str,
    dead_letter_queue_id: int,
    ids: Sequence[int],
    now: datetime | None,
) -> list[Moved]:
    """Move held messages to the dead-letter queue (copied there, then finished here as
    dead_lettered); (new id, group) in the DLQ."""
    params = {"queue_id": queue_id, "dead_letter_queue_id": dead_letter_queue_id, "ids": list(ids), "now": now}
    moved = await fetch(conn, _DEAD_LETTER, params)
    finished = {
        "queue_id": queue_id,
        "queue_name": queue_name,
        "outcome": "dead_lettered",
        "ids": list(ids),
        "now": now,
    }
    await execute(conn, _FINISH, finished)
    return moved


async def redrive_pick(
    conn: Conn,
    queue_id: int,
    fifo: bool,
    limit: int,
    now: datetime | None,
    before_id: int | None = None,
    *,
    group_id: str | None = None,
    source_queue_id: int | None = None,
) -> list[Redrivable]:
    """Lock and list dead-letter messages that can go back, at most `limit`, and none after
    `before_id` (a move task's high-water mark; None: no limit); only of `group_id` (FIFO) and
    only from `source_queue_id`, when given. FIFO: the groups are locked (up to `limit` of
    them) and the first messages of each, in group order, are listed; a group may go back over
    several batches."""
    picked = {
        "queue_id": queue_id,
        "limit": limit,
        "now": now,
        "before_id": before_id,
        "group_id": group_id,
        "source_queue_id": source_queue_id,
    }
    if not fifo:
        return await fetch(conn, _REDRIVE_PICK_STANDARD, picked)
    groups = await fetch(conn, _REDRIVE_PICK_GROUPS, picked)
    if not groups:
        return []
    params = {
        "queue_id": queue_id,
        "group_ids": [g.group_id for g in groups],
        "limit": limit,
        "before_id": before_id,
        "source_queue_id": source_queue_id,
    }
    return await fetch(conn, _REDRIVE_PICK_FIFO, params)


async def redrive_count(
    conn: Conn,
    queue_id: int,
    fifo: bool,
    now: datetime | None,
    *,
    group_id: str | None = None,
    source_queue_id: int | None = None,
) -> list[SourceCount]:
    """How many messages redrive_pick would pick now, batch after batch (nothing locked), per
    source queue they would go back into (in id order; none: no row)."""
    params = {"queue_id": queue_id, "now": now, "group_id": group_id, "source_queue_id": source_queue_id}
    return await fetch(conn, _REDRIVE_COUNT[fifo], params)


async def message_move(
    conn: Conn, queue_id: int, target_queue_id: int, ids: Sequence[int], now: datetime | None
) -> list[Moved]:
    """Move held messages into another queue as new ready messages; (new id, group)."""
    params = {"queue_id": queue_id, "target_queue_id": target_queue_id, "ids": list(ids), "now": now}
    return await fetch(conn, _MOVE, params)


async def message_purge(conn: Conn, queue_id: int, queue_name: str, now: datetime | None) -> int:
    """Remove every message of a queue into history (outcome purged); how many."""
    await execute(conn, _GROUP_LOCK_ALL, {"queue_id": queue_id})
    [row] = await fetch(conn, _PURGE, {"queue_id": queue_id, "queue_name": queue_name, "now": now})
    await execute(conn, _GROUP_RESET_ALL, {"queue_id": queue_id})
    return row.purged


async def expired_groups(
    conn: Conn, queue_id: int, retention_seconds: int, limit: int, now: datetime | None
) -> list[str]:
    """FIFO groups holding messages older than the retention period."""
    params = {"queue_id": queue_id, "retention_seconds": retention_seconds, "limit": limit, "now": now}
    return [r.group_id for r in await fetch(conn, _EXPIRED_GROUPS, params)]


async def group_lock(conn: Conn, queue_id: int, group_ids: Sequence[str]) -> list[str]:
    """Lock these groups, in group order; the ones that exist."""
    rows = await fetch(conn, _GROUP_LOCK, {"queue_id": queue_id, "group_ids": sorted(set(group_ids))})
    return [r.group_id for r in rows]


async def message_expire(
    conn: Conn,
    queue_id: int,
    queue_name: str,
    retention_seconds: int,
    group_ids: Sequence[str],
    limit: int,
    now: datetime | None,
) -> list[Moved]:
    """Remove messages older than the retention period into history (outcome expired)."""
    params = {
        "queue_id": queue_id,
        "queue_name": queue_name,
        "retention_seconds": retention_seconds,
        "group_ids": list(group_ids),
        "limit": limit,
        "now": now,
    }
    return await fetch(conn, _EXPIRE, params)
