"""A backfill task's key claim (backfill_keys_claim) against a concurrent claimer, on two real
connections: the plain insert waits for the other transaction; when that one commits a key
first, the claim falls back to ON CONFLICT DO NOTHING and leaves that row to it; when it rolls
back, the claim takes every key. A claim of all the keys at once (backfill_keys_claim_all) falls
back to the same claim when one of them is there."""

from __future__ import annotations

import asyncio
import hashlib

import psycopg
import pyarrow as pa
import pytest
from psycopg.rows import dict_row

from app.db.rows import Conn
from app.pipeline.backfill.rows import KEY_PREFIX, key_text
from app.pipeline.backfill.task import claim_keys
from app.pipeline.exports import SQL

pytestmark = pytest.mark.xdist_group("pipeline")
QUEUE_ID = 7
WAIT_SECONDS = 10.0


def key(n: int) -> str:
    return KEY_PREFIX + hashlib.sha256(str(n).encode()).hexdigest()


async def stage(conn: Conn, keys: list[str]) -> None:
    await conn.execute(SQL["backfill_keys_stage"].sql)
    async with conn.cursor().copy(SQL["backfill_keys_copy"].sql) as copy:
        for chunk in key_text(pa.array(keys, pa.string())):
            await copy.write(chunk)


async def claim_in_transaction(conn: Conn, keys: list[str], *, all_at_once: bool = False) -> list[int]:
    async with conn.transaction():
        await stage(conn, keys)
        return await claim_keys(conn, QUEUE_ID, len(keys) if all_at_once else 0)


async def wait_until_blocked(watcher: Conn, pid: int) -> None:
    """Until backend `pid` waits for a lock (bounded)."""
    deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
    while asyncio.get_running_loop().time() < deadline:
        row = await (
            await watcher.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
        ).fetchone()
        if row and row["wait_event_type"] == "Lock":
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"backend {pid} never waited for a lock")


@pytest.mark.parametrize("first_commits", [True, False])
async def test_a_key_claimed_meanwhile_is_left_to_its_claimer(db_url: str, first_commits: bool) -> None:
    connect = psycopg.AsyncConnection.connect
    async with (
        await connect(db_url, row_factory=dict_row, autocommit=True) as first,
        await connect(db_url, row_factory=dict_row, autocommit=True) as second,
        await connect(db_url, row_factory=dict_row, autocommit=True) as watcher,
    ):
        await first.execute("BEGIN")
        await stage(first, [key(1)])
        assert await claim_keys(first, QUEUE_ID) == [0]

        contender = asyncio.create_task(claim_in_transaction(second, [key(1), key(2)]))
        await wait_until_blocked(watcher, second.info.backend_pid)
        await first.execute("COMMIT" if first_commits else "ROLLBACK")

        claimed = await asyncio.wait_for(contender, WAIT_SECONDS)
        rows = await (await watcher.execute("SELECT count(*) AS n FROM backfill_keys")).fetchone()

    assert claimed == ([1] if first_commits else [0, 1])
    assert rows == {"n": 2}


async def test_keys_claimed_before_are_not_claimed_again(db_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(db_url, row_factory=dict_row, autocommit=True) as conn:
        assert await claim_in_transaction(conn, [key(1), key(2)]) == [0, 1]
        assert await claim_in_transaction(conn, [key(3), key(2), key(1), key(4)]) == [0, 3]
        assert await claim_in_transaction(conn, [key(4)]) == []


async def test_a_claim_of_all_keys_at_once_falls_back_when_one_is_there(db_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(db_url, row_factory=dict_row, autocommit=True) as conn:
        assert await claim_in_transaction(conn, [key(1), key(2)], all_at_once=True) == [0, 1]
        assert await claim_in_transaction(conn, [key(3), key(2), key(4)], all_at_once=True) == [0, 2]
        rows = await (await conn.execute("SELECT count(*) AS n FROM backfill_keys")).fetchone()
    assert rows == {"n": 4}
