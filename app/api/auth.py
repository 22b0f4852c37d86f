"""Access control for /v1, in two steps that never disagree about what a request is.

1. **Authentication**, outermost (`Auth`, a pure ASGI middleware, and the hot lane, which runs
   before ASGI): every request whose path is under /v1 needs `Authorization: Bearer <key>` with a
   valid key (401 otherwise, with `WWW-Authenticate: Bearer`). The caller's `Access` is then in
   `scope[ACCESS]`. A path under /v1 that is no route still needs a valid key (nobody probes the
   routes without one). This step knows nothing of routes.
2. **Authorization** happens on the very match that dispatches the request, with the action that
   match's operation declares and the queue name that match extracted (403 otherwise). Both
   matchers are made from the operation table (app/api/operations.py): FastAPI's routes are
   `GuardedRoute`s, each declaring its operation's action with `needs(...)`, checked before the
   body is read; the hot lane checks the action of the operation it matched, before reading the
   body. Whatever serves a request decides its permission, so a path that some matcher reads
   differently (a trailing `%0A`, which a regular expression's `$` accepts) cannot reach a
   handler past the check of another action.

Without an `Access` in the scope a guarded operation answers 401: it fails closed. With access
control off (`PQS_AUTH_ENABLED=false`, loopback only) the front puts `OPEN` there instead.

Nothing here logs a header; the key reaches no log, and only its hash is kept (`KeyVerifier`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from app.access import ACTIONS, ANY_ACTION, ANY_KEY, EVERYTHING, Access, Action, Need, Requirement
from app.api.errors import answer_to, send_answer
from app.api.json_body import JsonBodyRoute
from app.errors import Forbidden, PqsError, Unauthorized, Unavailable, quote
from app.service.keys import KeyVerifier

# Where the authorization step finds the caller's Access.
ACCESS = "pqs.access"
# Every action on every queue: the access of every request when access control is off.
OPEN = Access("", EVERYTHING)
EVERY_QUEUE = None
SECURITY_SCHEME = "bearerAuth"


def under_v1(path: str) -> bool:
    """Whether `path` is one access control guards (the /v1 API)."""
    return path == "/v1" or path.startswith("/v1/")


def bearer_key(scope: Scope) -> str | None:
    """The key of an `Authorization: Bearer <key>` header, if there is one."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").strip().partition(" ")
            key = key.strip()
            return key if scheme.lower() == "bearer" and key else None
    return None


async def authenticate(scope: Scope) -> PqsError | None:
    """Verify the request's key and put its Access in scope[ACCESS]; the error to answer (401,
    or 503 when the keys cannot be read) when it cannot be."""
    key = bearer_key(scope)
    if key is None:
        return Unauthorized("an API key is required: send `Authorization: Bearer <key>`")
    verifier: KeyVerifier = scope["app"].state.keys
    try:
        access = await verifier.verify(key)
    except Unavailable as exc:
        return exc
    if access is None:
        return Unauthorized("unknown or revoked API key")
    scope[ACCESS] = access
    return None


def refusal(scope: Scope, need: Need, queue: str | None) -> PqsError | None:
    """Why the caller may not do `need` (an action, or ANY_ACTION) on `queue` (None: every queue,
    as listing does); None when it may. Without an authenticated Access, Unauthorized: fail closed."""
    access: Access | None = scope.get(ACCESS)
    if access is None:
        return Unauthorized("an API key is required: send `Authorization: Bearer <key>`")
    if access.allows(need, queue):
        return None
    target = "every queue (listing)" if queue is None else f"queue {quote(queue)}"
    allowed = "any action" if need == ANY_ACTION else need
    return Forbidden(f"this API key does not allow {allowed} on {target}")


def knows(scope: Scope, queue: str) -> bool:
    """Whether the caller may learn that `queue` exists when an answer about another queue would
    name it (a dead letter's source, a move task's destination): it may do some action there."""
    return refusal(scope, ANY_ACTION, queue) is None


def authorize(scope: Scope, action: Action, queue: str | None) -> None:
    """Raise the refusal of `action` on `queue`, if any (see `refusal`). Routes also call it for a
    second queue a request names (a dead-letter queue in a body)."""
    error = refusal(scope, action, queue)
    if error is not None:
        raise error


class Auth:
    """ASGI middleware, step 1: a valid key on every /v1 request; with `enabled` False, every
    request gets OPEN access instead."""

    def __init__(self, app: ASGIApp, *, enabled: bool) -> None:
        self.app = app
        self.enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if not self.enabled:
                scope[ACCESS] = OPEN
            elif under_v1(scope["path"]):
                error = await authenticate(scope)
                if error is not None:
                    await send_answer(send, answer_to(error))
                    return
        await self.app(scope, receive, send)


# -- step 2 on FastAPI's routes --------------------------------------------------------------------


def needs(requirement: Requirement) -> dict[str, Any]:
    """A route's `openapi_extra` declaring the action it needs on the queue its path names (on every
    queue when it names none). The document shows it as the bearer scheme's role (OpenAPI 3.1);
    ANY_KEY, a valid key and no action, as the scheme with no role."""
    return {"security": [{SECURITY_SCHEME: [] if requirement == ANY_KEY else [requirement]}]}


def needed_action(route: APIRoute) -> Requirement:
    """The action (or ANY_KEY) a GuardedRoute declared with `needs`."""
    try:
        [requirement] = (route.openapi_extra or {})["security"]
        roles = requirement[SECURITY_SCHEME]
        if not roles:
            return ANY_KEY
        [action] = roles
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{route.path}: a guarded route declares its action (openapi_extra=needs(...))") from exc
    if action not in ACTIONS:
        raise ValueError(f"{route.path}: unknown action {action!r}")
    return action  # type: ignore[no-any-return]


def check_guarded(router: APIRouter) -> None:
    """Fail closed at start-up: TypeError for a /v1 route of `router` that is no GuardedRoute."""
    for route in router.routes:
        if isinstance(route, APIRoute) and under_v1(route.path) and not isinstance(route, GuardedRoute):
            raise TypeError(f"{route.path}: a /v1 route must be a GuardedRoute")


class GuardedRoute(JsonBodyRoute):
    """A FastAPI route that authorizes on the match that dispatched it: the action it declares, on
    the `name` path parameter that match extracted, before the body is read (ANY_KEY: any valid
    key, for an operation about the key itself)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        action = needed_action(self)

        async def guarded(request: Request) -> Response:
            if action == ANY_KEY:
                if ACCESS not in request.scope:  # fail closed, as `refusal` does
                    raise Unauthorized("an API key is required: send `Authorization: Bearer <key>`")
            else:
                authorize(request.scope, action, request.path_params.get("name", EVERY_QUEUE))
            return await handler(request)

        return guarded
