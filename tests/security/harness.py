"""The service as an attacker meets it: uvicorn on a real socket, in this process (so a test can
read the database the app writes to), served each way a request can take, and a client that sends
bytes exactly as written (raw CR, LF, NUL, absolute-form targets: nothing normalized).

The ways (`MODES`), each with its own HTTP parser or matcher of paths:
- `lane`: `pqs serve` as it runs (PqsHttpProtocol); the hot operations go to the hot lane, matched
  by its pattern (app/api/hot.py), the rest to FastAPI's router.
- `fastapi`: `pqs serve` with the lane off (PQS_FAST_PATH=false); every route goes through
  FastAPI's router.
- `asgi`: the app under another ASGI server (uvicorn's own httptools protocol), which has no lane:
  FastAPI's router, behind uvicorn's request parsing rather than ours.
- `h11`: the same behind uvicorn's pure-Python parser (a different HTTP parser).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI

from app.access import parse_grant
from app.api.transport import PqsHttpProtocol
from app.db.engine import Database
from app.db.rows import Conn
from app.service.keys import create_key
from tests.api.helpers import LoopThread, port_of, served
from tests.conftest import settings_for
from tests.reads import every_row

T = TypeVar("T")
MODES = ("lane", "asgi", "fastapi", "h11")


@dataclass
class Answer:
    """A response as read off the socket; status 0 when the server closed without answering."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Server:
    app: FastAPI
    port: int
    mode: str

    @property
    def ours(self) -> bool:
        """Whether PqsHttpProtocol serves (it answers even what it cannot parse in the house shape)."""
        return self.mode in ("lane", "fastapi")

    async def key(self, *scopes: str) -> str:
        """A new key with these scopes (`PATTERN:ACTIONS`)."""
        db: Database = self.app.state.db
        grants = tuple(parse_grant(s) for s in scopes)
        _, key = await db.run(lambda conn: create_key(conn, "test", grants))
        return key

    async def snapshot(self) -> list[Any]:
        """Every row of every queue table: equal snapshots mean nothing changed."""
        return await every_row(self.app.state.db)

    async def key_rows(self) -> list[Any]:
        """Every API key's id, grants and revocation: equal lists mean no key was made or revoked."""

        async def read(conn: Conn) -> list[Any]:
            cur = await conn.execute("SELECT id, scopes, revoked_at FROM api_keys ORDER BY id")
            return list(await cur.fetchall())

        db: Database = self.app.state.db
        return await db.run(read)


@asynccontextmanager
async def serving(db_url: str, mode: str, **overrides: Any) -> AsyncIterator[Server]:
    """The app with access control on (and these settings), served in `mode` on a free 127.0.0.1
    port; GET /metrics open to keys only (as to a client off the metrics networks), unless the
    settings say otherwise."""
    overrides.setdefault("metrics_networks", "")
    app = create_app_for(db_url, fast_path=mode != "fastapi", **overrides)
    http: Any = {"asgi": "httptools", "h11": "h11"}.get(mode, PqsHttpProtocol)
    async with served(app, http=http, lifespan="on", log_level="critical") as server:
        yield Server(app, port_of(server), mode)


def create_app_for(db_url: str, **overrides: Any) -> FastAPI:
    from app.main import create_app

    return create_app(settings_for(db_url, **overrides))


def raw_request(
    method: bytes, target: bytes, key: str | None = None, body: bytes | None = None, extra: bytes = b""
) -> bytes:
    """An HTTP/1.1 request with exactly this method and request target, closing the connection."""
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    if key is not None:
        lines.append(b"Authorization: Bearer " + key.encode())
    if body is not None:
        lines += [b"Content-Type: application/json", b"Content-Length: %d" % len(body)]
    return b"\r\n".join(lines) + b"\r\n" + extra + b"\r\n" + (body or b"")


async def exchange(port: int, data: bytes) -> Answer:
    """Send `data` on a new connection and read until the server closes it (10 s at most)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    if not raw:
        return Answer(0, {}, b"")
    head, _, body = raw.partition(b"\r\n\r\n")
    first, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return Answer(int(first.split(" ")[1]), headers, body)


class Threaded:
    """`serving` on an event loop of its own thread, for synchronous tests (hypothesis drives
    synchronous functions): `run` waits for a coroutine on that loop."""

    def __init__(self, db_url: str, mode: str) -> None:
        self._db_url, self._mode = db_url, mode
        self._on = LoopThread()
        self.server: Server

    def __enter__(self) -> Threaded:
        self.server = self._on.enter(serving(self._db_url, self._mode))
        return self

    def __exit__(self, *exc: object) -> None:
        self._on.close()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._on.run(coroutine)
