"""PostgreSQL stopped in immediate mode (every backend killed, no checkpoint; crash recovery at the
next start) in the middle of a load of sends, receives and acks on a FIFO and a standard queue,
served by a real `pqs serve`, and started again 4 s later.

Proves: during the outage requests are answered 503 with Retry-After (calls in flight at once,
new ones after waiting the pool timeout), every call within a bound (no hang, no 500, the
process stays up); the service recovers by itself (the pool reconnects; the LISTEN session and
the maintenance leader's session come back); and the timeline checker finds nothing lost, no
acked message back, no message or FIFO group held twice inside its visibility timeout, no order
broken, in agreement with the database's own history (each message finished once). When it finds
something, what the clients saw and what the database holds for every message delivered more
than once is left in the test's tmp_path as evidence-<queue>.json (tests/faults/evidence.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.access import EVERYTHING
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.faults.evidence import write_evidence
from tests.faults.load import (
    FIFO,
    Consumer,
    Targets,
    api,
    assert_nothing_lost,
    create_queue,
    drained,
    figures,
    finished_in_db,
    probe,
    producers,
    queue_histories,
    service_sessions,
    unexpected,
)
from tests.faults.postgres import private_postgres
from tests.faults.service import pqs_serve

pytestmark = pytest.mark.xdist_group("faults")

VISIBILITY = 3
POOL_TIMEOUT = 1.0
# Long enough that calls start (and must fail) inside it even when the machine is loaded: a probe
# cycle during the outage takes up to two pool timeouts.
OUTAGE = 4.0
# A call waits at most POOL_TIMEOUT for each connection it needs (key check, queue lookup,
# statement) and a consumer's long poll lasts 1 s; beyond that plus a margin, it hung.
HANG = 3 * POOL_TIMEOUT + 1 + 2
RECOVERY = 10.0


async def test_postgres_restart_under_load(tmp_path: Path, record_property: Callable[[str, object], None]) -> None:
    with private_postgres() as (postgres, url):
        _, key = await on_connection(url, lambda conn: create_key(conn, "faults", EVERYTHING))
        env = {
            "PQS_DATA_DIR": str(tmp_path),
            "PQS_POOL_TIMEOUT_SECONDS": str(POOL_TIMEOUT),
            "PQS_MAINTENANCE_ENABLED": "true",
            "PQS_MAINTENANCE_INTERVAL_SECONDS": "1",
        }
        with pqs_serve(url, tmp_path / "serve.log", **env) as service:
            loop = asyncio.get_running_loop()
            wall_offset = time.time() - loop.time()
            histories = queue_histories(VISIBILITY)
            async with api(key) as client:
                for name in histories:
                    await create_queue(client, service.url, name)
                deadline = loop.time() + 60
                stop_sending, stop_consuming = asyncio.Event(), asyncio.Event()
                target = [service.url]
                sending_to = [Targets(target) for _ in range(2)]
                load = producers(client, sending_to, histories, stop_sending, deadline=deadline)
                consumers = [
                    Consumer(f"{name}-{c}", Targets(target), name, histories[name], VISIBILITY, hold=0.01)
                    for name in histories
                    for c in range(3)
                ]
                async with asyncio.TaskGroup() as group:
                    sending = [group.create_task(p) for p in load]
                    for consumer in consumers:
                        group.create_task(consumer.run(client, stop_consuming, deadline=deadline))
                    group.create_task(probe(client, service.url, FIFO, stop_consuming))
                    await asyncio.sleep(2.0)
                    await asyncio.to_thread(postgres.stop, "immediate")
                    down = loop.time()
                    await asyncio.sleep(OUTAGE)
                    await asyncio.to_thread(postgres.start)
                    up = loop.time()
                    # The listener and the maintenance leader reconnect too.
                    sessions = group.create_task(service_sessions(url, deadline=up + RECOVERY))
                    await asyncio.sleep(4.0)
                    stop_sending.set()
                    await asyncio.gather(*sending)
                    empty = await drained(client, service.url, histories, deadline=loop.time() + 30)
                    stop_consuming.set()
                listening = sessions.result()
                calls = client.calls
            assert service.proc.poll() is None, service.output()
        finished = {name: await finished_in_db(url, name) for name in histories}
        problems = {name: h.problems(finished[name][0]) for name, h in histories.items()}
        for name, found in problems.items():
            if found:
                evidence = tmp_path / f"evidence-{name}.json"
                await write_evidence(evidence, url, name, histories[name], found, wall_offset)

    unavailable = [c for c in calls if c.status == 503]
    recovery = {
        op: min(
            (c.finished - up for c in calls if c.op == op and c.started >= up and c.status in (200, 201)), default=-1
        )
        for op in ("send", "receive", "ack")
    }
    last_503 = max(max((c.finished for c in unavailable), default=up) - up, 0.0)
    measured = figures(histories, calls, problems) | {
        "outage_s": round(up - down, 2),
        "recovery_s": round(max(recovery.values()), 2),
        "last_503_s": round(last_503, 2),
        "listener_back_s": round(listening - up, 2),
    }
    record_property("figures", json.dumps(measured))

    assert unexpected(calls, hang_after=HANG) == []
    assert [c for c in calls if c.status is None] == [], "the service stopped answering"
    assert_nothing_lost(histories, problems, finished, empty, evidence=tmp_path)
    for name, history in histories.items():
        # The load ran on both sides of the outage.
        assert any(t < down for t in history.confirmed_at.values()), name
        assert any(t > up for t in history.confirmed_at.values()), name

    # During the outage the service answered 503 (with Retry-After: `unexpected` above).
    # PostgreSQL cannot be back before down + OUTAGE, when it is started again: a call that
    # ended before then, or started more than POOL_TIMEOUT before then, had to fail. (A call
    # started later may wait for the restart and succeed.)
    back = down + OUTAGE
    during = [c for c in calls if down <= c.started < back - POOL_TIMEOUT - 0.05]
    assert during and all(c.status == 503 for c in during)
    assert all(c.status == 503 for c in calls if down <= c.started and c.finished < back)
    # Recovered: every kind of call succeeds again soon after PostgreSQL is back, and the 503s stop.
    assert all(0 <= seconds < RECOVERY for seconds in recovery.values()), recovery
    assert last_503 < RECOVERY
    assert listening - up < RECOVERY
