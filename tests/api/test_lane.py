"""The hot lane (app/api/lane.py) over real sockets: uvicorn with PqsHttpProtocol, the hot routes
answered from the protocol, everything else through ASGI, on the same connections.

Each answer of the lane is compared with the answer the ASGI path gives for the same request (the
lane switched off for a new connection), and the connection's books that uvicorn keeps are
exercised: keep-alive, pipelined requests, `Connection: close`, HTTP/1.0, 100-continue, the body
cap, a client that leaves mid-request, and a graceful shutdown with a long poll in flight.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
import uvicorn
from fastapi import FastAPI

from app.api import lane as lane_module
from app.api.lane import HotLane
from app.main import create_app
from tests.api.helpers import client_for, lane_answers, port_of
from tests.api.helpers import served as serving
from tests.conftest import admin_headers, settings_for

MAX_BYTES = 4096


@dataclass
class Served:
    app: FastAPI
    server: uvicorn.Server
    port: int
    key: str
    answered: list[str]  # operationIds of the requests the lane served

    @property
    def lane(self) -> HotLane:
        lane = self.app.lane  # type: ignore[attr-defined]
        assert isinstance(lane, HotLane)
        return lane


@pytest_asyncio.fixture
async def served(db_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    app = create_app(settings_for(db_url, max_request_bytes=MAX_BYTES))
    answered = lane_answers(app, monkeypatch)
    async with serving(app, lifespan="on") as server:
        key = (await admin_headers(app))["Authorization"].removeprefix("Bearer ")
        yield Served(app, server, port_of(server), key, answered)


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)


def request(
    method: str,
    path: str,
    body: object = None,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    version: str = "1.1",
) -> bytes:
    data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/{version}", "Host: 127.0.0.1"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    fields = {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}
    lines += [f"{name}: {value}" for name, value in fields.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def read_response(reader: asyncio.StreamReader) -> Response:
    head = await reader.readuntil(b"\r\n\r\n")
    first, *lines = head.decode("latin-1").split("\r\n")
    status = int(first.split(" ")[1])
    headers = [(k.strip().lower(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines if ln)]
    length = next((int(v) for k, v in headers if k == "content-length"), 0)
    return Response(status, headers, await reader.readexactly(length))


async def exchange(port: int, *requests: bytes, together: bool = False) -> list[Response]:
    """Send `requests` on one connection (one after the other, or all in one write: pipelined)
    and read their responses in order."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        responses = []
        if together:
            writer.write(b"".join(requests))
            for _ in requests:
                responses.append(await asyncio.wait_for(read_response(reader), 30))
        else:
            for data in requests:
                writer.write(data)
                responses.append(await asyncio.wait_for(read_response(reader), 30))
        return responses
    finally:
        writer.close()


async def through_asgi(served: Served, *requests: bytes) -> list[Response]:
    """The same requests on a new connection with the lane off: uvicorn runs the ASGI app."""
    lane = served.lane
    served.app.lane = None  # type: ignore[attr-defined]  # read by each new connection
    try:
        return await exchange(served.port, *requests)
    finally:
        served.app.lane = lane  # type: ignore[attr-defined]


def comparable(response: Response) -> tuple[int, list[tuple[str, str]], object]:
    # A made request id differs from one answer to the next; its place among the headers does not.
    headers = [(k, "…" if k == "x-request-id" else v) for k, v in response.headers if k != "date"]
    document = json.loads(response.body)
    # Ids and sequence numbers differ between two sends; their shape does not.
    text = re.sub(r'"(message_id|receipt_handle)": "[^"]+"', r'"\1": "…"', json.dumps(document))
    return response.status, headers, re.sub(r'"sequence_number": \d+', '"sequence_number": 0', text)


async def test_the_lane_answers_hot_routes_as_the_asgi_path_does(served: Served) -> None:
    key = served.key
    [made] = await exchange(served.port, request("PUT", "/v1/queues/jobs", {}, key))
    assert made.status == 201
    # The second entry names a group on a standard queue: refused alone, in `failed`.
    batch = {"entries": [{"id": "a", "body": 1}, {"id": "b", "body": 2, "group_id": "g"}]}
    cases = [
        request("POST", "/v1/queues/jobs/messages", {"body": {"n": 1}}, key),
        request("POST", "/v1/queues/jobs/messages/batch", batch, key),
        request("POST", "/v1/queues/jobs/messages", b"{not json", key),
        request("POST", "/v1/queues/jobs/messages", b"", key),
        request("POST", "/v1/queues/nope/messages", {"body": 1}, key),
        request("POST", "/v1/queues/jobs/messages/ack", {"entries": [{"id": "x", "receipt_handle": "bad"}]}, key),
        request("POST", "/v1/queues/jobs/messages/receive", {"max_messages": 0}, key),
        request("POST", "/v1/queues/jobs/messages"),  # no key
        request("POST", "/v1/queues/jobs/messages", {"body": 1}, "pqs_nokey_secret"),
    ]
    before = len(served.answered)
    by_lane = await exchange(served.port, *cases)
    assert len(served.answered) - before == len(cases)
    by_asgi = await through_asgi(served, *cases)
    assert len(served.answered) - before == len(cases)  # the lane took none of those
    for lane_answer, asgi_answer in zip(by_lane, by_asgi, strict=True):
        assert comparable(lane_answer) == comparable(asgi_answer)
    assert [a.status for a in by_lane] == [201, 200, 400, 400, 404, 200, 400, 401, 401]
    assert by_lane[-1].header("www-authenticate") == "Bearer"
    # A whole round trip through the lane, on one kept-alive connection: the two messages each
    # way sent above, and this one.
    _, got = await exchange(
        served.port,
        request("POST", "/v1/queues/jobs/messages", {"body": {"n": 2}}, key),
        request("POST", "/v1/queues/jobs/messages/receive", {"max_messages": 10}, key),
    )
    handles = [m["receipt_handle"] for m in json.loads(got.body)["messages"]]
    assert len(handles) == 5
    entries = [{"id": str(i), "receipt_handle": h} for i, h in enumerate(handles)]
    [acked] = await exchange(served.port, request("POST", "/v1/queues/jobs/messages/ack", {"entries": entries}, key))
    assert json.loads(acked.body)["failed"] == [] and len(json.loads(acked.body)["successful"]) == 5


