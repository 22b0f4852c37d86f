"""Small helpers for the HTTP contract tests: serving an app as `pqs serve` does, clients, error-shape
checks and one-call wrappers for the routes the tests lean on (send, receive, ack, stats)."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from app.access import ACTIONS, Action, expanded, parse_grant
from app.api.lane import HotLane
from app.api.transport import PqsHttpProtocol
from app.db.engine import Database
from app.service.keys import create_key
from app.service.recipient import Recipient
from tests.conftest import admin_headers

# The base URL of each app that `served` serves; a client of any other app calls it in-process.
SERVED: weakref.WeakKeyDictionary[FastAPI, str] = weakref.WeakKeyDictionary()


@asynccontextmanager
async def served(
    app: FastAPI,
    *,
    http: Any = PqsHttpProtocol,
    lifespan: str = "off",
    log_level: str | None = None,
    forwarded_allow_ips: str | None = None,
) -> AsyncIterator[uvicorn.Server]:
    """`app` served by uvicorn on a free 127.0.0.1 port, in this event loop; by default as `pqs serve`
    serves it (PqsHttpProtocol, so the hot lane answers the hot operations), its lifespan run by
    the caller; `forwarded_allow_ips` is uvicorn's (None: its default, 127.0.0.1). Clients of
    `client_for` reach it over the socket meanwhile."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        http=http,
        ws="none",
        lifespan=lifespan,
        log_config=None,
        log_level=log_level,
        forwarded_allow_ips=forwarded_allow_ips,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(400):
            if server.started or task.done():
                break
            await asyncio.sleep(0.01)
        assert server.started, "uvicorn did not start"
        SERVED[app] = f"http://127.0.0.1:{port_of(server)}"
        yield server
    finally:
        SERVED.pop(app, None)
        server.should_exit = True
        await asyncio.wait_for(task, timeout=30)


def port_of(server: uvicorn.Server) -> int:
    """The port a started server listens on."""
    port: int = server.servers[0].sockets[0].getsockname()[1]
    return port


def lane_answers(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The operationIds of the requests the app's hot lane serves from now on, in order."""
    lane = app.lane  # type: ignore[attr-defined]
    assert isinstance(lane, HotLane)
    answered: list[str] = []
    serve = lane.serve

    async def counted(cycle: Any, operation: Any, name: str, recipient: Recipient) -> None:
        answered.append(operation.operation_id)
        await serve(cycle, operation, name, recipient)

    monkeypatch.setattr(lane, "serve", counted)
    return answered


def client_for(app: FastAPI, headers: dict[str, str] | None = None, *, lenient: bool = False) -> httpx.AsyncClient:
    """A client of `app`: over its socket when `served`, else in-process. In-process, an unhandled
    app error is re-raised unless `lenient` (a served app answers it 500, as any server does)."""
    url = SERVED.get(app)
    if url is not None:
        return httpx.AsyncClient(base_url=url, headers=headers, timeout=60)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=not lenient)
    return httpx.AsyncClient(transport=transport, base_url="http://pqs.test", headers=headers, timeout=60)


@asynccontextmanager
async def lenient_client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client that sees an unhandled app error as the 500 response a server would send, instead of
    the exception the default in-process transport re-raises. It carries an admin key."""
    async with client_for(app, await admin_headers(app), lenient=True) as http:
        yield http


async def make_key(app: FastAPI, *scopes: str) -> str:
    """A key with these scopes (`PATTERN:ACTIONS`) in the app's database."""
    db: Database = app.state.db
    grants = tuple(parse_grant(s) for s in scopes)
    _, key = await db.run(lambda conn: create_key(conn, "test", grants))
    return key


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """The response has `status` and the house error body (with `code`, when given); returns it."""
    assert response.status_code == status, response.text
    payload = response.json()
    assert isinstance(payload, dict) and set(payload) == {"error"}, payload
    error = payload["error"]
    assert isinstance(error, dict) and set(error) == {"code", "message"}, error
    assert isinstance(error["code"], str) and error["code"], error
    assert isinstance(error["message"], str) and error["message"], error
    if code is not None:
        assert error["code"] == code, error
    return error


async def send(client: httpx.AsyncClient, queue: str, body: Any = None, **fields: Any) -> dict[str, Any]:
    """Send one message; asserts 201 and returns the response body."""
    response = await client.post(f"/v1/queues/{queue}/messages", json={"body": body, **fields})
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def receive(client: httpx.AsyncClient, queue: str, **fields: Any) -> list[dict[str, Any]]:
    """Receive (no waiting unless asked); asserts 200 and returns the messages."""
    response = await client.post(f"/v1/queues/{queue}/messages/receive", json={"wait_seconds": 0, **fields})
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


