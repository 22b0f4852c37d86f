"""Repository functions of a queue's activity (queries/activity.sql): its minutes (sent, acked,
dead-lettered, the leader's counts) and its FIFO groups (the leader's census, the heads and
leases now). Each takes a connection and never commits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any, NamedTuple

from app.db.rows import Conn
from app.db.statements import NoRow, execute, fetch, fetch_one, statement
from app.domain import QueueStats


class Minute(NamedTuple):
    """One minute of a queue (queue_minutes_range)."""

    minute: datetime
    sent: int
    acked: int
    dead_lettered: int
    visible: int | None
    in_flight: int | None
    delayed: int | None
    oldest_age_seconds: float | None


class MinuteCounts(NamedTuple):
    """What one process counted for a queue in a minute (queue_minutes_add)."""

    queue_id: int
    minute: datetime
    sent: int
    acked: int
    dead_lettered: int


class Census(NamedTuple):
    """A FIFO queue's latest group census (group_census_take): the groups are
    [{"group_id", "messages"}]."""

    counted_at: datetime
    group_count: int
    largest: list[dict[str, Any]]
    oldest: list[dict[str, Any]]


class Head(NamedTuple):
    """The first message of a group now."""

    group_id: str
    sequence_number: int
    sent_at: datetime
    age_seconds: float
    state: str
    receive_count: int


class Lease(NamedTuple):
    """A group a receive holds: its messages in flight, when it was taken and when it ends."""

    group_id: str
    messages: int
    leased_at: datetime
    lease_age_seconds: float
    lease_expires_at: datetime


_ADD = statement("queue_minutes_add", NoRow)
_SAMPLE = statement("queue_minutes_sample", NoRow)
_RANGE = statement("queue_minutes_range", Minute)
_CENSUS_TAKE = statement("group_census_take", NoRow)
_CENSUS_GET = statement("group_census_get", Census)
_HEADS = statement("group_heads", Head)
_IN_FLIGHT = statement("group_in_flight", Lease)


async def queue_minutes_add(conn: Conn, counts: Sequence[MinuteCounts]) -> None:
    """Add these counts to their minutes (each (queue, minute) once)."""
    if counts:
        columns = list(zip(*counts, strict=True))
        names = ("queue_ids", "minutes", "sent", "acked", "dead_lettered")
        await execute(conn, _ADD, {name: list(column) for name, column in zip(names, columns, strict=True)})


async def queue_minutes_sample(conn: Conn, queue_id: int, stats: QueueStats, now: datetime | None) -> None:
    """Record the leader's count of the queue as its depth in this minute."""
    params = {"queue_id": queue_id, "now": now, **asdict(stats)}
    await execute(conn, _SAMPLE, params)


async def queue_minutes_range(conn: Conn, queue_id: int, minutes: int, now: datetime | None) -> list[Minute]:
    """The queue's last `minutes` minutes, oldest first, every minute answered."""
    return await fetch(conn, _RANGE, {"queue_id": queue_id, "minutes": minutes, "now": now})


async def group_census_take(conn: Conn, queue_id: int, limit: int, now: datetime | None) -> None:
    """Count the FIFO queue's groups and keep the `limit` largest and oldest (see the block)."""
    await execute(conn, _CENSUS_TAKE, {"queue_id": queue_id, "limit": limit, "now": now})


async def group_census_get(conn: Conn, queue_id: int) -> Census | None:
    """The queue's latest census, if the leader has made one."""
    return await fetch_one(conn, _CENSUS_GET, {"queue_id": queue_id})


async def group_heads(conn: Conn, queue_id: int, group_ids: Sequence[str], now: datetime | None) -> dict[str, Head]:
    """The first message of each group that still has one, by group id."""
    if not group_ids:
        return {}
    rows = await fetch(conn, _HEADS, {"queue_id": queue_id, "group_ids": list(group_ids), "now": now})
    return {row.group_id: row for row in rows}


async def group_in_flight(conn: Conn, queue_id: int, limit: int, now: datetime | None) -> list[Lease]:
    """Up to `limit` groups a receive holds, longest held first."""
    return await fetch(conn, _IN_FLIGHT, {"queue_id": queue_id, "limit": limit, "now": now})
