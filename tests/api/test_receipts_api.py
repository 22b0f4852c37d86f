"""Contract of finishing deliveries: ack, nack, visibility and DELETE by receipt handle."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.api.helpers import (
    ack,
    assert_error,
    counts,
    failures,
    lenient_client,
    receive,
    send,
    settle,
    stats,
    successes,
)
from tests.factories import api_queue

MALFORMED = ["garbage", "", "A" * 34, "é" * 34, "x" * 256]


async def received_one(client: httpx.AsyncClient, queue: str, body: Any = "m", **fields: Any) -> dict[str, Any]:
    """Send one message and receive it."""
    sent = await send(client, queue, body)
    [message] = await receive(client, queue, **fields)
    assert message["message_id"] == sent["message_id"]
    return message


async def test_ack_removes_the_message(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    message = await received_one(client, queue)
    result = await settle(
        client,
        queue,
        "ack",
        [
            {"id": "a", "receipt_handle": message["receipt_handle"], "result": {"ok": True}},
        ],
    )
    assert result == {"successful": [{"id": "a"}], "failed": []}
    assert counts(await stats(client, queue)) == (0, 0, 0)
    assert await receive(client, queue, visibility_timeout=0) == []


async def test_ack_failures_are_per_entry(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    first = await received_one(client, queue, "first")
    second = await received_one(client, queue, "second")
    assert (await ack(client, queue, first["receipt_handle"]))["failed"] == []

    result = await settle(
        client,
        queue,
        "ack",
        [
            {"id": "acked", "receipt_handle": first["receipt_handle"]},
            {"id": "good", "receipt_handle": second["receipt_handle"]},
            *({"id": f"bad{n}", "receipt_handle": handle} for n, handle in enumerate(MALFORMED)),
        ],
    )
    assert successes(result) == ["good"]
    assert failures(result) == {
        "acked": "receipt_not_found",
        **{f"bad{n}": "invalid_receipt_handle" for n in range(len(MALFORMED))},
    }
    assert all(f["message"] for f in result["failed"])
    assert counts(await stats(client, queue)) == (0, 0, 0)


async def test_handle_of_another_queue_is_not_found(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    other = await api_queue(client)
    message = await received_one(client, queue)
    assert failures(await ack(client, other, message["receipt_handle"])) == {"h0": "receipt_not_found"}
    assert counts(await stats(client, queue)) == (0, 1, 0)


async def test_stale_handle_after_a_new_receive_is_refused(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    old = await received_one(client, queue, visibility_timeout=0)
    [new] = await receive(client, queue)
    assert new["message_id"] == old["message_id"] and new["receipt_handle"] != old["receipt_handle"]

    stale = {"id": "old", "receipt_handle": old["receipt_handle"]}
    assert failures(await settle(client, queue, "ack", [stale])) == {"old": "receipt_not_found"}
    assert failures(await settle(client, queue, "nack", [stale])) == {"old": "receipt_not_found"}
    visibility = await settle(client, queue, "visibility", [{**stale, "visibility_timeout": 0}])
    assert failures(visibility) == {"old": "receipt_not_found"}
    assert counts(await stats(client, queue)) == (0, 1, 0)
    assert await receive(client, queue) == []

    assert (await ack(client, queue, new["receipt_handle"]))["successful"] == [{"id": "h0"}]
    assert counts(await stats(client, queue)) == (0, 0, 0)


@pytest.mark.parametrize(
    ("verb", "fields", "after"),
    [("ack", {}, (0, 0, 0)), ("nack", {}, (1, 0, 0)), ("visibility", {"visibility_timeout": 600}, (0, 1, 0))],
)
async def test_a_batch_naming_a_message_under_a_stale_and_its_current_handle(
    client: httpx.AsyncClient, verb: str, fields: dict[str, Any], after: tuple[int, int, int]
) -> None:
    # The message changes under its current handle; the stale one fails its entry, whatever the
    # other entries of the batch (the answer is per receipt, not per message).
    queue = await api_queue(client)
    old = await received_one(client, queue, visibility_timeout=0)
    [new] = await receive(client, queue)
    entries = [
        {"id": "old", "receipt_handle": old["receipt_handle"], **fields},
        {"id": "new", "receipt_handle": new["receipt_handle"], **fields},
    ]
    result = await settle(client, queue, verb, entries)
    assert (successes(result), failures(result)) == (["new"], {"old": "receipt_not_found"})
    assert counts(await stats(client, queue)) == after


async def test_nack_makes_the_message_receivable_now(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, visibility_timeout=600)
    message = await received_one(client, queue)
    entry = {"id": "n", "receipt_handle": message["receipt_handle"], "error": {"reason": "flaky"}}
    assert await settle(client, queue, "nack", [entry]) == {"successful": [{"id": "n"}], "failed": []}
    assert counts(await stats(client, queue)) == (1, 0, 0)
    [again] = await receive(client, queue)
    assert again["message_id"] == message["message_id"]
    assert again["receive_count"] == 2


async def test_nack_with_delay_hides_the_message(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    message = await received_one(client, queue)
    entry = {"id": "n", "receipt_handle": message["receipt_handle"], "delay_seconds": 300}
    assert (await settle(client, queue, "nack", [entry]))["failed"] == []
    assert counts(await stats(client, queue)) == (0, 0, 1)
    assert await receive(client, queue) == []


async def test_visibility_zero_makes_the_message_receivable(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    message = await received_one(client, queue)
    entry = {"id": "v", "receipt_handle": message["receipt_handle"], "visibility_timeout": 0}
    assert await settle(client, queue, "visibility", [entry]) == {"successful": [{"id": "v"}], "failed": []}
    [again] = await receive(client, queue)
    assert (again["message_id"], again["receive_count"]) == (message["message_id"], 2)


async def test_visibility_extension_keeps_the_message_hidden(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    message = await received_one(client, queue)
    entry = {"id": "v", "receipt_handle": message["receipt_handle"], "visibility_timeout": 600}
    assert (await settle(client, queue, "visibility", [entry]))["failed"] == []
    assert counts(await stats(client, queue)) == (0, 1, 0)
    assert await receive(client, queue) == []


async def test_visibility_of_an_expired_delivery_is_refused(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    message = await received_one(client, queue, visibility_timeout=0)
    entry = {"id": "v", "receipt_handle": message["receipt_handle"], "visibility_timeout": 600}
    assert failures(await settle(client, queue, "visibility", [entry])) == {"v": "receipt_not_found"}
    # Its timeout ran out, but nobody received it since: the handle still acks it.
    assert (await ack(client, queue, message["receipt_handle"]))["failed"] == []


async def test_receipt_batch_shape_errors_are_400(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    message = await received_one(client, queue)
    handle = message["receipt_handle"]
    bad: list[tuple[str, list[dict[str, Any]]]] = [
        ("ack", []),
        ("ack", [{"id": "a", "receipt_handle": handle}, {"id": "a", "receipt_handle": handle}]),
        ("ack", [{"id": "a"}]),
        ("ack", [{"id": "a", "receipt_handle": "x" * 257}]),
        ("nack", [{"id": "a", "receipt_handle": handle, "delay_seconds": -1}]),
        ("nack", [{"id": "a", "receipt_handle": handle, "delay_seconds": 43_201}]),
        ("visibility", [{"id": "a", "receipt_handle": handle}]),
        ("visibility", [{"id": "a", "receipt_handle": handle, "visibility_timeout": 43_201}]),
        ("ack", [{"id": "a" * 81, "receipt_handle": handle}]),
        ("ack", [{"id": "a", "receipt_handle": handle} for _ in range(1001)]),
    ]
    for verb, entries in bad:
        response = await client.post(f"/v1/queues/{queue}/messages/{verb}", json={"entries": entries})
        assert_error(response, 400, "invalid_request")
    assert counts(await stats(client, queue)) == (0, 1, 0)


async def test_receipt_batches_on_unknown_queue_are_404(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    message = await received_one(client, queue)
    for verb, extra in (("ack", {}), ("nack", {}), ("visibility", {"visibility_timeout": 1})):
        entries = [{"id": "a", "receipt_handle": message["receipt_handle"], **extra}]
        response = await client.post(f"/v1/queues/nope/messages/{verb}", json={"entries": entries})
        assert_error(response, 404, "queue_not_found")


async def test_malformed_handles_on_unknown_queue_are_404(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/queues/nope/messages/ack", json={"entries": [{"id": "a", "receipt_handle": "garbage"}]}
    )
    assert_error(response, 404, "queue_not_found")


async def test_unstorable_ack_result_or_nack_error_fails_its_entry(app: FastAPI) -> None:
    """A result or error the database cannot store fails its entry (invalid_message) and
    changes nothing: the message stays in flight and a later ack works."""
    outcomes: dict[str, tuple[int, list[str]]] = {}
    async with lenient_client(app) as client:
        queue = await api_queue(client)
        for verb, field in (("ack", "result"), ("nack", "error")):
            for raw in ("NaN", '"a\\u0000b"', '"\\ud800"'):
                message = await received_one(client, queue)
                entry = f'{{"id": "e", "receipt_handle": "{message["receipt_handle"]}", "{field}": {raw}}}'
                response = await client.post(
                    f"/v1/queues/{queue}/messages/{verb}",
                    content='{"entries": [' + entry + "]}",
                    headers={"content-type": "application/json"},
                )
                codes = [f["code"] for f in response.json().get("failed", [])] if response.status_code == 200 else []
                outcomes[f"{verb} {field}={raw}"] = (response.status_code, codes)
                assert (await ack(client, queue, message["receipt_handle"]))["failed"] == []
    assert outcomes == dict.fromkeys(outcomes, (200, ["invalid_message"]))


# -- DELETE /v1/queues/{name}/messages/{receipt_handle} -----------------------------------------


async def test_delete_by_receipt_handle(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    message = await received_one(client, queue)
    url = f"/v1/queues/{queue}/messages/{message['receipt_handle']}"
    response = await client.delete(url)
    assert response.status_code == 204
    assert response.content == b""
    assert counts(await stats(client, queue)) == (0, 0, 0)
    assert_error(await client.delete(url), 404, "receipt_not_found")


async def test_delete_by_garbage_handle_is_400(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    url = f"/v1/queues/{queue}/messages"
    assert_error(await client.delete(f"{url}/garbage"), 400, "invalid_receipt_handle")
    assert_error(await client.delete(f"{url}/{'A' * 34}"), 400, "invalid_receipt_handle")
    assert_error(await client.delete(f"{url}/{'x' * 257}"), 400, "invalid_request")


async def test_delete_by_stale_handle_is_404(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    old = await received_one(client, queue, visibility_timeout=0)
    [new] = await receive(client, queue)
    assert_error(await client.delete(f"/v1/queues/{queue}/messages/{old['receipt_handle']}"), 404, "receipt_not_found")
    assert counts(await stats(client, queue)) == (0, 1, 0)
    assert (await client.delete(f"/v1/queues/{queue}/messages/{new['receipt_handle']}")).status_code == 204


async def test_release_returns_a_consumers_messages_at_once(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True, visibility_timeout=600)
    for n in range(3):
        await send(client, queue, {"n": n}, group_id="g", dedup_id=f"d{n}")
    [held] = await receive(client, queue, max_messages=1, consumer_id="worker-1")
    assert await receive(client, queue) == []  # group g is in flight
    url = f"/v1/queues/{queue}/messages/release"
    response = await client.post(url, json={"consumer_id": "worker-1"})
    assert response.status_code == 200 and response.json() == {"count": 1}
    [again] = await receive(client, queue, max_messages=1)
    assert (again["message_id"], again["receive_count"]) == (held["message_id"], 2)
    assert (await client.post(url, json={"consumer_id": "worker-1"})).json() == {"count": 0}
    assert_error(await client.post(url, json={}), 400, "invalid_request")
    assert_error(await client.post(url, json={"consumer_id": ""}), 400, "invalid_request")
    assert_error(await client.post("/v1/queues/nope/messages/release", json={"consumer_id": "w"}), 404)
