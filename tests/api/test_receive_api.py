"""Contract of receiving: message shape, bounds, attempt ids, FIFO order, long polling."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import httpx
from fastapi import FastAPI

from tests.api.helpers import ack, assert_error, counts, receive, send, stats
from tests.factories import api_queue

MESSAGE_FIELDS = {
    "message_id",
    "receipt_handle",
    "body",
    "group_id",
    "dedup_id",
    "sequence_number",
    "receive_count",
    "sent_at",
    "first_received_at",
    "attributes",
    "attribute_types",
    "sender_id",
    "trace_header",
}


async def test_received_message_shape(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    sent = await send(client, queue, {"job": 7}, group_id="g", dedup_id="d", attributes={"trace": "t1"})
    response = await client.post(f"/v1/queues/{queue}/messages/receive", json={})
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"messages"}
    [message] = response.json()["messages"]
    assert set(message) == MESSAGE_FIELDS
    assert message["message_id"] == sent["message_id"]
    assert message["sequence_number"] == sent["sequence_number"]
    assert message["body"] == {"job": 7}
    assert (message["group_id"], message["dedup_id"]) == ("g", "d")
    assert message["attributes"] == {"trace": "t1"}
    assert (message["attribute_types"], message["sender_id"], message["trace_header"]) == (None, None, None)
    assert message["receive_count"] == 1
    assert isinstance(message["receipt_handle"], str) and message["receipt_handle"]
    sent_at = datetime.fromisoformat(message["sent_at"])
    first_received_at = datetime.fromisoformat(message["first_received_at"])
    assert sent_at.tzinfo is not None and first_received_at >= sent_at

    standard = await api_queue(client)
    await send(client, standard, 1)
    [plain] = await receive(client, standard)
    assert set(plain) == MESSAGE_FIELDS
    assert (plain["group_id"], plain["dedup_id"], plain["attributes"]) == (None, None, {})


async def test_receive_bounds_are_400(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    url = f"/v1/queues/{queue}/messages/receive"
    bad: list[dict[str, Any]] = [
        {"max_messages": 0},
        {"max_messages": 101},
        {"wait_seconds": -1},
        {"wait_seconds": 21},
        {"visibility_timeout": -1},
        {"visibility_timeout": 43_201},
        {"attempt_id": ""},
        {"attempt_id": "x" * 129},
        {"max_messages": 1, "unknown": True},
    ]
    for body in bad:
        assert_error(await client.post(url, json=body), 400, "invalid_request")
    assert_error(await client.post("/v1/queues/nope/messages/receive", json={}), 404, "queue_not_found")


async def test_max_messages_and_empty_queue(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    assert await receive(client, queue, max_messages=100) == []
    for n in range(5):
        await send(client, queue, n)
    assert len(await receive(client, queue, max_messages=3)) == 3
    assert len(await receive(client, queue, max_messages=100)) == 2
    assert await receive(client, queue, max_messages=100) == []
    assert counts(await stats(client, queue)) == (0, 5, 0)


async def test_attempt_id_repeats_the_same_receive(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    for n in range(3):
        await send(client, queue, n)
    first = await receive(client, queue, max_messages=2, attempt_id="attempt-1")
    assert len(first) == 2
    again = await receive(client, queue, max_messages=2, attempt_id="attempt-1")
    key = [(m["message_id"], m["receipt_handle"], m["body"]) for m in first]
    assert [(m["message_id"], m["receipt_handle"], m["body"]) for m in again] == key

    other = await receive(client, queue, max_messages=10, attempt_id="attempt-2")
    assert [m["body"] for m in other] == [({0, 1, 2} - {m["body"] for m in first}).pop()]
    # The repeated handles are live ones.
    assert (await ack(client, queue, *(m["receipt_handle"] for m in again)))["failed"] == []


async def test_a_retried_attempt_resets_the_visibility_timeout(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, visibility_timeout=600)
    await send(client, queue, "x")
    [first] = await receive(client, queue, attempt_id="attempt-1")
    # The retry hides the message for its own timeout from now: 0, so it is visible at once.
    [again] = await receive(client, queue, attempt_id="attempt-1", visibility_timeout=0)
    assert again["receipt_handle"] == first["receipt_handle"]
    [next_one] = await receive(client, queue)
    assert next_one["message_id"] == first["message_id"] and next_one["receive_count"] == 2


async def test_receive_with_visibility_timeout_zero_delivers_again(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, visibility_timeout=600)
    await send(client, queue, "x")
    [first] = await receive(client, queue, visibility_timeout=0)
    [second] = await receive(client, queue)
    assert second["message_id"] == first["message_id"]
    assert second["receive_count"] == 2
    assert second["receipt_handle"] != first["receipt_handle"]
    assert second["first_received_at"] == first["first_received_at"]
    assert await receive(client, queue) == []


async def test_fifo_group_order_and_one_receive_per_group(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    for n in range(3):
        await send(client, queue, n, group_id="a", dedup_id=f"a{n}")
    await send(client, queue, "b0", group_id="b", dedup_id="b0")

    first = await receive(client, queue, max_messages=1)
    second = await receive(client, queue, max_messages=1)
    assert {first[0]["group_id"], second[0]["group_id"]} == {"a", "b"}
    # Both groups have a receive in flight: nothing else may be delivered.
    assert await receive(client, queue, max_messages=10) == []

    head_of_a = next(m for m in first + second if m["group_id"] == "a")
    assert head_of_a["body"] == 0
    await ack(client, queue, head_of_a["receipt_handle"])
    following = await receive(client, queue, max_messages=10)
    assert [m["body"] for m in following] == [1, 2][: len(following)]
    assert following and following[0]["body"] == 1


async def waiter_subscribed(app: FastAPI, task: asyncio.Task[Any]) -> None:
    """Return once a long-poll receive is parked on the app's wake-up registry."""
    deadline = time.monotonic() + 5
    while not app.state.wakeup._waiters and not task.done():
        assert time.monotonic() < deadline, "the receive never started waiting"
        await asyncio.sleep(0.005)  # polling a condition, not waiting out a duration


async def test_long_poll_returns_when_a_message_arrives(app: FastAPI, client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    started = time.monotonic()
    waiting = asyncio.create_task(client.post(f"/v1/queues/{queue}/messages/receive", json={"wait_seconds": 10}))
    await waiter_subscribed(app, waiting)
    assert not waiting.done()
    await send(client, queue, "wake up")
    response = await asyncio.wait_for(waiting, timeout=8)
    assert response.status_code == 200, response.text
    assert [m["body"] for m in response.json()["messages"]] == ["wake up"]
    assert time.monotonic() - started < 5


async def test_long_poll_times_out_empty(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    started = time.monotonic()
    response = await client.post(f"/v1/queues/{queue}/messages/receive", json={"wait_seconds": 1})
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert response.json() == {"messages": []}
    assert 0.9 <= elapsed < 3
