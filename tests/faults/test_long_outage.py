"""A long outage of PostgreSQL is over for the service as soon as PostgreSQL is back.

psycopg_pool retries a lost connection with a doubling delay (1, 2, 4, 8, 16 ... s) until its
`reconnect_timeout`: left at its default (300 s), the pool of a service whose database was gone
for 40 s only tried again about 20 s after the database returned, and every request got 503
meanwhile. The pool now gives up a reconnection after a few seconds (app/db/engine.py), and the
next request that needs a connection starts a new one from the first, short delay.

Proves: after a 16 s outage (long enough that the next retry of the default backoff would come
some 15 s after the restart), a request that retries every 0.2 s, as a client would, is served
again within a few seconds of the restart."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.db.engine import Database
from app.db.rows import Conn
from app.errors import Unavailable
from tests.faults.postgres import private_postgres

pytestmark = pytest.mark.xdist_group("faults")

OUTAGE = 16.0
RECOVERY = 5.0


async def ping(conn: Conn) -> None:
    await conn.execute("SELECT 1")


async def test_a_long_outage_is_over_when_postgres_is_back() -> None:
    with private_postgres() as (postgres, url):
        # One connection: one chain of reconnection attempts, as the backoff would run it.
        db = Database(url, min_size=1, max_size=1, timeout=10.0)
        await db.open()
        try:
            await db.run(ping)
            await asyncio.to_thread(postgres.stop, "immediate")
            end = time.monotonic() + OUTAGE
            while time.monotonic() < end:
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