async def settle(client: httpx.AsyncClient, queue: str, verb: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """POST an ack/nack/visibility batch; asserts 200 and returns {successful, failed}."""
    response = await client.post(f"/v1/queues/{queue}/messages/{verb}", json={"entries": entries})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    assert set(result) == {"successful", "failed"}, result
    return result


async def ack(client: httpx.AsyncClient, queue: str, *handles: str) -> dict[str, Any]:
    """Ack these receipt handles (entry ids h0, h1, ...)."""
    entries = [{"id": f"h{i}", "receipt_handle": handle} for i, handle in enumerate(handles)]
    return await settle(client, queue, "ack", entries)


async def stats(client: httpx.AsyncClient, queue: str) -> dict[str, Any]:
    """The `stats` of GET /v1/queues/{queue}."""
    response = await client.get(f"/v1/queues/{queue}")
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["stats"]
    return result


# The action each operation needs (the table, and /metrics): the app declares it on each route.
ACTIONS_BY_ROUTE = {
    ("PUT", "/v1/queues/{name}"): "admin",
    ("GET", "/v1/queues"): "read",
    ("GET", "/v1/queues/{name}"): "read",
    ("PATCH", "/v1/queues/{name}"): "admin",
    ("DELETE", "/v1/queues/{name}"): "admin",
    ("POST", "/v1/queues/{name}/purge"): "admin",
    ("POST", "/v1/queues/{name}/redrive"): "admin",
    ("POST", "/v1/queues/{name}/messages"): "send",
    ("POST", "/v1/queues/{name}/messages/batch"): "send",
    ("POST", "/v1/queues/{name}/messages/receive"): "receive",
    ("POST", "/v1/queues/{name}/messages/ack"): "ack",
    ("POST", "/v1/queues/{name}/messages/nack"): "ack",
    ("POST", "/v1/queues/{name}/messages/visibility"): "ack",
    ("POST", "/v1/queues/{name}/messages/release"): "ack",
    ("DELETE", "/v1/queues/{name}/messages/{receipt_handle}"): "ack",
    ("GET", "/v1/queues/{name}/messages"): "read",
    ("GET", "/v1/queues/{name}/throughput"): "read",
    ("GET", "/v1/queues/{name}/groups"): "read",
    ("GET", "/v1/queues/{name}/history"): "read",
    # No queue in the path: admin on every queue (`*`).
    ("GET", "/v1/keys"): "admin",
    ("POST", "/v1/keys"): "admin",
    ("DELETE", "/v1/keys/{key_id}"): "admin",
    # Outside /v1, applied by its handler: on every queue (`*`), and only from outside the metrics
    # networks (app/api/metrics.py).
    ("GET", "/metrics"): "read",
}
# The /v1 operations about the calling key itself: any valid key (app/access.py, ANY_KEY).
KEY_ROUTES = {("GET", "/v1/keys/self"): "key"}


def lacking(action: Action) -> str:
    """The actions of a key that lacks `action`: every other one that does not imply it either
    (`admin` implies `read`), comma-separated for a scope."""
    return ",".join(a for a in ACTIONS if action not in expanded((a,)))


EMPTY = {"visible": 0, "in_flight": 0, "delayed": 0, "oldest_age_seconds": None}


def counts(s: dict[str, Any]) -> tuple[int, int, int]:
    """(visible, in_flight, delayed) of a stats object."""
    return s["visible"], s["in_flight"], s["delayed"]


def failures(result: dict[str, Any]) -> dict[str, str]:
    """Entry id -> error code of a batch response's `failed` list."""
    return {f["id"]: f["code"] for f in result["failed"]}


def successes(result: dict[str, Any]) -> list[str]:
    """Entry ids of a batch response's `successful` list."""
    return [s["id"] for s in result["successful"]]


T = TypeVar("T")


class LoopThread:
    """An event loop on a thread of its own, holding one async context (a served app) open for a
    synchronous test: `enter` opens it there, `run` waits for a coroutine on that loop, `close`
    leaves the context and stops the loop."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._context: AbstractAsyncContextManager[Any] | None = None

    def enter(self, context: AbstractAsyncContextManager[T]) -> T:
        """Start the loop and enter `context` on it; what it yields."""
        self._thread.start()
        self._context = context
        return self.run(context.__aenter__())

    def close(self) -> None:
        """Leave the context, then stop and close the loop."""
        try:
            if self._context is not None:
                self.run(self._context.__aexit__(None, None, None))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop and wait for its result (60 s at most)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=60)
