"""Two `pqs serve` processes on one database under a load of sends, receives and acks on a FIFO
and a standard queue; one of them is killed with SIGKILL in the middle.

Proves: the other process keeps serving throughout (not one failed request against it);
producers that lose their process resend to the other one with the same dedup ids; the
messages that the dead process's consumers held (received, never acked) come back after their
visibility timeout, and not before, with a higher receive count, and their FIFO groups go on
in order; the maintenance leadership and the LISTEN sessions settle on the survivor; and the
timeline checker finds nothing lost, no acked message back, nothing held twice, no order broken
(the database's history agrees)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from app.access import EVERYTHING
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.faults.load import (
    FIFO,
    STANDARD,
    Consumer,
    Targets,
    api,
    assert_nothing_lost,
    create_queue,
    drained,
    figures,
    finished_in_db,
    producers,
    queue_histories,
    service_sessions,
    unexpected,
)
from tests.faults.service import pqs_serve
from tests.faults.timeline import SLACK

pytestmark = pytest.mark.xdist_group("faults")

VISIBILITY = 2
HOLD = 0.3  # the doomed process's consumers hold each delivery this long before acking
BACK_WITHIN = 6.0  # seconds after the timeout by which an abandoned message is delivered again


async def test_sigkill_of_one_service_process_under_load(
    db_url: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    _, key = await on_connection(db_url, lambda conn: create_key(conn, "faults", EVERYTHING))
    env = {"PQS_MAINTENANCE_ENABLED": "true", "PQS_MAINTENANCE_INTERVAL_SECONDS": "0.5"}
    loop = asyncio.get_running_loop()
    histories = queue_histories(VISIBILITY)
    with (
        pqs_serve(db_url, tmp_path / "a.log", PQS_DATA_DIR=str(tmp_path / "a"), **env) as doomed,
        pqs_serve(db_url, tmp_path / "b.log", PQS_DATA_DIR=str(tmp_path / "b"), **env) as survivor,
    ):
        a, b = doomed.url, survivor.url
        async with api(key) as client:
            for name in histories:
                await create_queue(client, b, name)
            deadline = loop.time() + 60
            stop_sending, stop_consuming = asyncio.Event(), asyncio.Event()
            # Each producer starts on its own process and fails over to the survivor.
            sending_to = [Targets([first, b]) for first in (a, b)]
            load = producers(client, sending_to, histories, stop_sending, deadline=deadline)
            dying = [
                Consumer(f"a-{name}-{c}", Targets([a]), name, histories[name], VISIBILITY, hold=HOLD)
                for name in histories
                for c in range(2)
            ]
            living = [
                Consumer(f"b-{name}-{c}", Targets([b]), name, histories[name], VISIBILITY, hold=0.01)
                for name in histories
                for c in range(2)
            ]
            async with asyncio.TaskGroup() as group:
                sending = [group.create_task(p) for p in load]
                for consumer in dying + living:
                    group.create_task(consumer.run(client, stop_consuming, deadline=deadline))
                await asyncio.sleep(1.5)
                killed = loop.time()
                doomed.send_signal(signal.SIGKILL)
                for consumer in dying:
                    consumer.quit.set()  # its workers die with it
                status = await asyncio.to_thread(doomed.proc.wait, 10)
                dead = loop.time()
                settled = group.create_task(service_sessions(db_url, deadline=killed + 10))
                await asyncio.sleep(VISIBILITY + 1.5)
                stop_sending.set()
                await asyncio.gather(*sending)
                empty = await drained(client, b, histories, deadline=loop.time() + 30)
                stop_consuming.set()
            calls = client.calls
        assert status == -signal.SIGKILL
        # The key was made beforehand: neither process made an admin key of its own.
        assert await asyncio.to_thread(lambda: list(tmp_path.glob("*/admin.key"))) == []
        assert survivor.proc.poll() is None, survivor.output()
    finished = {name: await finished_in_db(db_url, name) for name in histories}

    problems = {name: h.problems(finished[name][0]) for name, h in histories.items()}
    # What the dead process's consumers held without having tried to ack it must come back.
    abandoned = [(d, item) for c in dying for d in c.abandoned for item in d.items if item.key not in d.acks]
    returns = []
    for delivery, item in abandoned:
        history = histories[FIFO if item.key[0] is not None else STANDARD]
        again = [
            d for d in history.deliveries for i in d.items if i.key == item.key and i.receive_count > item.receive_count
        ]
        returns.append(min((d.answered_at for d in again), default=float("inf")) - delivery.requested_at)
    measured = figures(histories, calls, problems) | {
        "abandoned": len(abandoned),
        "back_after_s": [round(min(returns, default=0), 2), round(max(returns, default=0), 2)],
        "survivor_failures": sum(1 for c in calls if c.target == b and c.status not in (200, 201)),
        "settled_s": round(settled.result() - killed, 2),
    }
    record_property("figures", json.dumps(measured))

    assert [c for c in calls if c.target == b and c.status not in (200, 201)] == []
    # The dead process answered well until it was killed, and nothing once it was gone.
    assert [c for c in calls if c.target == a and c.status not in (200, 201) and c.finished < killed] == []
    assert [c for c in calls if c.target == a and c.started > dead and c.status is not None] == []
    assert unexpected(calls, hang_after=5) == []
    assert_nothing_lost(histories, problems, finished, empty)
    for name, history in histories.items():
        assert any(t > killed for t in history.confirmed_at.values()), name
    assert abandoned, "the killed process's consumers held nothing; the test proved nothing"
    assert all(VISIBILITY - SLACK <= back <= VISIBILITY + BACK_WITHIN for back in returns), returns
