"""A long outage of PostgreSQL is over for the service as soon as PostgreSQL is back.

psycopg_pool retries a lost connection with a doubling delay (1, 2, 4, 8, 16 ... s) until its
`reconnect_timeout`: left at its default (300 s), the pool of a service whose database was gone
for 40 s only tried again about 20 s after the database returned, and every request got 503
meanwhile. The pool now gives up a reconnection after a few seconds (app/db/engine.py), and the
next request that needs a connection starts a new one from the first, short delay.

Proves: PostgreSQL comes back right after the pool's fifth failed attempt to connect, where the
default backoff is at its worst so far (its fifth attempt comes some 15 s into the outage, the
sixth 16 s after that), and a request that retries every 0.2 s, as a client would, is served
again within a few seconds of the restart. The outage ends on the pool's count of attempts,
not on a clock: a fixed length could end just before an attempt of the old backoff, which then
found PostgreSQL back and passed; the fixed pool gets there after some 6 s."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.db.engine import Database
from app.db.rows import Conn
from app.errors import Unavailable
from tests.faults.postgres import private_postgres

pytestmark = pytest.mark.xdist_group("faults")

FAILED_CONNECTS = 5
OUTAGE_LIMIT = 60.0  # the default backoff's fifth attempt comes by ~17 s, the fixed pool's by ~7 s
RECOVERY = 5.0


async def ping(conn: Conn) -> None:
    await conn.execute("SELECT 1")


def failed_connects(db: Database) -> int:
    """The pool's failed attempts to connect so far."""
    return db.pool.get_stats().get("connections_errors", 0)


async def test_a_long_outage_is_over_when_postgres_is_back() -> None:
    with private_postgres() as (postgres, url):
        # One connection: one chain of reconnection attempts, as the backoff would run it.
        db = Database(url, min_size=1, max_size=1, timeout=10.0)
        await db.open()
        try:
            await db.run(ping)
            before = failed_connects(db)
            await asyncio.to_thread(postgres.stop, "immediate")
            end = time.monotonic() + OUTAGE_LIMIT
            while failed_connects(db) - before < FAILED_CONNECTS:
                assert time.monotonic() < end, f"the pool tried to connect {failed_connects(db) - before} times"
                with pytest.raises(Unavailable):
                    await db.run(ping)
                await asyncio.sleep(0.2)
            await asyncio.to_thread(postgres.start)
            up = time.monotonic()
            while True:
                try:
                    await db.run(ping)
                    break
                except Unavailable:
                    assert time.monotonic() - up < RECOVERY, "still unavailable after PostgreSQL came back"
                    await asyncio.sleep(0.2)
        finally:
            await db.close()
