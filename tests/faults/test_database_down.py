"""PostgreSQL stopped under a real `pqs serve` with the default pool timeout (10 s), then started
again.

Proves: while the database is down, `/readyz` answers 503 within its own short bound and a /v1
request answers 503 with Retry-After at once (the circuit in app/db/engine.py), not after the
pool timeout, call after call, whatever the pool held when the database went; once PostgreSQL is
back, both succeed again within seconds."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.access import EVERYTHING
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.faults.postgres import private_postgres
from tests.faults.service import pqs_serve

pytestmark = pytest.mark.xdist_group("faults")

FAIL_FAST = 2.0  # what a 503 may take (the pool timeout, which it must not wait, is 10 s)
CALLS = 8  # more than the pool held connections, so that the pool is empty before the last ones
PAUSE = 0.3  # between calls: the calls span several of the circuit's trial periods (1 s)
RECOVERY = 15.0  # the pool reconnects with a growing delay (1, 2, 4 ... s), from the first failure


async def timed(client: httpx.AsyncClient, path: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = await client.get(path)
    return response, time.monotonic() - started


async def test_database_down_fails_fast_and_recovers(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    with private_postgres() as (postgres, url):
        _, key = await on_connection(url, lambda conn: create_key(conn, "down", EVERYTHING))
        with pqs_serve(url, tmp_path / "serve.log", PQS_DATA_DIR=str(tmp_path)) as service:
            headers = {"Authorization": f"Bearer {key}"}
            # A client timeout well below the pool timeout: waiting for the pool fails the test.
            async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=5.0) as client:
                assert (await client.get("/v1/queues")).status_code == 200
                await asyncio.to_thread(postgres.stop, "immediate")

                took: list[float] = []
                for _ in range(CALLS):
                    ready, ready_took = await timed(client, "/readyz")
                    assert ready.status_code == 503, ready.text
                    assert ready.json()["error"]["code"] == "unavailable"
                    assert ready_took < FAIL_FAST, ready_took
                    listed, listed_took = await timed(client, "/v1/queues")
                    assert listed.status_code == 503, listed.text
                    assert listed.headers.get("retry-after") == "1"
                    assert listed_took < FAIL_FAST, listed_took
                    took += [ready_took, listed_took]
                    await asyncio.sleep(PAUSE)

                await asyncio.to_thread(postgres.start)
                up = time.monotonic()
                deadline = up + RECOVERY
                statuses: list[tuple[int, int]] = []
                while time.monotonic() < deadline:
                    ready = await client.get("/readyz")
                    listed = await client.get("/v1/queues")
                    statuses.append((ready.status_code, listed.status_code))
                    if statuses[-1] == (200, 200):
                        break
                    await asyncio.sleep(0.2)
                assert statuses[-1] == (200, 200), statuses[-5:]
                figures = {"slowest_503_s": round(max(took), 3), "recovery_s": round(time.monotonic() - up, 2)}
                record_property("figures", json.dumps(figures))
            assert service.proc.poll() is None, service.output()
