"""The house error shape on every path, health probes, and 400-never-422."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from tests.api.helpers import assert_error
from tests.factories import api_queue


async def test_health_probes(client: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz"):
        response = await client.get(path)
        assert response.status_code == 200, response.text
        assert response.json() == {"status": "ok"}


async def test_unknown_path_is_404_with_error_body(client: httpx.AsyncClient) -> None:
    for path in ("/nope", "/v1", "/v1/queues/q/unknown", "/v2/queues"):
        assert_error(await client.get(path), 404, "not_found")


async def test_wrong_method_is_405_with_error_body(client: httpx.AsyncClient) -> None:
    cases = [
        ("DELETE", "/v1/queues", "GET"),
        ("POST", "/healthz", "GET"),
        ("GET", "/v1/queues/q/messages/receive", "POST"),
        ("PUT", "/v1/queues/q/purge", "POST"),
    ]
    for method, path, allowed in cases:
        response = await client.request(method, path)
        assert_error(response, 405, "method_not_allowed")
        assert allowed in response.headers["allow"]


async def test_validation_errors_are_400_never_422(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    json_header = {"content-type": "application/json"}
    text_header = {"content-type": "text/plain"}
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("PUT", f"/v1/queues/{queue}x", {"content": b"{", "headers": json_header}),
        ("PUT", f"/v1/queues/{queue}x", {"json": {"fifo": "maybe"}}),
        ("PATCH", f"/v1/queues/{queue}", {"json": {"delay_seconds": [1]}}),
        ("POST", f"/v1/queues/{queue}/messages", {"content": b'{"body": 1}', "headers": text_header}),
        ("POST", f"/v1/queues/{queue}/messages", {"content": b""}),
        ("POST", f"/v1/queues/{queue}/messages", {"json": [{"body": 1}]}),
        ("POST", f"/v1/queues/{queue}/messages/batch", {"json": {"entries": "all"}}),
        ("POST", f"/v1/queues/{queue}/messages/receive", {"json": {"max_messages": "many"}}),
        ("POST", f"/v1/queues/{queue}/messages/ack", {"json": {}}),
        ("POST", f"/v1/queues/{queue}/messages/nack", {"json": {"entries": [{}]}}),
        ("POST", f"/v1/queues/{queue}/messages/visibility", {"json": None}),
        ("GET", "/v1/queues", {"params": {"limit": -1}}),
    ]
    for method, url, options in requests:
        response = await client.request(method, url, **options)
        error = assert_error(response, 400, "invalid_request")
        assert error["message"] != "", (method, url)


async def test_service_unavailable_is_503_with_retry_after(app: FastAPI, client: httpx.AsyncClient) -> None:
    await app.state.db.close()
    for path in ("/readyz", "/v1/queues"):
        response = await client.get(path)
        assert_error(response, 503, "unavailable")
        assert response.headers["retry-after"] == "1"
    response = await client.get("/healthz")
    assert response.status_code == 200
