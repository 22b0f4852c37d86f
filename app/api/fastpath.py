"""The fast path: the hot operations (app/api/operations.py) served straight from ASGI.

Why: measured on the bench machine, a trivial FastAPI route costs ~135 µs of CPU per request
(7.3k requests/s on one core) while uvicorn alone answers in ~20 µs. On 2 cores shared with
PostgreSQL that overhead, not the database, bounded message throughput.

What it does: for a request `hot_match` reads as a hot operation (POST /v1/queues/{name}/messages
[/batch|/receive|/ack|/nack|/visibility], with a JSON or absent content type), authorize its
action, read the body under the byte cap, and answer with `hot_answer` (app/api/hot.py): the
operation's model and handler, FastAPI's answer. Every other request, and every request when the
fast path is off (`PQS_FAST_PATH=false`), goes through FastAPI unchanged; the API tests run both
ways.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.auth import refusal
from app.api.departure import watched
from app.api.errors import answer_to, send_answer
from app.api.hot import hot_answer, hot_match
from app.api.limits import Disconnected, capped_body
from app.api.operations import Operation


class FastPath:
    """ASGI middleware in front of FastAPI for the hot operations."""

    def __init__(self, app: ASGIApp, max_bytes: int, enabled: bool = True) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.enabled and scope["type"] == "http" and (matched := hot_match(scope)) is not None:
            await self._serve(scope, receive, send, *matched)
            return
        await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, operation: Operation, name: str) -> None:
        # Authorized on this match, before the body is read (app/api/auth.py).
        assert operation.action is not None  # every hot operation has one (`hot`)
        error = refusal(scope, operation.action, name)
        if error is not None:
            await send_answer(send, answer_to(error))
            return
        try:
            body = await capped_body(scope, receive, send, self.max_bytes)
        except Disconnected:
            return
        if body is None:
            return
        messages = scope["app"].state.messages
        if operation.long_poll:  # it sees its client leave (app/api/departure.py)
            async with watched(receive) as recipient:
                answer = await hot_answer(messages, operation, name, body, recipient)
        else:
            answer = await hot_answer(messages, operation, name, body, None)
        await send_answer(send, answer)
