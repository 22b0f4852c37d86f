"""Two HTTP/1.1 keep-alive transports for the load generator, with one small interface.

- `LeanHttp` (default): a minimal client on asyncio protocols, one connection per concurrent
  request, about a twentieth of httpx's CPU per request. On a 2-core machine the generator
  competes with the service and PostgreSQL for CPU, so every microsecond it spends is taken from
  them.
- `HttpxHttp` (`--http httpx`): httpx.AsyncClient, for a cross-check with a mainstream client;
  one single-connection client per slot, because httpcore's pool scans every connection on each
  request (its cost grows with the square of the clients).

Only 127.0.0.1 is targeted; bodies are bytes the caller encoded. Extra headers (the API key)
are given once, when the transport is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import httpx

MAX_HEADER_BYTES = 64 * 1024
# Below uvicorn's default keep-alive timeout (5 s), so a reused connection is still open.
KEEPALIVE_REUSE_SECONDS = 4.0


@dataclass(frozen=True)
class Response:
    """Status and body of one response."""

    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")


class HttpError(Exception):
    """The request did not get a response (connection refused or dropped, timeout, bad reply)."""


class Http(Protocol):
    """What the generator needs from a transport."""

    async def request(
        self,
        method: str,
        path: str,
        content: bytes | None = None,
        seconds: float | None = None,
        headers: list[tuple[str, str]] | None = None,
    ) -> Response:
        """Send a request and read its whole response. `headers` (Host and Content-Type
        included), when given, replace the default Host and JSON Content-Type: a signed request's."""
        ...

    async def close(self) -> None:
        """Close every connection."""
        ...


class _Connection(asyncio.Protocol):
    """One keep-alive connection: the request is written whole, and the response is parsed as it
    arrives (in data_received), with no stream reader and no timer per request."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.method = ""
        self.waiter: asyncio.Future[tuple[Response, bool]] | None = None
        self.deadline = 0.0  # loop time by which the awaited response must be complete
        self.idle_since = time.monotonic()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        try:
            parsed = _parse(self.buffer, self.method)
        except ValueError as exc:
            self.waiter = None
            waiter.set_exception(exc)
            return
        if parsed is not None:
            response, keep, used = parsed
            del self.buffer[:used]
            self.waiter = None
            waiter.set_result((response, keep))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            self.waiter = None
            if exc is None and self.buffer:  # a response delimited by the end of the connection
                try:
                    parsed = _parse(self.buffer, self.method, at_eof=True)
                except ValueError as error:
                    waiter.set_exception(error)
                    return
                if parsed is not None:
                    waiter.set_result((parsed[0], False))
                    return
            waiter.set_exception(ConnectionResetError("the server closed the connection"))

    def send(self, data: bytes, method: str, seconds: float) -> asyncio.Future[tuple[Response, bool]]:
        """Write a request; the future of its response and whether the connection stays open."""
        assert self.transport is not None and self.waiter is None
        self.method = method
        self.deadline = self.loop.time() + seconds
        self.waiter = self.loop.create_future()
        self.transport.write(data)
        return self.waiter

    def expire(self, now: float) -> None:
        """Fail the awaited response if its deadline has passed (the connection is then unusable)."""
        waiter = self.waiter
        if waiter is not None and not waiter.done() and now >= self.deadline:
            self.waiter = None
            waiter.set_exception(TimeoutError("no complete response in time"))
            self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _parse(buffer: bytearray, method: str, at_eof: bool = False) -> tuple[Response, bool, int] | None:
    """A complete response at the start of `buffer`: (response, keep-alive, bytes used); None
    while it is incomplete. ValueError for a malformed one."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEADER_BYTES:
            raise ValueError("response head too large")
        return None
    lines = bytes(buffer[:end]).split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length: int | None = None
    chunked = False
    keep = True
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            keep = b"close" not in value.lower()
    start = end + 4
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return Response(status, b""), keep, start
    if chunked:
        return _chunked(buffer, start, status, keep)
    if length is None:  # delimited by the end of the connection
        return (Response(status, bytes(buffer[start:])), False, len(buffer)) if at_eof else None
    if len(buffer) < start + length:
        return None
    return Response(status, bytes(buffer[start : start + length])), keep, start + length


def _chunked(buffer: bytearray, position: int, status: int, keep: bool) -> tuple[Response, bool, int] | None:
    body = bytearray()
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        size = int(bytes(buffer[position:line_end]).split(b";")[0], 16)
        position = line_end + 2
        if size == 0:
            if buffer.find(b"\r\n", position) < 0:  # the (empty) trailer's end
                return None
            return Response(status, bytes(body)), keep, buffer.find(b"\r\n", position) + 2
        if len(buffer) < position + size + 2:
            return None
        body += buffer[position : position + size]
        position += size + 2


