"""Repository functions of the maintenance loop (queries/maintenance.sql): the queues it walks and
the prunes it runs. Each takes a connection and never commits; retention's expiry is in
app.db.moves."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from app.db.rows import Conn
from app.db.statements import NoRow, execute, fetch, statement


class Retention(NamedTuple):
    """A queue and its retention period."""

    id: int
    name: str
    fifo: bool
    retention_seconds: int


_PLAN_FOR_VALUES = statement("maintenance_plan_for_values", NoRow)
_COUNT_ALONE = statement("maintenance_count_alone", NoRow)
_RETENTION_ALL = statement("queue_retention_all", Retention)
# What a round prunes, in order.
PRUNES = {
    name: statement(name, NoRow)
    for name in ("dedup_prune", "attempt_prune", "group_prune", "consumer_prune", "queue_minutes_prune")
}


async def plan_for_values(conn: Conn) -> None:
    """Plan the rest of this transaction's statements for their values (see the block)."""
    await execute(conn, _PLAN_FOR_VALUES)


async def count_alone(conn: Conn) -> None:
    """Run the rest of this transaction's statements without parallel workers (see the block)."""
    await execute(conn, _COUNT_ALONE)


async def queue_retention_all(conn: Conn) -> list[Retention]:
    """Every queue with its retention period."""
    return await fetch(conn, _RETENTION_ALL, {})


async def prune(conn: Conn, name: str, limit: int, now: datetime | None) -> int:
    """Run the prune `name` (a key of PRUNES) once: how many rows it removed (at most `limit`)."""
    return await execute(conn, PRUNES[name], {"now": now, "limit": limit})
