"""Reads of the database for checks: what a statement read, counted by PostgreSQL's own
statistics (work stays on the rows it is about, however large the table), and every row of the
queue tables (a refused request changed nothing)."""

from __future__ import annotations

from typing import Any

import psycopg

from app.db.engine import Database
from app.db.rows import Conn

QUEUE_TABLES = (
    "queues",
    "messages",
    "message_groups",
    "message_dedup",
    "message_history",
    "receive_attempts",
    "queue_tags",
    "message_move_tasks",
)


async def messages_rows_read(url: str, pool: Database) -> int:
    """Rows of `messages` read so far by scans of any kind (pg_stat_user_tables). `pool` must have
    one connection: its backend is made to flush its statistics, which it does before it
    answers the statement."""
    async with pool.connection() as conn:
        await conn.execute("SELECT pg_stat_force_next_flush()")
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as reader:
        cur = await reader.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)"
            " FROM pg_stat_user_tables WHERE relname = 'messages'"
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def every_row(db: Database) -> list[Any]:
    """Every row of every queue table, in a stable order: equal snapshots mean nothing changed."""

    async def read(conn: Conn) -> list[Any]:
        rows = []
        for table in QUEUE_TABLES:
            cur = await conn.execute(
                f"SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY to_jsonb(t)::text), '[]') AS r FROM {table} t"
            )
            row = await cur.fetchone()
            assert row is not None
            rows.append(row["r"])
        return rows

    return await db.run(read)
