"""The load generator's HTTP client (app.bench.http.LeanHttp) against a scripted server on
127.0.0.1: framing by length, chunked and by the end of the connection, responses arriving in
pieces, keep-alive reuse, a server that drops an idle connection, and a response that never
comes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from app.bench.http import HttpError, LeanHttp


async def _read_request(reader: asyncio.StreamReader) -> str | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode().split("\r\n")
    length = next((int(ln.split(":")[1]) for ln in lines if ln.lower().startswith("content-length:")), 0)
    await reader.readexactly(length)
    return lines[0].split(" ")[1]


class Script:
    """A server whose answer depends on the path; counts the connections it accepted."""

    def __init__(self) -> None:
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while (path := await _read_request(reader)) is not None:
                if path == "/ok":
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                elif path == "/pieces":
                    for piece in (b"HTTP/1.1 201 Created\r\ncont", b"ent-length: 5\r\n\r", b"\nhel", b"lo"):
                        writer.write(piece)
                        await writer.drain()
                        await asyncio.sleep(0.01)
                elif path == "/chunked":
                    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
                    await writer.drain()
                    await asyncio.sleep(0.01)
                    writer.write(b"6\r\n world\r\n0\r\n\r\n")
                elif path == "/close":
                    writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 3\r\n\r\nbye")
                    await writer.drain()
                    break
                elif path == "/eof":
                    writer.write(b"HTTP/1.1 200 OK\r\n\r\nuntil the end")
                    await writer.drain()
                    break
                elif path == "/drop":  # answers, then drops the connection it promised to keep
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\ndrop")
                    await writer.drain()
                    break
                elif path == "/never":  # no answer: wait until the client gives up and closes
                    await reader.read()
                    break
                await writer.drain()
        finally:
            writer.close()


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[Script, LeanHttp]]:
    script = Script()
    server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    http = LeanHttp(f"http://127.0.0.1:{port}")
    try:
        yield script, http
    finally:
        await http.close()
        server.close()


async def test_responses_framed_every_way(served: tuple[Script, LeanHttp]) -> None:
    script, http = served
    assert (await http.request("POST", "/ok", b"{}")).content == b"ok"
    pieces = await http.request("POST", "/pieces", b"{}")
    assert (pieces.status_code, pieces.content) == (201, b"hello")
    assert (await http.request("GET", "/chunked")).content == b"hello world"
    assert (await http.request("GET", "/ok")).content == b"ok"
    assert script.connections == 1  # all of them on one kept-alive connection
    assert (await http.request("GET", "/close")).content == b"bye"
    assert (await http.request("GET", "/eof")).content == b"until the end"
    assert (await http.request("GET", "/ok")).content == b"ok"
    assert script.connections == 3  # a new connection after each one the server ended


async def test_concurrent_requests_use_a_connection_each(served: tuple[Script, LeanHttp]) -> None:
    script, http = served
    answers = await asyncio.gather(*(http.request("GET", "/pieces") for _ in range(8)))
    assert {a.content for a in answers} == {b"hello"}
    assert script.connections == 8
    await asyncio.gather(*(http.request("GET", "/ok") for _ in range(8)))
    assert script.connections == 8  # reused


async def test_a_dropped_idle_connection_is_replaced(served: tuple[Script, LeanHttp]) -> None:
    script, http = served
    assert (await http.request("GET", "/drop")).content == b"drop"
    await asyncio.sleep(0.05)
    assert (await http.request("GET", "/ok")).content == b"ok"
    assert script.connections == 2


async def test_a_response_that_never_comes_times_out(served: tuple[Script, LeanHttp]) -> None:
    _, http = served
    started = asyncio.get_running_loop().time()
    with pytest.raises(HttpError, match="TimeoutError"):
        await http.request("GET", "/never", seconds=0.3)
    assert asyncio.get_running_loop().time() - started < 2
    assert (await http.request("GET", "/ok")).content == b"ok"
