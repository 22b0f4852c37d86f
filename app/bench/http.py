"""Two HTTP/1.1 keep-alive transports for the load generator, with one small interface.

- `LeanHttp` (default): a minimal client on asyncio streams, one connection per concurrent
  request, about a tenth of httpx's CPU per request. On a 2-core machine the generator competes
  with the service and PostgreSQL for CPU, so every microsecond it spends is taken from them.
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
        self, method: str, path: str, content: bytes | None = None, seconds: float | None = None
    ) -> Response:
        """Send a request and read its whole response."""
        ...

    async def close(self) -> None:
        """Close every connection."""
        ...


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()

    def close(self) -> None:
        self.writer.close()


class LeanHttp:
    """HTTP/1.1 keep-alive over asyncio streams; idle connections are reused last-in first-out."""

    def __init__(self, base_url: str, timeout: float = 60.0, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"only http:// URLs are supported, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.idle: list[_Connection] = []
        self.host_header = f"{self.host}:{self.port}".encode()
        # Encoded once: every request carries the same extra header lines.
        self.extra_head = "".join(f"\r\n{name}: {value}" for name, value in (headers or {}).items()).encode()

    async def request(
        self, method: str, path: str, content: bytes | None = None, seconds: float | None = None
    ) -> Response:
        head = (
            f"{method} {self.prefix}{path} HTTP/1.1\r\n".encode()
            + b"Host: "
            + self.host_header
            + self.extra_head
            + b"\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(content or b"")).encode()
            + b"\r\n\r\n"
        )
        # A kept-alive connection the server closed meanwhile fails at once: retry on a new one.
        connection = self._reusable()
        reused = connection is not None
        for _ in range(2):
            if connection is None:
                connection = await self._connect()
            try:
                async with asyncio.timeout(seconds or self.timeout):
                    connection.writer.write(head + content if content else head)
                    response, keep = await self._read(connection.reader, method)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                connection.close()
                connection = None
                if reused:
                    reused = False
                    continue
                raise HttpError(f"{method} {path}: {exc!r}") from exc
            except BaseException:
                connection.close()  # timeout or cancellation mid-response: the stream is unusable
                raise
            if keep:
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
            if time.monotonic() - connection.idle_since < KEEPALIVE_REUSE_SECONDS:
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=MAX_HEADER_BYTES)
        except OSError as exc:
            raise HttpError(f"connect {self.host}:{self.port}: {exc!r}") from exc
        return _Connection(reader, writer)

    @staticmethod
    async def _read(reader: asyncio.StreamReader, method: str) -> tuple[Response, bool]:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
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
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return Response(status, b""), keep
        if chunked:
            body = bytearray()
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                body += await reader.readexactly(size + 2)
                del body[-2:]
            return Response(status, bytes(body)), keep
        if length is None:
            return Response(status, await reader.read()), False
        return Response(status, await reader.readexactly(length)), keep

    async def close(self) -> None:
        for connection in self.idle:
            connection.close()
        for connection in self.idle:
            with contextlib.suppress(Exception):
                await connection.writer.wait_closed()
        self.idle.clear()


class HttpxHttp:
    """httpx.AsyncClient with one connection per client slot (see the module docstring)."""

    def __init__(self, base_url: str, timeout: float = 60.0, headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self.headers = {"content-type": "application/json", **(headers or {})}
        self.idle: list[httpx.AsyncClient] = []
        self.all: list[httpx.AsyncClient] = []

    async def request(
        self, method: str, path: str, content: bytes | None = None, seconds: float | None = None
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
            response = await client.request(method, path, content=content, timeout=seconds or self.timeout)
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
