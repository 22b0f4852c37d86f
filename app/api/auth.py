"""Access control for /v1: a pure ASGI middleware, outermost, so it also guards the fast path.

Every request under /v1 needs `Authorization: Bearer <key>` with a valid key (401 otherwise,
with `WWW-Authenticate: Bearer`). The route is then mapped to an action and a queue name by the
precompiled patterns of ROUTES, which mirror the routes of `routes_queues` and `routes_messages`
(a test keeps them in step), and the key's grants must allow it (403 otherwise). Both answers
come before the body is read, so neither changes anything. A path under /v1 that is no route
still needs a valid key, then FastAPI answers it (404, 405). Everything outside /v1 (health,
OpenAPI, docs) is open.

Nothing here logs a header; the key reaches no log, and only its hash is kept (`KeyVerifier`).
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from app.access import Access, Action
from app.api.errors import HEADERS, error_bytes
from app.api.limits import send_json
from app.errors import Forbidden, PqsError, Unauthorized, Unavailable
from app.service.keys import KeyVerifier

# Where a route handler finds the caller's Access (absent when access control is off).
ACCESS = "pqs.access"
EVERY_QUEUE = None

_QUEUE = r"/v1/queues/([^/]+)"
# method -> [(path pattern, action)]; group 1 is the queue name, no group means every queue.
ROUTES: dict[str, list[tuple[re.Pattern[str], Action]]] = {
    "POST": [
        (re.compile(_QUEUE + r"/messages(?:/batch)?"), "send"),
        (re.compile(_QUEUE + r"/messages/receive"), "receive"),
        (re.compile(_QUEUE + r"/messages/(?:ack|nack|visibility|release)"), "ack"),
        (re.compile(_QUEUE + r"/(?:purge|redrive)"), "admin"),
    ],
    "DELETE": [
        (re.compile(_QUEUE + r"/messages/[^/]+"), "ack"),
        (re.compile(_QUEUE), "admin"),
    ],
    "GET": [
        (re.compile(_QUEUE), "admin"),
        (re.compile(r"/v1/queues"), "admin"),
    ],
    "PUT": [(re.compile(_QUEUE), "admin")],
    "PATCH": [(re.compile(_QUEUE), "admin")],
}


def route_action(method: str, path: str) -> tuple[Action, str | None] | None:
    """(action, queue name or None for every queue) of a /v1 route; None for no known route."""
    for pattern, action in ROUTES.get(method, ()):
        match = pattern.fullmatch(path)
        if match is not None:
            return action, match[1] if pattern.groups else EVERY_QUEUE
    return None


def bearer_key(scope: Scope) -> str | None:
    """The key of an `Authorization: Bearer <key>` header, if there is one."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").strip().partition(" ")
            key = key.strip()
            return key if scheme.lower() == "bearer" and key else None
    return None


def forbidden(action: Action, queue: str | None) -> Forbidden:
    """The 403 for an action the key's scopes do not cover."""
    target = "every queue (listing)" if queue is None else f"queue {queue!r}"
    return Forbidden(f"this API key does not allow {action} on {target}")


def require(scope: Scope, action: Action, queue: str) -> None:
    """For checks inside a route (a dead-letter queue named in a body): Forbidden unless the
    caller's key allows `action` on `queue`. No-op when access control is off."""
    access: Access | None = scope.get(ACCESS)
    if access is not None and not access.allows(action, queue):
        raise forbidden(action, queue)


async def _refuse(send: Send, error: PqsError, status: int) -> None:
    await send_json(send, status, error_bytes(error.code, error.message), refusal_headers(status))


class Auth:
    """ASGI middleware: a valid key on every /v1 request, and a grant for what it asks."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not (scope["path"] == "/v1" or scope["path"].startswith("/v1/")):
            await self.app(scope, receive, send)
            return
        refusal = await admit(scope)
        if refusal is not None:
            await _refuse(send, *refusal)
            return
        await self.app(scope, receive, send)


async def admit(scope: Scope) -> tuple[PqsError, int] | None:
    """Check the key of a /v1 request and its grant for what it asks; None when admitted (the
    caller's Access is then in scope[ACCESS]), else the error to answer and its status."""
    key = bearer_key(scope)
    if key is None:
        return Unauthorized("an API key is required: send `Authorization: Bearer <key>`"), 401
    verifier: KeyVerifier = scope["app"].state.keys
    try:
        access = await verifier.verify(key)
    except Unavailable as exc:
        return exc, 503
    if access is None:
        return Unauthorized("unknown or revoked API key"), 401
    target = route_action(scope["method"], scope["path"])
    if target is not None and not access.allows(*target):
        return forbidden(*target), 403
    scope[ACCESS] = access
    return None


def refusal_headers(status: int) -> list[tuple[bytes, bytes]]:
    """The extra headers of a refusal (WWW-Authenticate on 401, Retry-After on 503)."""
    return [(name.lower().encode(), value.encode()) for name, value in HEADERS.get(status, {}).items()]
