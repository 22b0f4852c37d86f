"""A consumer that disappears holding messages (it received them and never acks), on a FIFO and a
standard queue, while other consumers go on.

Proves: its messages come back once their visibility timeout runs out, not before, with receive
count 2; the FIFO groups it held stay blocked until then, then unblock and go on in order, while
the other groups were served meanwhile; nothing is lost (timeline checker and the database's
history)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable

import httpx
import pytest
from fastapi import FastAPI

from app.access import EVERYTHING
from app.db.engine import Database
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
    fifo_keys,
    figures,
    finished_in_db,
    produce,
    queue_histories,
    standard_keys,
    unexpected,
)
from tests.faults.timeline import SLACK, Delivery

pytestmark = pytest.mark.xdist_group("faults")

VISIBILITY = 2
URL = "http://pqs.test"


async def test_messages_of_a_vanished_consumer_come_back_after_the_timeout(
    app: FastAPI, db_url: str, record_property: Callable[[str, object], None]
) -> None:
    db: Database = app.state.db
    _, key = await db.run(lambda conn: create_key(conn, "faults", EVERYTHING))
    loop = asyncio.get_running_loop()
    fifo, standard = FIFO, STANDARD
    histories = queue_histories(VISIBILITY)
    groups = [f"g{g}" for g in range(6)]
    async with api(key, httpx.ASGITransport(app=app)) as client:
        for name in histories:
            await create_queue(client, URL, name)
        deadline = loop.time() + 30
        never = asyncio.Event()
        await produce(client, Targets([URL]), fifo, histories[fifo], itertools.islice(fifo_keys(groups), 48),
                      never, deadline=deadline)  # fmt: skip
        await produce(client, Targets([URL]), standard, histories[standard], itertools.islice(standard_keys(0), 40),
                      never, deadline=deadline)  # fmt: skip

        # The vanishing consumer: one receive from each queue, then nothing, ever.
        vanished: list[Delivery] = []
        for name, limit in ((fifo, 5), (standard, 10)):
            requested = loop.time()
            body = {"max_messages": limit, "wait_seconds": 1, "visibility_timeout": VISIBILITY}
            response = await client.call(URL, "receive", "POST", f"/v1/queues/{name}/messages/receive", body)
            assert response is not None and response.status_code == 200
            vanished.append(histories[name].delivered("vanished", response.json()["messages"], requested, loop.time()))
        held_groups = {item.key[0] for item in vanished[0].items}
        assert vanished[0].items and vanished[1].items and held_groups < set(groups)

        stop = asyncio.Event()
        consumers = [
            Consumer(f"{name}-{c}", Targets([URL]), name, histories[name], VISIBILITY, max_messages=3)
            for name in histories
            for c in range(3)
        ]
        async with asyncio.TaskGroup() as group:
            for consumer in consumers:
                group.create_task(consumer.run(client, stop, deadline=deadline))
            empty = await drained(client, URL, histories, deadline=deadline)
            stop.set()
        calls = client.calls
    finished = {name: await finished_in_db(db_url, name) for name in histories}

    problems = {name: h.problems(finished[name][0]) for name, h in histories.items()}
    returns = {}
    for held, history in zip(vanished, histories.values(), strict=True):
        for item in held.items:
            again = [(d, i) for d in history.deliveries for i in d.items if i.key == item.key and d is not held]
            assert [i.receive_count for _, i in again] == [2], item.key
            returns[item.key] = again[0][0].answered_at - held.requested_at
    record_property("figures", json.dumps(figures(histories, calls, problems) | {
        "abandoned": len(returns),
        "back_after_s": [round(min(returns.values()), 2), round(max(returns.values()), 2)],
    }))  # fmt: skip

    assert unexpected(calls, hang_after=5) == [] and all(c.status is not None for c in calls)
    assert_nothing_lost(histories, problems, finished, empty)
    for name, history in histories.items():
        assert finished[name][1] == len(history.confirmed), name
    # Back after the timeout, and soon after it.
    assert all(VISIBILITY - SLACK <= back < VISIBILITY + 3 for back in returns.values()), returns
    # The held groups were blocked until then; the others were served meanwhile.
    expiry = vanished[0].requested_at + VISIBILITY
    fifo_deliveries = [d for d in histories[fifo].deliveries if d is not vanished[0]]
    early = [d for d in fifo_deliveries if d.answered_at < expiry - SLACK]
    assert early and not any(item.key[0] in held_groups for d in early for item in d.items)
