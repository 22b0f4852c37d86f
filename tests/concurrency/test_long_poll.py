"""Long polls through the HTTP API: a waiting receive returns as soon as something becomes
receivable (a send in this process or another, a delay or a visibility timeout running out, a
FIFO group released by an ack), and waits without holding a pooled connection.

Time bounds here are correctness bounds, far from the waits they tell apart (a prompt answer
against a 10 s wait), not speed measurements.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from tests.conftest import ROOT, admin_headers, settings_for
from tests.factories import api_queue

# Lets a receive reach its wait before the test makes something receivable.
GAP = 0.3
# A woken receive answers well within this; the waits it is told apart from are 5 s or more.
PROMPT = 3.0

SENDER = """
import asyncio, sys
from app.db.engine import Database
from app.domain import SendEntry
from app.service.messages import MessageService

async def main(url, queue):
    db = Database(url, min_size=1, max_size=1)
    await db.open()
    try:
        [result] = await MessageService(db, None).send(queue, [SendEntry(body={"from": "another process"})])
        print(result.sequence_number)
    finally:
        await db.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@dataclass(frozen=True)
class Received:
    """What one receive returned, and when (event-loop time)."""

    started: float
    finished: float
    messages: list[dict[str, Any]]


async def receive(client: httpx.AsyncClient, queue: str, wait_seconds: int, **options: Any) -> Received:
    """One receive request, timed."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await client.post(f"/v1/queues/{queue}/messages/receive", json={"wait_seconds": wait_seconds, **options})
    assert response.status_code == 200, response.text
    return Received(started, loop.time(), response.json()["messages"])


async def send(client: httpx.AsyncClient, queue: str, body: Any, **fields: Any) -> dict[str, Any]:
    """One send; its response body."""
    response = await client.post(f"/v1/queues/{queue}/messages", json={"body": body, **fields})
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def fifo_fields(fifo: bool, n: int) -> dict[str, Any]:
    """The fields message `n` needs on a FIFO queue (none on a standard one)."""
    return {"group_id": "g", "dedup_id": f"d{n}"} if fifo else {}


async def waiting(
    group: asyncio.TaskGroup, client: httpx.AsyncClient, queue: str, wait_seconds: int, **options: Any
) -> asyncio.Task[Received]:
    """A receive started in the background (in `group`, so a failing test cancels it) and, after
    a gap, still waiting."""
    task = group.create_task(receive(client, queue, wait_seconds, **options))
    await asyncio.sleep(GAP)
    assert not task.done(), "the receive returned before anything was receivable"
    return task


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
async def test_send_wakes_a_waiting_receive(client: httpx.AsyncClient, fifo: bool) -> None:
    name = await api_queue(client, fifo=fifo)
    async with asyncio.TaskGroup() as group:
        waiter = await waiting(group, client, name, 10)

        sent_at = asyncio.get_running_loop().time()
        sent = await send(client, name, {"n": 1}, **fifo_fields(fifo, 1))
        got = await asyncio.wait_for(waiter, 15)

    assert [m["message_id"] for m in got.messages] == [sent["message_id"]]
    assert got.finished - sent_at < PROMPT


async def test_send_from_another_process_wakes_a_waiting_receive(client: httpx.AsyncClient, db_url: str) -> None:
    name = await api_queue(client)
    async with asyncio.TaskGroup() as group:
        waiter = await waiting(group, client, name, 20)

        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SENDER,
            db_url,
            name,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        exited_at = asyncio.get_running_loop().time()
        assert proc.returncode == 0, err.decode()
        got = await asyncio.wait_for(waiter, 25)

    assert [(m["sequence_number"], m["body"]) for m in got.messages] == [
        (int(out.decode().strip()), {"from": "another process"})
    ]
    assert got.finished - exited_at < PROMPT


@pytest.mark.parametrize("order", ["send_then_wait", "wait_then_send"])
async def test_delayed_message_wakes_a_waiting_receive_when_due(client: httpx.AsyncClient, order: str) -> None:
    name = await api_queue(client)
    loop = asyncio.get_running_loop()
    async with asyncio.TaskGroup() as group:
        waiter = await waiting(group, client, name, 10) if order == "wait_then_send" else None

        sent_at = loop.time()
        sent = await send(client, name, {"n": 1}, delay_seconds=1)
        if waiter is None:
            waiter = group.create_task(receive(client, name, 10))
        got = await asyncio.wait_for(waiter, 15)

    assert [m["message_id"] for m in got.messages] == [sent["message_id"]]
    assert 0.9 <= got.finished - sent_at < PROMPT


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
async def test_visibility_timeout_running_out_wakes_a_waiting_receive(client: httpx.AsyncClient, fifo: bool) -> None:
    name = await api_queue(client, fifo=fifo)
    sent = await send(client, name, {"n": 1}, **fifo_fields(fifo, 1))
    first = await receive(client, name, 0, visibility_timeout=1)
    assert [m["receive_count"] for m in first.messages] == [1]

    got = await asyncio.wait_for(receive(client, name, 10), 15)

    assert [(m["message_id"], m["receive_count"]) for m in got.messages] == [(sent["message_id"], 2)]
    assert 0.9 <= got.finished - first.started < PROMPT


async def test_ack_releasing_a_fifo_group_wakes_a_waiting_receive(client: httpx.AsyncClient) -> None:
    name = await api_queue(client, fifo=True)
    for n in range(2):
        await send(client, name, {"n": n}, **fifo_fields(True, n))
    first = await receive(client, name, 0, visibility_timeout=60)
    assert [m["body"] for m in first.messages] == [{"n": 0}]
    async with asyncio.TaskGroup() as group:
        # The group is leased for 60 s: its next message waits for the ack.
        waiter = await waiting(group, client, name, 10)

        acked_at = asyncio.get_running_loop().time()
        ack = await client.delete(f"/v1/queues/{name}/messages/{first.messages[0]['receipt_handle']}")
        assert ack.status_code == 204, ack.text
        got = await asyncio.wait_for(waiter, 15)

    assert [m["body"] for m in got.messages] == [{"n": 1}]
    assert got.finished - acked_at < PROMPT


async def test_an_ack_that_leaves_only_a_visible_message_under_the_lease_wakes_a_waiting_receive(
    client: httpx.AsyncClient,
) -> None:
    # The group stays leased (its first message was made visible at once, but is still under
    # the lease): the ack of the rest frees the group all the same, and wakes the waiter.
    name = await api_queue(client, fifo=True)
    for n in range(2):
        await send(client, name, {"n": n}, **fifo_fields(True, n))
    first = await receive(client, name, 0, max_messages=10, visibility_timeout=60)
    head, rest = (m["receipt_handle"] for m in first.messages)
    again = {"entries": [{"id": "a", "receipt_handle": head, "visibility_timeout": 0}]}
    assert (await client.post(f"/v1/queues/{name}/messages/visibility", json=again)).status_code == 200
    async with asyncio.TaskGroup() as group:
        waiter = await waiting(group, client, name, 10)

        acked_at = asyncio.get_running_loop().time()
        ack = await client.delete(f"/v1/queues/{name}/messages/{rest}")
        assert ack.status_code == 204, ack.text
        got = await asyncio.wait_for(waiter, 15)

    assert [(m["body"], m["receive_count"]) for m in got.messages] == [({"n": 0}, 2)]
    assert got.finished - acked_at < PROMPT


async def test_waiting_receives_hold_no_pooled_connection(db_url: str) -> None:
    application: FastAPI = create_app(settings_for(db_url, pool_max_size=2, pool_min_size=1))
    transport = httpx.ASGITransport(app=application)
    loop = asyncio.get_running_loop()
    async with application.router.lifespan_context(application):
        headers = await admin_headers(application)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://pqs.test", headers=headers, timeout=30
        ) as http:
            name, other = await api_queue(http), await api_queue(http)
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(receive(http, name, 5)) for _ in range(6)]
                await asyncio.sleep(GAP)
                assert not any(t.done() for t in tasks)

                # Six receives wait on a pool of two, yet other requests get a connection at once.
                started = loop.time()
                ready = await http.get("/readyz")
                assert ready.status_code == 200, ready.text
                await send(http, other, {"n": "elsewhere"})
                assert loop.time() - started < PROMPT
                stats = application.state.db.pool.get_stats()
                assert stats["pool_available"] >= 1 and stats["requests_waiting"] == 0, stats
                assert not any(t.done() for t in tasks), "a send to another queue woke them with a message"

                sent_at = loop.time()
                batch = [{"id": f"e{i}", "body": {"n": i}} for i in range(6)]
                response = await http.post(f"/v1/queues/{name}/messages/batch", json={"entries": batch})
                assert response.status_code == 200, response.text
                got = await asyncio.wait_for(asyncio.gather(*tasks), 15)

    assert sorted(m["body"]["n"] for r in got for m in r.messages) == list(range(6))
    assert all(len(r.messages) == 1 for r in got)
    assert max(r.finished for r in got) - sent_at < PROMPT


async def test_wait_zero_returns_at_once_on_an_empty_queue(client: httpx.AsyncClient) -> None:
    # The queue's default would wait 20 s; wait_seconds=0 overrides it.
    name = await api_queue(client, receive_wait_seconds=20)

    got = await asyncio.wait_for(receive(client, name, 0), 5)

    assert got.messages == []
    assert got.finished - got.started < 1.0


async def test_long_poll_on_an_empty_queue_returns_nothing_after_its_wait(client: httpx.AsyncClient) -> None:
    name = await api_queue(client)

    got = await asyncio.wait_for(receive(client, name, 1), 5)

    assert got.messages == []
    assert 0.9 <= got.finished - got.started < PROMPT
