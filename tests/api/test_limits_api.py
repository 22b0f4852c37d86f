"""Every cap answers with the house error body and a message that names the limit: the request byte
cap (413, before the body is parsed), batch sizes, entry ids, group and dedup ids, attributes and
queue names (400); and input PostgreSQL cannot store is a 400, never a 500."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.helpers import assert_error, counts, receive, send, stats
from tests.factories import api_queue

MAX_REQUEST_BYTES = 8 * 1024 * 1024


async def test_over_the_byte_cap_is_413_before_parsing(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    garbage = b"{" * (MAX_REQUEST_BYTES + 1)  # would be a 400 if it were parsed
    json_header = {"content-type": "application/json"}
    for method, url in [
        ("POST", f"/v1/queues/{queue}/messages"),
        ("POST", f"/v1/queues/{queue}/messages/ack"),
        ("PUT", "/v1/queues/big"),
        ("PATCH", f"/v1/queues/{queue}"),
    ]:
        response = await client.request(method, url, content=garbage, headers=json_header)
        error = assert_error(response, 413, "request_too_large")
        assert str(MAX_REQUEST_BYTES) in error["message"], error
    at_cap = b" " * (MAX_REQUEST_BYTES - len(b'{"body": 1}')) + b'{"body": 1}'
    response = await client.post(f"/v1/queues/{queue}/messages", content=at_cap, headers=json_header)
    assert response.status_code == 201, response.text
    assert (await client.get("/v1/queues/big")).status_code == 404


async def test_batches_hold_at_most_1000_entries(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    await send(client, queue, 1)
    [message] = await receive(client, queue)
    handle = message["receipt_handle"]
    entries: dict[str, dict[str, Any]] = {
        "batch": {"body": 1},
        "ack": {"receipt_handle": handle},
        "nack": {"receipt_handle": handle},
        "visibility": {"receipt_handle": handle, "visibility_timeout": 5},
    }
    for verb, entry in entries.items():
        batch = [{"id": f"e{n}", **entry} for n in range(1001)]
        response = await client.post(f"/v1/queues/{queue}/messages/{verb}", json={"entries": batch})
        error = assert_error(response, 400, "invalid_request")
        assert "entries" in error["message"] and "1000" in error["message"], error
    assert counts(await stats(client, queue)) == (0, 1, 0)


async def test_entry_ids_are_1_to_80_safe_characters(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    url = f"/v1/queues/{queue}/messages/batch"
    response = await client.post(url, json={"entries": [{"id": "a" * 80, "body": 1}, {"id": "A-z_9", "body": 2}]})
    assert response.status_code == 200, response.text
    assert [ok["id"] for ok in response.json()["successful"]] == ["a" * 80, "A-z_9"]
    for bad in ["a" * 81, "", "a.b", "é"]:
        response = await client.post(url, json={"entries": [{"id": bad, "body": 1}]})
        error = assert_error(response, 400, "invalid_request")
        assert "id" in error["message"], error
    assert counts(await stats(client, queue)) == (2, 0, 0)


async def test_group_and_dedup_ids_are_1_to_128_characters(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    url = f"/v1/queues/{queue}/messages"
    await send(client, queue, 1, group_id="g" * 128, dedup_id="d" * 128)
    for field in ("group_id", "dedup_id"):
        for bad in ["x" * 129, ""]:
            message = {"body": 1, "group_id": "g", "dedup_id": "d", field: bad}
            error = assert_error(await client.post(url, json=message), 400, "invalid_request")
            assert field in error["message"] and ("128" in error["message"] or "1 character" in error["message"])
            batch = {"entries": [{"id": "e", **message}]}
            assert_error(await client.post(f"{url}/batch", json=batch), 400, "invalid_request")
        # The right length, outside the alphabet (letters, digits, ASCII punctuation).
        message = {"body": 1, "group_id": "g", "dedup_id": "d", field: "with space"}
        error = assert_error(await client.post(url, json=message), 400, "invalid_message")
        assert field in error["message"], error
    assert counts(await stats(client, queue)) == (1, 0, 0)


async def test_attribute_names_are_1_to_256_characters(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    url = f"/v1/queues/{queue}/messages"
    await send(client, queue, 1, attributes={"n" * 256: "v"})
    for name in ["n" * 257, ""]:
        response = await client.post(url, json={"body": 1, "attributes": {name: "v"}})
        error = assert_error(response, 400, "invalid_message")
        assert "256" in error["message"], error
    eleven = {f"a{n}": "v" for n in range(11)}
    error = assert_error(await client.post(url, json={"body": 1, "attributes": eleven}), 400, "invalid_message")
    assert "10" in error["message"], error
    assert counts(await stats(client, queue)) == (1, 0, 0)


async def test_queue_names_over_75_characters_are_400_on_every_route(client: httpx.AsyncClient) -> None:
    for name in ["x" * 76, "x" * 76 + ".fifo"]:
        for method, suffix in [("GET", ""), ("POST", "/messages"), ("POST", "/messages/receive"), ("POST", "/purge")]:
            body = {"body": 1} if suffix == "/messages" else {}
            response = await client.request(method, f"/v1/queues/{name}{suffix}", json=body)
            error = assert_error(response, 400)
            assert "75" in error["message"] or "80" in error["message"], error


# -- input the database cannot store (found by tests/contract/test_schemathesis.py) ------------


async def test_list_filters_with_nul_are_400(client: httpx.AsyncClient) -> None:
    for params in [{"after": "\x00"}, {"prefix": "a\x00"}]:
        error = assert_error(await client.get("/v1/queues", params=params), 400, "invalid_request")
        assert "NUL" in error["message"], error


async def test_names_and_ids_ending_in_a_newline_are_refused(client: httpx.AsyncClient) -> None:
    # A regex `$` matches before a trailing newline: these passed the checks, and the queue name then
    # broke the database's own CHECK (a 500). A path with a control character is now no route.
    assert_error(await client.put("/v1/queues/jobs%0A", json={}), 404, "not_found")
    assert_error(await client.get("/v1/queues/jobs%0A"), 404, "not_found")
    queue = await api_queue(client, fifo=True)
    url = f"/v1/queues/{queue}/messages"
    for field, value in [("group_id", "g\n"), ("dedup_id", "d\n"), ("attributes", {"k\n": "v"})]:
        message = {"body": 1, "group_id": "g", "dedup_id": "d", field: value}
        assert_error(await client.post(url, json=message), 400, "invalid_message")
    assert counts(await stats(client, queue)) == (0, 0, 0)
    assert [q["name"] for q in (await client.get("/v1/queues")).json()["queues"]] == [queue]
