"""What a statement read, counted by PostgreSQL's own statistics: for checks that work stays on
the rows it is about, however large the table."""

from __future__ import annotations

import psycopg

from app.db.engine import Database


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
