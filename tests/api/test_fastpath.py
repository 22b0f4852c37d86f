"""The fast path serves the hot message routes itself and hands everything else to FastAPI."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from app.access import Access, parse_grant
from app.api.auth import ACCESS, OPEN
from app.api.fastpath import FastPath
from app.service.messages import MessageService
from app.service.queues import QueueService
from tests.factories import make_queue


class Inner:
    """Stands in for FastAPI: records that it was called and answers 299."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def call(
    app: FastPath,
    messages: MessageService,
    method: str,
    path: str,
    body: bytes,
    headers: list[tuple[bytes, bytes]],
    access: Access | None = OPEN,
) -> tuple[int, Any]:
    scope: dict[str, Any] = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": headers,
        "app": SimpleNamespace(state=SimpleNamespace(messages=messages)),
        ACCESS: access,
    }
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = sent[0]["status"]
    payload = sent[1]["body"]
    return status, json.loads(payload) if payload else None


JSON = [(b"content-type", b"application/json; charset=utf-8")]


async def test_hot_routes_are_served_without_fastapi(queues: QueueService, messages: MessageService) -> None:
    inner = Inner()
    fast = FastPath(inner, max_bytes=4096)
    queue = await make_queue(queues)
    base = f"/v1/queues/{queue}/messages"
    status, sent = await call(fast, messages, "POST", base, b'{"body": {"n": 1}}', JSON)
    assert status == 201 and sent["duplicate"] is False
    status, got = await call(fast, messages, "POST", f"{base}/receive", b'{"max_messages": 5}', [])
    assert status == 200 and [m["body"] for m in got["messages"]] == [{"n": 1}]
    handle = got["messages"][0]["receipt_handle"]
    ack = json.dumps({"entries": [{"id": "a", "receipt_handle": handle}]}).encode()
    status, acked = await call(fast, messages, "POST", f"{base}/ack", ack, JSON)
    assert status == 200 and acked == {"successful": [{"id": "a"}], "failed": []}
    status, error = await call(fast, messages, "POST", "/v1/queues/nope/messages/receive", b"{}", JSON)
    assert status == 404 and error["error"]["code"] == "queue_not_found"
    status, error = await call(fast, messages, "POST", f"{base}/receive", b'{"max_messages": 0}', JSON)
    assert status == 400 and error["error"]["code"] == "invalid_request"
    assert "max_messages" in error["error"]["message"]
    status, error = await call(fast, messages, "POST", f"{base}/batch", b"x" * 5000, JSON)
    assert status == 413 and error["error"]["code"] == "request_too_large"
    assert inner.calls == []


async def test_everything_else_goes_to_fastapi(messages: MessageService) -> None:
    inner = Inner()
    fast = FastPath(inner, max_bytes=4096)
    others = [
        ("GET", "/v1/queues/q/messages/receive", JSON),  # wrong method: FastAPI's 405
        ("POST", "/v1/queues/q/messages/receive", [(b"content-type", b"text/plain")]),
        ("POST", "/v1/queues/q/messages/other", JSON),
        ("POST", "/v1/queues/q/purge", JSON),
        ("POST", f"/v1/queues/{'q' * 81}/messages", JSON),  # over QueueName's bound: FastAPI's 400
    ]
    for method, path, headers in others:
        status, _ = await call(fast, messages, method, path, b"{}", headers)
        assert status == 299, path
    assert len(inner.calls) == len(others)
    disabled = FastPath(inner, max_bytes=4096, enabled=False)
    status, _ = await call(disabled, messages, "POST", "/v1/queues/q/messages/receive", b"{}", JSON)
    assert status == 299


async def test_the_fast_path_authorizes_the_route_it_matched(queues: QueueService, messages: MessageService) -> None:
    """Behind the Auth middleware a request carries its Access; the fast path checks the action of
    the hot route it matched on the queue it read, and without an Access it fails closed."""
    fast = FastPath(Inner(), max_bytes=4096)
    queue = await make_queue(queues)
    base = f"/v1/queues/{queue}/messages"
    sender = Access("k", (parse_grant(f"{queue}:send"),))
    status, _ = await call(fast, messages, "POST", base, b'{"body": 1}', JSON, sender)
    assert status == 201
    for suffix in ("/receive", "/ack", "/nack", "/visibility"):
        status, answer = await call(fast, messages, "POST", base + suffix, b"{}", JSON, sender)
        assert (status, answer["error"]["code"]) == (403, "forbidden"), suffix
    status, answer = await call(fast, messages, "POST", base, b'{"body": 1}', JSON, None)
    assert (status, answer["error"]["code"]) == (401, "unauthorized")
