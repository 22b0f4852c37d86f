"""The hot dispatch (app/api/hot.py): the hot operations, read off the operation table, are matched and
answered without FastAPI; every other request is left to FastAPI; and the lane authorizes the
operation it matched."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.types import Message

from app.api.hot import HOT, hot_answer, hot_match
from app.api.limits import capped_body
from app.api.operations import OPERATIONS
from app.main import create_app
from app.service.messages import MessageService
from app.service.queues import QueueService
from tests.api.helpers import client_for, lane_answers, make_key, served
from tests.conftest import settings_for
from tests.factories import make_queue

JSON = [(b"content-type", b"application/json; charset=utf-8")]


def scope(method: str, path: str, headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "headers": JSON if headers is None else headers}


async def call(
    messages: MessageService, method: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]]
) -> tuple[int, Any]:
    """What the lane answers, past access control: match, read the body under a 4,096-byte cap, answer."""
    request = scope(method, path, headers)
    matched = hot_match(request)
    assert matched is not None, path
    operation, name = matched
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    read = await capped_body(request, receive, send, 4096)
    if read is None:
        return sent[0]["status"], json.loads(sent[1]["body"])
    status, answer, _ = await hot_answer(messages, operation, name, read, None)
    return status, json.loads(answer)


async def test_hot_operations_are_answered_without_fastapi(queues: QueueService, messages: MessageService) -> None:
    queue = await make_queue(queues)
    base = f"/v1/queues/{queue}/messages"
    status, sent = await call(messages, "POST", base, b'{"body": {"n": 1}}', JSON)
    assert status == 201 and sent["duplicate"] is False
    status, got = await call(messages, "POST", f"{base}/receive", b'{"max_messages": 5}', [])
    assert status == 200 and [m["body"] for m in got["messages"]] == [{"n": 1}]
    handle = got["messages"][0]["receipt_handle"]
    ack = json.dumps({"entries": [{"id": "a", "receipt_handle": handle}]}).encode()
    status, acked = await call(messages, "POST", f"{base}/ack", ack, JSON)
    assert status == 200 and acked == {"successful": [{"id": "a"}], "failed": []}
    status, error = await call(messages, "POST", "/v1/queues/nope/messages/receive", b"{}", JSON)
    assert status == 404 and error["error"]["code"] == "queue_not_found"
    status, error = await call(messages, "POST", f"{base}/receive", b'{"max_messages": 0}', JSON)
    assert status == 400 and error["error"]["code"] == "invalid_request"
    assert "max_messages" in error["error"]["message"]
    status, error = await call(messages, "POST", f"{base}/batch", b"x" * 5000, JSON)
    assert status == 413 and error["error"]["code"] == "request_too_large"


def test_everything_else_goes_to_fastapi(db_url: str) -> None:
    # Each hot operation of the table, on its own path: that operation, with the queue name.
    assert [o for o in OPERATIONS if o.hot] == list(HOT.values()) and len(HOT) == 6
    for operation in HOT.values():
        assert hot_match(scope(operation.method, operation.path.replace("{name}", "q"))) == (operation, "q")
    others = [
        ("GET", "/v1/queues/q/messages/receive", JSON),  # wrong method: FastAPI's 405
        ("POST", "/v1/queues/q/messages/receive", [(b"content-type", b"text/plain")]),
        ("POST", "/v1/queues/q/messages/other", JSON),
        ("POST", "/v1/queues/q/purge", JSON),
        ("POST", f"/v1/queues/{'q' * 81}/messages", JSON),  # over QueueName's bound: FastAPI's 400
        ("POST", "/v1/queues/q/messages/receive\n", JSON),  # a control character: the front's 404
        ("POST", "/v1/queues/q\x00/messages", JSON),
    ]
    for method, path, headers in others:
        assert hot_match(scope(method, path, headers)) is None, path
    disabled = create_app(settings_for(db_url, fast_path=False))
    assert disabled.lane is None  # type: ignore[attr-defined]


async def test_the_lane_authorizes_the_operation_it_matched(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over a socket, through the lane: it checks the action of the hot operation it matched on
    the queue it read; a key that may only send is refused the others, and no key is 401."""
    app = create_app(settings_for(db_url))
    answered = lane_answers(app, monkeypatch)
    async with app.router.lifespan_context(app), served(app), client_for(app) as http:
        queue = await make_queue(app.state.queues)
        base = f"/v1/queues/{queue}/messages"
        sender = {"Authorization": f"Bearer {await make_key(app, f'{queue}:send')}"}
        response = await http.post(base, json={"body": 1}, headers=sender)
        assert response.status_code == 201
        for suffix in ("/receive", "/ack", "/nack", "/visibility"):
            response = await http.post(base + suffix, json={}, headers=sender)
            assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden"), suffix
        response = await http.post(base, json={"body": 1})
        assert (response.status_code, response.json()["error"]["code"]) == (401, "unauthorized")
    assert len(answered) == 6  # every one of them answered by the lane
