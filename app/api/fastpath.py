"""The fast path: the six POST routes under `/v1/queues/{name}/messages` served straight from ASGI.

Why: measured on the bench machine, a trivial FastAPI route costs ~135 µs of CPU per request
(7.3k requests/s on one core) while uvicorn alone answers in ~20 µs. On 2 cores shared with
PostgreSQL that overhead, not the database, bounded message throughput.

What it does: for `POST /v1/queues/{name}/messages[/batch|/receive|/ack|/nack|/visibility]` with a
JSON (or absent) content type, read the body under the byte cap, validate it with the same
pydantic model the FastAPI route declares (`model_validate_json`), call the same `handle_*`
function, and answer with its bytes. Errors get the same status and `{"error": ...}` body as the
FastAPI exception handlers give. Every other request, and every request when the fast path is
off (`PQS_FAST_PATH=false`), goes through FastAPI unchanged; the API tests run both ways.
"""

from __future__ import annotations

import json
import logging
import re

from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.auth import refusal
from app.api.departure import watched
from app.api.errors import (
    INTERNAL_ERROR,
    Answer,
    answer_to,
    describe_validation,
    error_answer,
    send_answer,
    undecodable,
)
from app.api.limits import Disconnected, capped_body
from app.api.routes_messages import HOT_ROUTES, handle_receive
from app.api.schemas import ReceiveRequest
from app.errors import PqsError
from app.service.messages import MessageService
from app.service.recipient import Recipient

log = logging.getLogger(__name__)

# The queue name as FastAPI's path parameter takes it (QueueName: 1-80 characters, no slash), and
# no control character (the front answers a path with one 404; the lane never sees the front).
HOT_PATH = re.compile(r"/v1/queues/([^/\x00-\x1f\x7f]{1,80})/messages(|/batch|/receive|/ack|/nack|/visibility)")


def hot_route(scope: Scope) -> tuple[str, str] | None:
    """(queue name, route suffix) of a request the fast path serves; None for any other."""
    if scope["method"] != "POST":
        return None
    match = HOT_PATH.fullmatch(scope["path"])
    if match is None or not _json_content(scope):
        return None
    return match[1], match[2]


def _json_content(scope: Scope) -> bool:
    """True when the body is to be read as JSON: no content type, or application/json."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bool(value.split(b";", 1)[0].strip().lower() == b"application/json")
    return True


class FastPath:
    """ASGI middleware in front of FastAPI for the hot message routes."""

    def __init__(self, app: ASGIApp, max_bytes: int, enabled: bool = True) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.enabled and scope["type"] == "http" and (route := hot_route(scope)) is not None:
            await self._serve(scope, receive, send, *route)
            return
        await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, name: str, suffix: str) -> None:
        # Authorized on this match, before the body is read (app/api/auth.py).
        error = refusal(scope, HOT_ROUTES[suffix].action, name)
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
        if suffix == "/receive":  # it sees its client leave (app/api/departure.py)
            async with watched(receive) as recipient:
                answer = await hot_answer(messages, name, suffix, body, recipient)
        else:
            answer = await hot_answer(messages, name, suffix, body)
        await send_answer(send, answer)


async def hot_answer(
    messages: MessageService, name: str, suffix: str, body: bytes, recipient: Recipient | None = None
) -> Answer:
    """The answer to a hot route's request. Errors are answered as the FastAPI exception handlers
    answer them (the house error body, with `error_answer`), 500 included.
    A receive is given its `recipient` (see handle_receive)."""
    route = HOT_ROUTES[suffix]
    if not body:
        return error_answer(400, "invalid_request", "body: Field required")
    try:
        # json.loads, as FastAPI does: it accepts what FastAPI accepts (a lone surrogate, for
        # one, which the service then refuses per entry rather than failing the batch).
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return error_answer(400, "invalid_request", undecodable(exc))
    try:
        request = route.request.model_validate(document)
        if isinstance(request, ReceiveRequest):
            answer = await handle_receive(messages, name, request, recipient)
        else:
            answer = await route.handle(messages, name, request)
    except ValidationError as exc:
        return error_answer(400, "invalid_request", describe_validation(exc.errors()))
    except PqsError as exc:
        return answer_to(exc)
    except Exception:
        log.exception("unhandled error")
        return INTERNAL_ERROR
    return Answer(route.status, answer)
