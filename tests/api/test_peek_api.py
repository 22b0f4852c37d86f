"""Contract of peek (GET /v1/queues/{name}/messages): a look at a queue that changes nothing."""

from __future__ import annotations

import httpx

from app.db.engine import Database
from tests.api.helpers import assert_error, receive, send
from tests.factories import api_queue
from tests.reads import every_row


async def peek(client: httpx.AsyncClient, queue: str, **params: int) -> list[dict[str, object]]:
    response = await client.get(f"/v1/queues/{queue}/messages", params=params)
    assert response.status_code == 200, response.text
    messages: list[dict[str, object]] = response.json()["messages"]
    return messages


async def test_peek_shows_a_standard_queue_in_receive_order_and_changes_nothing(
    client: httpx.AsyncClient, db: Database
) -> None:
    queue = await api_queue(client)
    for n in range(3):
        await send(client, queue, {"n": n}, attributes={"k": str(n)})
    [held] = await receive(client, queue, visibility_timeout=600)
    before = await every_row(db)

    seen = await peek(client, queue)

    assert await every_row(db) == before
    assert [m["body"] for m in seen] == [{"n": 1}, {"n": 2}, held["body"]]  # due first, the held one last
    assert [m["state"] for m in seen] == ["ready", "ready", "in_flight"]
    assert [m["receive_count"] for m in seen] == [0, 0, 1]
    assert seen[0]["attributes"] == {"k": "1"} and seen[0]["source_queue"] is None
    assert [m["body"] for m in await peek(client, queue, limit=1)] == [{"n": 1}]
    # A receive after the peek gets what it would have got: the peek leased nothing.
    assert [m["body"] for m in await receive(client, queue, max_messages=10)] == [{"n": 1}, {"n": 2}]


async def test_peek_shows_a_fifo_queue_group_by_group(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True, content_based_deduplication=True)
    for n in range(3):
        for group in ("b", "a"):
            await send(client, queue, f"{group}{n}", group_id=group)
    seen = await peek(client, queue)
    assert [m["body"] for m in seen] == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert [m["sequence_number"] for m in seen[:3]] == sorted(m["sequence_number"] for m in seen[:3])


async def test_peek_at_a_dead_letter_queue_shows_where_and_why(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client)
    source = await api_queue(client, dead_letter={"queue": dlq, "max_receive_count": 1})
    await send(client, source, {"job": "poison"})
    [got] = await receive(client, source)
    nacked = await client.post(
        f"/v1/queues/{source}/messages/nack",
        json={"entries": [{"id": "1", "receipt_handle": got["receipt_handle"], "error": {"why": "boom"}}]},
    )
    assert nacked.status_code == 200, nacked.text
    assert await receive(client, source) == []  # over max_receive_count: dead-lettered
    [dead] = await peek(client, dlq)
    assert dead["source_queue"] == source and dead["last_error"] == {"why": "boom"}
    assert dead["body"] == {"job": "poison"} and dead["state"] == "ready"


async def test_peek_refusals(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    for limit in (0, 101, -1):
        assert_error(await client.get(f"/v1/queues/{queue}/messages", params={"limit": limit}), 400, "invalid_request")
    assert_error(await client.get(f"/v1/queues/{queue}/messages", params={"limit": "x"}), 400, "invalid_request")
    assert_error(await client.get("/v1/queues/missing/messages"), 404, "queue_not_found")
    assert await peek(client, queue) == []