async def test_pipelined_requests_are_answered_in_order(served: Served) -> None:
    key = served.key
    await exchange(served.port, request("PUT", "/v1/queues/jobs", {}, key))
    responses = await exchange(
        served.port,
        request("POST", "/v1/queues/jobs/messages", {"body": 1}, key),
        request("GET", "/healthz"),
        request("POST", "/v1/queues/jobs/messages/receive", {"max_messages": 1}, key),
        request("GET", "/v1/queues/jobs", key=key),
        together=True,
    )
    assert [r.status for r in responses] == [201, 200, 200, 200]
    assert json.loads(responses[2].body)["messages"][0]["body"] == 1
    assert json.loads(responses[3].body)["name"] == "jobs"


async def test_connection_close_and_http_1_0_end_the_connection(served: Served) -> None:
    key = served.key
    await exchange(served.port, request("PUT", "/v1/queues/jobs", {}, key))
    for data in (
        request("POST", "/v1/queues/jobs/messages", {"body": 1}, key, {"Connection": "close"}),
        request("POST", "/v1/queues/jobs/messages", {"body": 1}, key, version="1.0"),
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        writer.write(data)
        response = await asyncio.wait_for(read_response(reader), 30)
        assert response.status == 201
        assert response.header("connection") == "close"
        assert await asyncio.wait_for(reader.read(), 10) == b""  # the server closed it
        writer.close()


async def test_100_continue_and_the_body_cap(served: Served) -> None:
    key = served.key
    await exchange(served.port, request("PUT", "/v1/queues/jobs", {}, key))
    body = json.dumps({"body": "x"}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    head = request("POST", "/v1/queues/jobs/messages", body, key, {"Expect": "100-continue"})
    writer.write(head[: -len(body)])
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10) == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(body)
    assert (await asyncio.wait_for(read_response(reader), 30)).status == 201
    writer.close()
    big = json.dumps({"body": "y" * MAX_BYTES}).encode()
    [declared] = await exchange(served.port, request("POST", "/v1/queues/jobs/messages", big, key))
    assert declared.status == 413
    assert json.loads(declared.body)["error"]["code"] == "request_too_large"
    chunked = request("POST", "/v1/queues/jobs/messages", None, key, {"Transfer-Encoding": "chunked"})
    chunked = chunked.replace(b"Content-Length: 0\r\n", b"") + b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big)
    [streamed] = await exchange(served.port, chunked)
    assert streamed.status == 413


async def test_a_client_that_leaves_mid_request_harms_nothing(served: Served) -> None:
    key = served.key
    await exchange(served.port, request("PUT", "/v1/queues/jobs", {}, key))
    data = request("POST", "/v1/queues/jobs/messages", {"body": "half"}, key)
    _, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(data[:-5])
    await writer.drain()
    writer.close()
    await asyncio.sleep(0.2)
    # Nothing was enqueued, and the service answers the next client.
    [got] = await exchange(served.port, request("POST", "/v1/queues/jobs/messages/receive", {"max_messages": 10}, key))
    assert json.loads(got.body) == {"messages": []}


async def test_a_long_poll_in_flight_is_answered_at_shutdown(served: Served) -> None:
    key = served.key
    await exchange(served.port, request("PUT", "/v1/queues/jobs", {}, key))
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(request("POST", "/v1/queues/jobs/messages/receive", {"wait_seconds": 2}, key))
    await asyncio.sleep(0.3)
    served.server.should_exit = True  # uvicorn's graceful shutdown: in-flight requests finish
    response = await asyncio.wait_for(read_response(reader), 30)
    assert response.status == 200 and json.loads(response.body) == {"messages": []}
    assert response.header("connection") == "close"
    writer.close()


async def test_the_lane_stands_aside_with_a_warning_when_uvicorns_cycle_lacks_what_it_uses(
    db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Said when the app is made, before any request; and FastAPI serves the hot operations."""
    caplog.set_level(logging.WARNING, logger=lane_module.__name__)
    create_app(settings_for(db_url))
    assert caplog.records == []  # the uvicorn this project pins has all the lane uses
    # An uvicorn whose request cycle lacks one of them (as a newer one might).
    monkeypatch.setattr(lane_module, "CYCLE_ATTRIBUTES", (*lane_module.CYCLE_ATTRIBUTES, "a_newer_attribute"))
    app = create_app(settings_for(db_url))
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING and "a_newer_attribute" in warning.getMessage()
    assert "stands aside" in warning.getMessage()
    answered = lane_answers(app, monkeypatch)
    async with app.router.lifespan_context(app), serving(app), client_for(app, await admin_headers(app)) as http:
        assert (await http.put("/v1/queues/jobs", json={})).status_code == 201
        response = await http.post("/v1/queues/jobs/messages", json={"body": 1})
        assert response.status_code == 201 and response.json()["duplicate"] is False
        response = await http.post("/v1/queues/jobs/messages/receive", json={"max_messages": 1})
        assert [m["body"] for m in response.json()["messages"]] == [1]
    assert answered == []  # the lane took none of them
