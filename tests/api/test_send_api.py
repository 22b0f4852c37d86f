"""Contract of sending: one message, batches, deduplication, body and size rules."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.api.helpers import ack, assert_error, counts, failures, receive, send, stats, successes
from tests.factories import api_queue

MAX_REQUEST_BYTES = 8 * 1024 * 1024


async def test_send_returns_id_sequence_and_duplicate_flag(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    response = await client.post(f"/v1/queues/{queue}/messages", json={"body": {"task": 1}})
    assert response.status_code == 201, response.text
    first = response.json()
    assert set(first) == {"message_id", "sequence_number", "duplicate"}
    uuid.UUID(first["message_id"])
    assert isinstance(first["sequence_number"], int)
    assert first["duplicate"] is False

    second = await send(client, queue, {"task": 2})
    assert second["sequence_number"] > first["sequence_number"]
    assert second["message_id"] != first["message_id"]
    assert counts(await stats(client, queue)) == (2, 0, 0)


async def test_send_to_unknown_queue_is_404(client: httpx.AsyncClient) -> None:
    assert_error(await client.post("/v1/queues/nope/messages", json={"body": 1}), 404, "queue_not_found")
    assert_error(await client.post("/v1/queues/a.b/messages", json={"body": 1}), 400, "invalid_queue_name")


async def test_body_can_be_any_json_value(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    bodies: list[Any] = [
        {"a": [1, {"b": None}], "é": "ünïcode ✓"},
        [1, "two", 3.5],
        "text",
        42,
        -0.25,
        10**20,
        None,
        True,
        False,
        {},
        [],
        "",
    ]
    for body in bodies:
        await send(client, queue, body)
    received = await receive(client, queue, max_messages=100)
    assert [m["body"] for m in sorted(received, key=lambda m: m["sequence_number"])] == bodies


async def test_body_is_required(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    assert_error(await client.post(f"/v1/queues/{queue}/messages", json={}), 400, "invalid_request")
    response = await client.post(f"/v1/queues/{queue}/messages", json={"body": 1, "priority": 3})
    assert_error(response, 400, "invalid_request")
    assert counts(await stats(client, queue)) == (0, 0, 0)


async def test_group_and_dedup_rules_by_queue_kind(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    url = f"/v1/queues/{queue}/messages"
    assert_error(await client.post(url, json={"body": 1, "dedup_id": "d"}), 400, "invalid_message")
    assert_error(await client.post(url, json={"body": 1, "group_id": "g"}), 400, "invalid_message")
    response = await client.post(url, json={"body": 1, "group_id": "g", "dedup_id": "d", "delay_seconds": 5})
    assert_error(response, 400, "invalid_message")
    assert counts(await stats(client, queue)) == (0, 0, 0)

    sent = await send(client, queue, 1, group_id="g", dedup_id="d")
    [message] = await receive(client, queue)
    assert (message["message_id"], message["group_id"], message["dedup_id"]) == (sent["message_id"], "g", "d")

    standard = await api_queue(client)
    response = await client.post(f"/v1/queues/{standard}/messages", json={"body": 1, "group_id": "g"})
    assert_error(response, 400, "invalid_message")
    assert counts(await stats(client, standard)) == (0, 0, 0)


async def test_fifo_content_based_deduplication(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True, content_based_deduplication=True)
    first = await send(client, queue, {"a": 1, "b": 2}, group_id="g")
    # Same content in another key order is the same canonical body.
    again = await send(client, queue, {"b": 2, "a": 1}, group_id="g")
    assert again == {**first, "duplicate": True}
    other = await send(client, queue, {"a": 1, "b": 3}, group_id="g")
    assert other["duplicate"] is False
    assert counts(await stats(client, queue)) == (2, 0, 0)


async def test_duplicate_returns_original_and_enqueues_nothing(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    first = await send(client, queue, "one", group_id="g", dedup_id="d")
    again = await send(client, queue, "changed body", group_id="g2", dedup_id="d")
    assert again == {**first, "duplicate": True}
    assert counts(await stats(client, queue)) == (1, 0, 0)

    [message] = await receive(client, queue, max_messages=10)
    assert message["body"] == "one"
    assert (await ack(client, queue, message["receipt_handle"]))["failed"] == []

    after_ack = await send(client, queue, "one", group_id="g", dedup_id="d")
    assert after_ack == {**first, "duplicate": True}
    assert await receive(client, queue, max_messages=10) == []
    assert counts(await stats(client, queue)) == (0, 0, 0)


async def test_group_scoped_deduplication(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True, deduplication_scope="group")
    a = await send(client, queue, 1, group_id="a", dedup_id="d")
    b = await send(client, queue, 2, group_id="b", dedup_id="d")
    assert b["duplicate"] is False and b["message_id"] != a["message_id"]
    assert (await send(client, queue, 3, group_id="a", dedup_id="d")) == {**a, "duplicate": True}


async def test_message_size_limit_counts_canonical_body_and_attributes(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, max_message_bytes=1024)
    url = f"/v1/queues/{queue}/messages"
    # The canonical body of a string is the string plus two quotes.
    await send(client, queue, "x" * 1022)
    assert_error(await client.post(url, json={"body": "x" * 1023}), 413, "message_too_large")
    await send(client, queue, "x" * 1012, attributes={"k": "123456789"})
    response = await client.post(url, json={"body": "x" * 1012, "attributes": {"k": "1234567890"}})
    assert_error(response, 413, "message_too_large")
    assert counts(await stats(client, queue)) == (2, 0, 0)


async def test_attribute_rules(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    url = f"/v1/queues/{queue}/messages"
    ten = {f"a{n}": str(n) for n in range(10)}
    await send(client, queue, 1, attributes=ten)
    response = await client.post(url, json={"body": 1, "attributes": {**ten, "a10": "10"}})
    assert_error(response, 400, "invalid_message")
    for attributes in ({"bad name": "v"}, {"k": "nul\u0000"}, {"k": 5}):
        assert_error(await client.post(url, json={"body": 1, "attributes": attributes}), 400)
    [message] = await receive(client, queue)
    assert message["attributes"] == ten


async def test_unstorable_bodies_are_400(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    url = f"/v1/queues/{queue}/messages"
    headers = {"content-type": "application/json"}
    raw_bodies = [
        b'{"body": NaN}',
        b'{"body": [1, Infinity]}',
        b'{"body": {"x": -Infinity}}',
        b'{"body": "a\\u0000b"}',
        b'{"body": {"k\\u0000": 1}}',
        b'{"body": "\\ud800"}',
        b'{"body": {"\\udfff": 1}}',
        b'{"body": 1, "attributes": {"k": "\\ud800"}}',
        b'{"body": 1, "dedup_id": "\\ud800"}',
        b'{"body": 1',
        b"not json",
    ]
    for raw in raw_bodies:
        assert_error(await client.post(url, content=raw, headers=headers), 400)
    deep: Any = 1
    for _ in range(100):
        deep = [deep]
    assert_error(await client.post(url, json={"body": deep}), 400, "invalid_message")
    assert counts(await stats(client, queue)) == (0, 0, 0)


async def test_per_message_delay_on_standard_queue(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    await send(client, queue, "later", delay_seconds=900)
    response = await client.post(f"/v1/queues/{queue}/messages", json={"body": 1, "delay_seconds": 901})
    assert_error(response, 400, "invalid_request")
    assert counts(await stats(client, queue)) == (0, 0, 1)
    assert await receive(client, queue) == []


# -- batch ------------------------------------------------------------------------------------


async def test_batch_reports_each_entry(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, max_message_bytes=1024)
    entries = [
        {"id": "e1", "body": {"n": 1}},
        {"id": "e2", "body": 2, "group_id": "g"},
        {"id": "e3", "body": "x" * 2000},
        {"id": "e4", "body": [4], "delay_seconds": 60},
    ]
    response = await client.post(f"/v1/queues/{queue}/messages/batch", json={"entries": entries})
    assert response.status_code == 200, response.text
    result = response.json()
    assert successes(result) == ["e1", "e4"]
    assert failures(result) == {"e2": "invalid_message", "e3": "message_too_large"}
    assert all(f["message"] for f in result["failed"])
    for ok in result["successful"]:
        assert set(ok) == {"id", "message_id", "sequence_number", "duplicate"}
        assert ok["duplicate"] is False
    assert counts(await stats(client, queue)) == (1, 0, 1)
    [message] = await receive(client, queue)
    assert message["message_id"] == result["successful"][0]["message_id"]


async def test_batch_of_1000(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    entries = [{"id": f"e{n}", "body": n, "group_id": f"g{n % 7}", "dedup_id": f"d{n}"} for n in range(1000)]
    response = await client.post(f"/v1/queues/{queue}/messages/batch", json={"entries": entries})
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["failed"] == []
    assert successes(result) == [e["id"] for e in entries]
    assert len({s["message_id"] for s in result["successful"]}) == 1000
    assert counts(await stats(client, queue)) == (1000, 0, 0)


async def test_batch_duplicates_inside_the_batch(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    entries = [
        {"id": "a", "body": 1, "group_id": "g", "dedup_id": "same"},
        {"id": "b", "body": 2, "group_id": "g", "dedup_id": "same"},
    ]
    response = await client.post(f"/v1/queues/{queue}/messages/batch", json={"entries": entries})
    a, b = response.json()["successful"]
    assert (a["duplicate"], b["duplicate"]) == (False, True)
    assert (b["message_id"], b["sequence_number"]) == (a["message_id"], a["sequence_number"])
    assert counts(await stats(client, queue)) == (1, 0, 0)


async def test_batch_shape_errors_are_400_and_send_nothing(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    url = f"/v1/queues/{queue}/messages/batch"
    too_many = [{"id": f"e{n}", "body": n} for n in range(1001)]
    assert_error(await client.post(url, json={"entries": too_many}), 400, "invalid_request")
    assert_error(await client.post(url, json={"entries": []}), 400, "invalid_request")
    twice = [{"id": "e1", "body": 1}, {"id": "e1", "body": 2}]
    assert_error(await client.post(url, json={"entries": twice}), 400, "invalid_request")
    bad_id = [{"id": "has space", "body": 1}]
    assert_error(await client.post(url, json={"entries": bad_id}), 400, "invalid_request")
    assert counts(await stats(client, queue)) == (0, 0, 0)


async def test_request_over_byte_cap_is_413(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    url = f"/v1/queues/{queue}/messages/batch"
    entries = [{"id": f"e{n}", "body": "x" * 9_000} for n in range(1000)]
    response = await client.post(url, json={"entries": entries})
    assert len(response.request.content) > MAX_REQUEST_BYTES
    assert_error(response, 413, "request_too_large")

    # Without a Content-Length (chunked), the cap is enforced on the bytes read.
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"entries": [{"id": "e", "body": "'
        for _ in range(9):
            yield b"y" * (1024 * 1024)
        yield b'"}]}'

    streamed = await client.post(url, content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in streamed.request.headers
    assert_error(streamed, 413, "request_too_large")
    assert counts(await stats(client, queue)) == (0, 0, 0)
