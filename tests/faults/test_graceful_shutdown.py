"""Graceful shutdown of a real `python -m app.cli serve` on SIGTERM (app/shutdown.py chains onto
uvicorn's handler and drains the long polls).

Proves: five long polls parked for 20 s answer 200 with no messages within 2 s; the port stops
accepting connections; a send in flight (stuck behind a lock the test holds) is not cut off but
answered 201 once the lock goes, as is a send issued just before the signal; the lifespan shuts
down completely and the process exits within a bound; and nothing is lost: a new server on the
same database finds every message sent before."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from app.access import EVERYTHING
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.faults.load import api, create_queue, waiting_on_locks
from tests.faults.service import accepting, pqs_serve

pytestmark = pytest.mark.xdist_group("faults")

DRAINED_WITHIN = 2.0
EXIT_WITHIN = 10.0


async def test_sigterm_answers_long_polls_finishes_requests_and_loses_nothing(
    db_url: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    _, key = await on_connection(db_url, lambda conn: create_key(conn, "faults", EVERYTHING))
    loop = asyncio.get_running_loop()
    env = {"PQS_DATA_DIR": str(tmp_path), "PQS_LOG_LEVEL": "info"}
    with pqs_serve(db_url, tmp_path / "first.log", **env) as service:
        url = service.url
        async with api(key) as client:
            for name in ("parked", "slow", "kept"):
                await create_queue(client, url, name)
            for n in range(5):
                sent = await client.call(url, "send", "POST", "/v1/queues/kept/messages", {"body": {"n": n}})
                assert sent is not None and sent.status_code == 201
            poll = {"max_messages": 10, "wait_seconds": 20}
            parked = [
                asyncio.create_task(client.call(url, "receive", "POST", "/v1/queues/parked/messages/receive", poll))
                for _ in range(5)
            ]
            lock = await psycopg.AsyncConnection.connect(db_url)
            try:
                await lock.execute("SELECT 1 FROM queues WHERE name = 'slow' FOR UPDATE")
                stuck = asyncio.create_task(
                    client.call(url, "send", "POST", "/v1/queues/slow/messages", {"body": {"n": "stuck"}})
                )
                await waiting_on_locks(db_url, 1)
                last = asyncio.create_task(
                    client.call(url, "send", "POST", "/v1/queues/kept/messages", {"body": {"n": 5}})
                )
                await asyncio.sleep(0.3)  # the long polls are parked by now
                assert not any(task.done() for task in parked)
                signalled = loop.time()
                service.send_signal(signal.SIGTERM)
                drained = await asyncio.wait_for(asyncio.gather(*parked), 5)
                drained_after = loop.time() - signalled
                closed_after = None
                for _ in range(40):
                    if not accepting(service.port):
                        closed_after = loop.time() - signalled
                        break
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.2)
                # The stuck send holds the shutdown up; it has not been cut off.
                still_running = not stuck.done() and service.proc.poll() is None
            finally:
                await lock.rollback()
                await lock.close()
            answered = await asyncio.wait_for(stuck, 5)
            before = await asyncio.wait_for(last, 5)
        status = await asyncio.to_thread(service.proc.wait, EXIT_WITHIN)
        exited_after = loop.time() - signalled
        log = service.output()

    with pqs_serve(db_url, tmp_path / "second.log", PQS_DATA_DIR=str(tmp_path)) as again:
        async with api(key) as client:
            found = {}
            for name in ("kept", "slow", "parked"):
                got = await client.call(
                    again.url, "receive", "POST", f"/v1/queues/{name}/messages/receive", poll | {"wait_seconds": 0}
                )
                assert got is not None and got.status_code == 200
                found[name] = sorted(str(m["body"]["n"]) for m in got.json()["messages"])

    record_property("figures", json.dumps({
        "long_polls_answered_s": round(drained_after, 2),
        "port_closed_s": closed_after and round(closed_after, 2),
        "exited_s": round(exited_after, 2),
        "exit_status": status,
    }))  # fmt: skip

    assert all(r is not None and r.status_code == 200 and r.json() == {"messages": []} for r in drained)
    assert drained_after < DRAINED_WITHIN
    assert closed_after is not None
    assert still_running
    assert answered is not None and answered.status_code == 201
    assert before is not None and before.status_code == 201
    # uvicorn re-raises the signal once its graceful shutdown is done (the conventional exit of
    # a signalled process, shell status 143); the log shows the lifespan finished first.
    assert status == 0, log
    assert "Application shutdown complete." in log
    assert found == {"kept": ["0", "1", "2", "3", "4", "5"], "slow": ["stuck"], "parked": []}
