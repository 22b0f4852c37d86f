"""The limits and own answers of `pqs serve`'s HTTP protocol (app/api/transport.py), over real
sockets against a real `pqs serve`.

Proves: connections whose request head or body trickles in (slowloris, a hundred at once), or
that send nothing at all, are answered 408 in the house JSON shape and closed once the timeout
settings pass, while their clients are still sending (under `--workers 2`: the settings reach
uvicorn's worker processes); a connection opened beyond PQS_MAX_CONNECTIONS gets a JSON 503 with
Retry-After and is closed, the connections already open keep being served, and a new one is
served once one goes; a request httptools cannot parse (bad request line, bad header, lone CR,
bad chunk size, not HTTP at all) gets a JSON 400, and one with an `Upgrade: websocket` header the
API's own JSON answer; an application that fails before its response gets a JSON 500, not
uvicorn's plain text."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from app.access import EVERYTHING
from app.api.transport import PqsHttpProtocol
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.faults.service import pqs_serve

pytestmark = pytest.mark.xdist_group("faults")

TIMEOUT = 1.0  # the head and body timeouts these tests set (the defaults are 10 and 30 s)
# A trickling client sends a piece this often, for this long: far beyond TIMEOUT, so only the
# service closing the connection ends it early.
TRICKLE_EVERY = 0.25
TRICKLE_FOR = 8.0
SLOWLORIS = 100
MAX_CONNECTIONS = 4
READ_SECONDS = 5.0  # a bound on any single read, so that a missing answer fails instead of hanging


@dataclass
class Answer:
    """One HTTP response as read off a socket."""

    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool  # the service closed the connection right after it

    def error(self) -> dict[str, Any]:
        """The house error body (asserting the JSON content type)."""
        assert self.headers.get("content-type") == "application/json", (self.status, self.headers, self.body)
        error = json.loads(self.body)["error"]
        assert set(error) == {"code", "message"}, error
        return dict(error)


async def read_answer(reader: asyncio.StreamReader, *, then_closed: bool) -> Answer:
    """Read one response (Content-Length framed); with `then_closed`, also wait for the end of
    the stream (or a reset) after it."""
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    closed = False
    if then_closed:
        try:
            closed = await reader.read(1) == b""
        except ConnectionResetError:
            closed = True
    return Answer(int(status_line.split()[1]), headers, body, closed)


@contextlib.asynccontextmanager
async def connection(port: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A TCP connection to 127.0.0.1:`port`, closed on the way out."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def exchange(port: int, request: bytes, *, then_closed: bool = True) -> Answer:
    """Send `request` on a new connection; the answer, and (with `then_closed`) whether the
    connection closed after it."""
    async with connection(port) as (reader, writer):
        writer.write(request)
        return await asyncio.wait_for(read_answer(reader, then_closed=then_closed), READ_SECONDS)


async def trickle(port: int, start: bytes, piece: bytes, *, first: bytes = b"") -> tuple[Answer | None, Answer | None]:
    """On a new connection: send `first` and read its answer (a request served normally), then
    send `start` and `piece` after piece, TRICKLE_EVERY apart, for TRICKLE_FOR at most. Returns
    the first answer, and the answer that came while trickling followed by the connection's end
    (None if the client was still trickling, unanswered, when TRICKLE_FOR ran out)."""
    async with connection(port) as (reader, writer):
        served = None
        if first:
            writer.write(first)
            served = await asyncio.wait_for(read_answer(reader, then_closed=False), READ_SECONDS)
        ending = asyncio.create_task(read_answer(reader, then_closed=True))
        try:
            writer.write(start)
            for _ in range(int(TRICKLE_FOR / TRICKLE_EVERY)):
                await asyncio.wait([ending], timeout=TRICKLE_EVERY)
                if ending.done():
                    break
                writer.write(piece)
                await writer.drain()
        except ConnectionError:
            await asyncio.wait([ending], timeout=READ_SECONDS)
        if not ending.done():
            ending.cancel()
            return served, None
        return served, ending.result()


async def closed_silently(port: int, request: bytes, piece: bytes) -> tuple[Answer, bool]:
    """Send `request` (whose body is not all there), read its answer, then trickle the body's
    rest: the answer, and whether the service closed the connection, sending nothing more,
    while the client was still trickling."""
    async with connection(port) as (reader, writer):
        writer.write(request)
        answer = await asyncio.wait_for(read_answer(reader, then_closed=False), READ_SECONDS)
        rest = asyncio.create_task(reader.read(1))
        try:
            for _ in range(int(TRICKLE_FOR / TRICKLE_EVERY)):
                await asyncio.wait([rest], timeout=TRICKLE_EVERY)
                if rest.done():
                    break
                writer.write(piece)
                await writer.drain()
        except ConnectionError:
            await asyncio.wait([rest], timeout=READ_SECONDS)
        if not rest.done():
            rest.cancel()
            return answer, False
        return answer, rest.exception() is not None or rest.result() == b""


def assert_timed_out(answer: Answer | None, what: str) -> None:
    assert answer is not None, f"the connection stayed open while its {what} trickled in"
    assert answer.status == 408, answer
    assert answer.error()["code"] == "request_timeout", answer
    assert answer.closed, answer


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: pqs\r\n\r\n"


async def test_slow_heads_and_bodies_are_answered_408_and_closed(tmp_path: Path, db_url: str) -> None:
    _, key = await on_connection(db_url, lambda conn: create_key(conn, "limits", EVERYTHING))
    env = {
        "PQS_DATA_DIR": str(tmp_path),
        "PQS_HEADER_TIMEOUT_SECONDS": str(TIMEOUT),
        "PQS_BODY_TIMEOUT_SECONDS": str(TIMEOUT),
        "PQS_WORKERS": "2",  # the limits reach uvicorn's worker processes too
    }
    with pqs_serve(db_url, tmp_path / "serve.log", **env) as service:
        port = service.port
        head = b"GET /healthz HTTP/1.1\r\nHost: pqs\r\n"
        header = b"X-Slow: 1\r\n"
        send = (
            b"POST /v1/queues/jobs/messages HTTP/1.1\r\nHost: pqs\r\ncontent-type: application/json\r\n"
            b"Authorization: Bearer " + key.encode() + b"\r\ncontent-length: 1000\r\n\r\n{"
        )
        slow = [trickle(port, head, header) for _ in range(SLOWLORIS // 2)]
        # The slow head of a second request on a kept-alive connection.
        slow += [trickle(port, head, header, first=HEALTHZ) for _ in range(SLOWLORIS // 2)]
        slow_body = trickle(port, send, b" ")
        silent = trickle(port, b"", b"")  # connects and sends nothing
        # A request answered before its body was read (no key: 401): its late body is owed no answer.
        unauthorized = b"POST /v1/queues/jobs/messages HTTP/1.1\r\nHost: pqs\r\ncontent-length: 1000\r\n\r\n{"
        answered = closed_silently(port, unauthorized, b" ")
        results = await asyncio.gather(*slow, slow_body, silent, answered)
        *heads, (_, body_ending), (_, silent_ending), (early, closed) = results

        for served, ending in heads:
            if served is not None:
                assert served.status == 200, served
            assert_timed_out(ending, "head")
        assert_timed_out(body_ending, "body")
        assert_timed_out(silent_ending, "head")
        assert early.status == 401 and closed, (early, closed)
        # Service goes on.
        assert (await exchange(port, HEALTHZ.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))).status == 200
        assert service.proc.poll() is None, service.output()


async def test_connections_beyond_the_limit_get_503_and_service_resumes(tmp_path: Path, db_url: str) -> None:
    env = {"PQS_DATA_DIR": str(tmp_path), "PQS_MAX_CONNECTIONS": str(MAX_CONNECTIONS)}
    with pqs_serve(db_url, tmp_path / "serve.log", **env) as service:
        port = service.port
        async with contextlib.AsyncExitStack() as stack:
            held = []
            for _ in range(MAX_CONNECTIONS):
                # The readiness check's connection may not be gone yet: a connection it crowds
                # out is answered 503 and closed, and the next one is admitted.
                for _attempt in range(50):
                    reader, writer = await stack.enter_async_context(connection(port))
                    writer.write(HEALTHZ)
                    answer = await asyncio.wait_for(read_answer(reader, then_closed=False), READ_SECONDS)
                    if answer.status == 200:
                        held.append((reader, writer))
                        break
                    assert answer.status == 503, answer
                    await asyncio.sleep(0.05)
            assert len(held) == MAX_CONNECTIONS

            refused = await exchange(port, HEALTHZ)
            assert refused.status == 503, refused
            assert refused.error()["code"] == "unavailable"
            assert refused.headers.get("retry-after") == "1"
            assert refused.closed

            # The connections already open keep being served.
            for reader, writer in held:
                writer.write(HEALTHZ)
                assert (await asyncio.wait_for(read_answer(reader, then_closed=False), READ_SECONDS)).status == 200

            # One goes: a new connection is served again.
            _, writer = held.pop()
            writer.close()
            statuses = []
            for _ in range(50):
                answer = await exchange(port, HEALTHZ.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
                statuses.append(answer.status)
                if answer.status == 200:
                    break
                await asyncio.sleep(0.05)
            assert statuses[-1] == 200, statuses


MALFORMED = {
    "bad request line": b"GET /healthz HTTP/1.1 extra\r\nHost: pqs\r\n\r\n",
    "bad method": b"G(T /healthz HTTP/1.1\r\nHost: pqs\r\n\r\n",
    "bad header name": b"GET /healthz HTTP/1.1\r\nHost: pqs\r\nBad Header: 1\r\n\r\n",
    "lone CR": b"GET /healthz HTTP/1.1\r\nHost: pqs\rX-A: 1\r\n\r\n",
    "bad chunk size": (
        b"POST /v1/queues/jobs/messages HTTP/1.1\r\nHost: pqs\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"
    ),
    "not HTTP": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32) + b"\r\n\r\n",
}


async def test_malformed_and_upgrade_requests_get_json(tmp_path: Path, db_url: str) -> None:
    with pqs_serve(db_url, tmp_path / "serve.log", PQS_DATA_DIR=str(tmp_path)) as service:
        for name, request in MALFORMED.items():
            answer = await exchange(service.port, request)
            assert answer.status == 400, (name, answer)
            assert answer.error()["code"] == "invalid_request", (name, answer)
            assert answer.closed, (name, answer)

        # A WebSocket handshake, valid and not: answered as plain HTTP requests by the API.
        websocket = b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        key = b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        for request in (b"GET /healthz HTTP/1.1\r\n", b"GET /v1/queues HTTP/1.1\r\n"):
            for handshake in (websocket + key, websocket):
                answer = await exchange(
                    service.port, request + b"Host: pqs\r\n" + handshake + b"\r\n", then_closed=False
                )
                if b"healthz" in request:
                    assert answer.status == 200 and json.loads(answer.body) == {"status": "ok"}, answer
                else:
                    assert answer.status == 401 and answer.error()["code"] == "unauthorized", answer


async def fails(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An application that fails before its response (or, on /nothing, returns without one)."""
    if scope["type"] == "http" and scope["path"] != "/nothing":
        raise RuntimeError("injected failure")


async def test_an_application_failing_before_its_response_gets_json_500() -> None:
    config = uvicorn.Config(fails, host="127.0.0.1", port=0, http=PqsHttpProtocol, lifespan="off", log_level="critical")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        assert server.started
        port = server.servers[0].sockets[0].getsockname()[1]
        for path in (b"/fails", b"/nothing"):
            answer = await exchange(port, b"GET " + path + b" HTTP/1.1\r\nHost: pqs\r\n\r\n")
            assert answer.status == 500, answer
            assert answer.error()["code"] == "internal_error", answer
            assert answer.closed, answer
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