class LeanHttp:
    """HTTP/1.1 keep-alive over asyncio protocols; idle connections are reused last-in first-out.
    Timeouts are kept by one watchdog task per client, not a timer per request."""

    def __init__(self, base_url: str, timeout: float = 60.0, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"only http:// URLs are supported, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.idle: list[_Connection] = []
        self.busy: set[_Connection] = set()
        self.host_header = f"{self.host}:{self.port}".encode()
        # Encoded once: every request carries the same extra header lines.
        self.extra_head = "".join(f"\r\n{name}: {value}" for name, value in (headers or {}).items()).encode()
        self._watchdog: asyncio.Task[None] | None = None
        self._heads: dict[tuple[str, str], bytes] = {}  # request line and fixed headers, per route

    async def request(
        self,
        method: str,
        path: str,
        content: bytes | None = None,
        seconds: float | None = None,
        headers: list[tuple[str, str]] | None = None,
    ) -> Response:
        head = self._heads.get((method, path))
        if headers is not None:
            lines = "".join(f"{name}: {value}\r\n" for name, value in headers)
            head = f"{method} {self.prefix}{path} HTTP/1.1\r\n{lines}".encode() + b"Content-Length: "
        elif head is None:
            head = self._heads[(method, path)] = (
                f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode()
                + b"Host: "
                + self.host_header
                + self.extra_head
                + b"\r\nContent-Type: application/json\r\nContent-Length: "
            )
        data = head + str(len(content or b"")).encode() + b"\r\n\r\n" + (content or b"")
        # A kept-alive connection the server closed meanwhile fails at once: retry on a new one.
        connection = self._reusable()
        reused = connection is not None
        for _ in range(2):
            if connection is None:
                connection = await self._connect()
            self.busy.add(connection)
            if self._watchdog is None or self._watchdog.done():
                self._watchdog = asyncio.create_task(self._watch())
            try:
                response, keep = await connection.send(data, method, seconds or self.timeout)
            except (OSError, ValueError) as exc:  # TimeoutError is an OSError too
                self.busy.discard(connection)
                connection.close()
                connection = None
                if reused:
                    reused = False
                    continue
                raise HttpError(f"{method} {path}: {exc!r}") from exc
            except BaseException:
                self.busy.discard(connection)
                connection.close()  # cancelled mid-response: the connection is unusable
                raise
            self.busy.discard(connection)
            if keep and not connection.closed:
                connection.idle_since = time.monotonic()
                self.idle.append(connection)
            else:
                connection.close()
            return response
        raise HttpError(f"{method} {path}: no connection")  # pragma: no cover - the loop returns or raises

    def _reusable(self) -> _Connection | None:
        """The most recently used idle connection the server has not timed out; older ones are
        closed (uvicorn drops a keep-alive connection after 5 idle seconds)."""
        while self.idle:
            connection = self.idle.pop()
            if not connection.closed and time.monotonic() - connection.idle_since < KEEPALIVE_REUSE_SECONDS:
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(lambda: _Connection(loop), self.host, self.port)
        except OSError as exc:
            raise HttpError(f"connect {self.host}:{self.port}: {exc!r}") from exc
        return connection

    async def _watch(self) -> None:
        """Fail responses that are late (bounded: it ends when no request is in flight)."""
        loop = asyncio.get_running_loop()
        while self.busy:
            await asyncio.sleep(0.1)
            now = loop.time()
            for connection in list(self.busy):
                connection.expire(now)

    async def close(self) -> None:
        for connection in self.idle:
            connection.close()
        self.idle.clear()
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog


class HttpxHttp:
    """httpx.AsyncClient with one connection per client slot (see the module docstring)."""

    def __init__(self, base_url: str, timeout: float = 60.0, headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self.headers = {"content-type": "application/json", **(headers or {})}
        self.idle: list[httpx.AsyncClient] = []
        self.all: list[httpx.AsyncClient] = []

    async def request(
        self,
        method: str,
        path: str,
        content: bytes | None = None,
        seconds: float | None = None,
        headers: list[tuple[str, str]] | None = None,
    ) -> Response:
        if self.idle:
            client = self.idle.pop()
        else:
            client = httpx.AsyncClient(
                base_url=self.base_url,
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                timeout=httpx.Timeout(self.timeout),
                headers=self.headers,
            )
            self.all.append(client)
        try:
            response = await client.request(
                method, path, content=content, timeout=seconds or self.timeout, headers=headers
            )
        except httpx.HTTPError as exc:
            raise HttpError(f"{method} {path}: {exc!r}") from exc
        finally:
            self.idle.append(client)
        return Response(response.status_code, response.content)

    async def close(self) -> None:
        for client in self.all:
            await client.aclose()
        self.all.clear()
        self.idle.clear()


def make_http(kind: str, base_url: str, headers: dict[str, str] | None = None) -> Http:
    """The transport called `kind` ('lean' or 'httpx'), sending `headers` with every request."""
    if kind == "httpx":
        return HttpxHttp(base_url, headers=headers)
    if kind == "lean":
        return LeanHttp(base_url, headers=headers)
    raise ValueError(f"unknown HTTP client {kind!r}")
