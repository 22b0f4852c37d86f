"""The operations of the API, declared once: the table `OPERATIONS` below.

A row says, per operation: its operationId (the name the OpenAPI document and generated SDKs give
it, and the name an SQS front maps its actions onto), method, path, the action access control
requires (app/access.py; None for the open health routes), handler, success status and summary.
Its description is the handler's docstring; its request model is the body its handler takes.
`raises` names the domain errors it answers beyond those its shape implies (the error statuses
of the OpenAPI document are derived from both: app/api/document.py).

Everything else is derived from the table, never written a second time:
- the FastAPI routes (`ROUTERS`, one router per tag): each /v1 operation is a GuardedRoute
  declaring its action (`needs`), so it authorizes on the match that dispatches it; `metrics`,
  outside /v1, declares its action on a plain route, and its handler applies it (its own rule);
- the hot dispatch (app/api/hot.py): the operations made with `hot(...)` are also served by the
  hot lane without FastAPI, matched by a pattern compiled from their methods and paths;
- `BY_ID`, the operations by operationId;
- the scope of each SQS action (`SQS_SCOPES`): each action names the REST operation it is
  (app/sqs/actions.py), and needs that operation's action (any action, for one marked
  `any_scope`). The SQS endpoint itself is the rows `sqs` (`POST /`) and `sqs_query` (`GET /`),
  left out of the OpenAPI document: their requests are SQS's, not this API's. So is `metrics`
  (`GET /metrics`, Prometheus' text format; app/api/metrics.py);
- the label of a request in the request metrics: the operationId of the row it matched.

A hot operation's handler takes the parsed request and answers with the JSON bytes of its answer
(`HotHandler`); its FastAPI route is made from it (`_hot_endpoint`), so that both ways of serving
it call the one handler, with the one request model, and answer the one success status.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, get_args, get_type_hints

from fastapi import APIRouter, Request, Response, status

from app.access import ANY_ACTION, ANY_KEY, Action, Need, Requirement
from app.api.auth import GuardedRoute, needs, under_v1
from app.api.departure import watched
from app.api.deps import MessagesDep, QueueName
from app.api.json_body import JsonBodyRoute
from app.api.metrics import metrics
from app.api.routes_activity import get_groups, get_throughput
from app.api.routes_health import healthz, readyz
from app.api.routes_keys import create_key, key_self, list_keys, revoke_key
from app.api.routes_messages import (
    delete_message,
    handle_ack,
    handle_nack,
    handle_receive,
    handle_send,
    handle_send_batch,
    handle_visibility,
    release_messages,
)
from app.api.routes_queues import (
    create_queue,
    delete_queue,
    get_queue,
    list_history,
    list_queues,
    peek_messages,
    purge_queue,
    redrive_queue,
    update_queue,
)
from app.api.routes_sqs import sqs_endpoint
from app.api.routes_ui import ui_file, ui_page
from app.api.schemas import (
    BatchResponse,
    Model,
    QueueOut,
    ReceiveResponse,
    SendBatchResponse,
    SendResponse,
)
from app.errors import (
    GrantBeyondKey,
    InvalidInput,
    KeyNotFound,
    KeyRevokesItself,
    PqsError,
    QueueAttributesConflict,
    QueueInUse,
    Unavailable,
)
from app.service.messages import MessageService
from app.service.recipient import Recipient
from app.sqs.actions import SQS_ACTIONS

R = TypeVar("R", bound=Model)
# A hot operation's handler: (messages, queue name, parsed request, the request's client) -> the
# answer's JSON bytes. It raises a domain error (app/errors.py) to answer one.
HotHandler = Callable[[MessageService, str, R, Recipient | None], Awaitable[bytes]]


@dataclass(frozen=True)
class Operation:
    """One operation of the API (see the module docstring)."""

    operation_id: str
    method: str
    path: str
    action: Requirement | None
    handler: Callable[..., Awaitable[Any]]
    summary: str
    tag: str
    status: int = status.HTTP_200_OK
    request: type[Model] | None = None
    # Documents the answer of a handler that answers bytes (the others' return type does).
    response: type[Model] | None = None
    # Served by the hot lane too (`hot`); `long_poll`: its handler watches its client leave.
    hot: bool = False
    long_poll: bool = False
    responses: dict[int | str, dict[str, Any]] = field(default_factory=dict)
    in_schema: bool = True
    raises: tuple[type[PqsError], ...] = ()

    @property
    def description(self) -> str:
        """The handler's docstring, as FastAPI would take it."""
        return inspect.cleandoc(self.handler.__doc__ or "")


def route(
    operation_id: str,
    method: str,
    path: str,
    action: Requirement | None,
    handler: Callable[..., Awaitable[Any]],
    summary: str,
    tag: str,
    *,
    status_code: int = status.HTTP_200_OK,
    responses: dict[int | str, dict[str, Any]] | None = None,
    raises: tuple[type[PqsError], ...] = (),
) -> Operation:
    """An operation FastAPI serves alone; `handler` is its FastAPI endpoint."""
    return Operation(
        operation_id,
        method,
        path,
        action,
        handler,
        summary,
        tag,
        status_code,
        _body_model(handler),
        responses=responses or {},
        raises=raises,
    )


def hot(
    operation_id: str,
    method: str,
    path: str,
    action: Action,
    handler: HotHandler[R],
    summary: str,
    tag: str,
    *,
    response: type[Model],
    status_code: int = status.HTTP_200_OK,
    long_poll: bool = False,
) -> Operation:
    """A hot operation: its JSON body is parsed into the model `handler` takes, and `handler`
    answers bytes (documented by `response`); the hot lane serves it too."""
    operation = route(operation_id, method, path, action, handler, summary, tag, status_code=status_code)
    return replace(operation, response=response, hot=True, long_poll=long_poll)


def _body_model(handler: Callable[..., Awaitable[Any]]) -> type[Model] | None:
    """The model of the request body a handler takes (its parameter of a Model type, or of an
    optional one), if any."""
    hints = get_type_hints(handler)
    hints.pop("return", None)
    for hint in hints.values():
        for kind in (hint, *get_args(hint)):
            if isinstance(kind, type) and issubclass(kind, Model):
                return kind
    return None


QUEUE = "/v1/queues/{name}"
MESSAGES = "/v1/queues/{name}/messages"
CREATED = status.HTTP_201_CREATED
NO_CONTENT = status.HTTP_204_NO_CONTENT
SAME_QUEUE: dict[int | str, dict[str, Any]] = {
    200: {"model": QueueOut, "description": "The queue exists with the same attributes."}
}

# One operation a line or two, laid out as a table (the formatter would stack every argument).
# fmt: off
REST: tuple[Operation, ...] = (
    route("healthz", "GET", "/healthz", None, healthz, "Process is alive", "health"),
    route("readyz", "GET", "/readyz", None, readyz, "Database is reachable", "health", raises=(Unavailable,)),

    route("create_queue", "PUT", QUEUE, "admin", create_queue, "Create a queue (idempotent)", "queues",
          status_code=CREATED, responses=SAME_QUEUE, raises=(QueueAttributesConflict,)),
    # Looking without changing is `read` (admin implies it): stats, listing (on `*`), peek.
    route("list_queues", "GET", "/v1/queues", "read", list_queues, "List queues", "queues"),
    route("get_queue", "GET", QUEUE, "read", get_queue, "Get a queue with its message counts", "queues"),
    route("update_queue", "PATCH", QUEUE, "admin", update_queue, "Change queue attributes", "queues"),
    route("delete_queue", "DELETE", QUEUE, "admin", delete_queue, "Delete a queue", "queues",
          status_code=NO_CONTENT, raises=(QueueInUse,)),
    route("purge_queue", "POST", f"{QUEUE}/purge", "admin", purge_queue, "Remove every message of a queue",
          "queues"),
    route("redrive_queue", "POST", f"{QUEUE}/redrive", "admin", redrive_queue,
          "Move dead letters back to their source queues", "queues"),
    route("get_queue_throughput", "GET", f"{QUEUE}/throughput", "read", get_throughput,
          "A queue's messages sent, acked and dead-lettered per minute", "queues"),
    route("get_queue_groups", "GET", f"{QUEUE}/groups", "read", get_groups,
          "A FIFO queue's largest, oldest and in-flight groups", "queues"),
    route("list_history", "GET", f"{QUEUE}/history", "read", list_history,
          "List a queue's finished messages, newest first", "queues"),
    route("peek_messages", "GET", MESSAGES, "read", peek_messages, "Look at messages without receiving them",
          "messages"),

    hot("send_message", "POST", MESSAGES, "send", handle_send, "Send a message", "messages",
        response=SendResponse, status_code=CREATED),
    hot("send_message_batch", "POST", f"{MESSAGES}/batch", "send", handle_send_batch, "Send up to 1,000 messages",
        "messages", response=SendBatchResponse),
    hot("receive_messages", "POST", f"{MESSAGES}/receive", "receive", handle_receive, "Receive messages (long poll)",
        "messages", response=ReceiveResponse, long_poll=True),
    hot("ack_messages", "POST", f"{MESSAGES}/ack", "ack", handle_ack, "Ack (delete) received messages", "messages",
        response=BatchResponse),
    hot("nack_messages", "POST", f"{MESSAGES}/nack", "ack", handle_nack, "Return received messages for another try",
        "messages", response=BatchResponse),
    hot("change_visibility", "POST", f"{MESSAGES}/visibility", "ack", handle_visibility,
        "Change the visibility timeout of received messages", "messages", response=BatchResponse),
    route("release_messages", "POST", f"{MESSAGES}/release", "ack", release_messages,
          "Return every message a consumer holds", "messages"),
    route("delete_message", "DELETE", f"{MESSAGES}/{{receipt_handle}}", "ack", delete_message,
          "Ack one message by its receipt handle", "messages", status_code=NO_CONTENT),

    route("get_key_self", "GET", "/v1/keys/self", ANY_KEY, key_self, "The calling API key and its grants", "keys"),
    # No queue in these paths: "admin" here is admin on every queue (`*`), a key that administers all.
    route("list_keys", "GET", "/v1/keys", "admin", list_keys, "List API keys", "keys"),
    route("create_key", "POST", "/v1/keys", "admin", create_key, "Create an API key (shown once)", "keys",
          status_code=CREATED, raises=(GrantBeyondKey, InvalidInput, Unavailable)),
    route("revoke_key", "DELETE", "/v1/keys/{key_id}", "admin", revoke_key, "Revoke an API key", "keys",
          raises=(KeyNotFound, KeyRevokesItself)),
)
# fmt: on


def sqs_scopes(operations: Iterable[Operation]) -> dict[str, Need]:
    """What each SQS action needs: the action (scope) of the REST operation it names, or
    ANY_ACTION for an action marked `any_scope`."""
    by_id = {operation.operation_id: operation for operation in operations}
    scopes: dict[str, Need] = {}
    for name, sqs_action in SQS_ACTIONS.items():
        action = by_id[sqs_action.operation_id].action
        if action is None or action == ANY_KEY:
            raise ValueError(f"{name}: maps to {sqs_action.operation_id}, an operation without an action")
        scopes[name] = ANY_ACTION if sqs_action.any_scope else action
    return scopes


SQS_SCOPES = sqs_scopes(REST)
# Prometheus' scrape: outside /v1, so it applies its action itself (app/api/metrics.py: a key
# needs `read` on every queue, the metrics naming every queue; the metrics networks need none);
# its answer not JSON; left out of the OpenAPI document (docs/operations.md documents it), as the
# SQS endpoint is.
METRICS = replace(route("metrics", "GET", "/metrics", "read", metrics, "Prometheus metrics", "health"), in_schema=False)
# POST / carries both protocols; GET / the query protocol in the query string (a presigned URL).
SQS = tuple(
    replace(route(operation_id, method, "/", None, sqs_endpoint(SQS_SCOPES), "SQS wire protocol", "sqs"),
            in_schema=False)
    for operation_id, method in (("sqs", "POST"), ("sqs_query", "GET"))
)  # fmt: skip
# The dashboard's static files (app/api/routes_ui.py): outside /v1, no key; not API.
UI = tuple(
    replace(route(operation_id, "GET", path, None, handler, summary, "ui"), in_schema=False)
    for operation_id, path, handler, summary in (
        ("ui", "/ui", ui_page, "Dashboard"),
        ("ui_file", "/ui/{file}", ui_file, "Dashboard file"),
    )
)
OPERATIONS: tuple[Operation, ...] = (*REST, METRICS, *SQS, *UI)
BY_ID = {operation.operation_id: operation for operation in OPERATIONS}


def _json(body: bytes, status_code: int) -> Response:
    return Response(content=body, status_code=status_code, media_type="application/json")


def _hot_endpoint(operation: Operation) -> Callable[..., Awaitable[Response]]:
    """The FastAPI endpoint of a hot operation: FastAPI parses and validates the body with the
    operation's model; the endpoint calls its handler and answers its bytes."""
    handle, success = operation.handler, operation.status

    async def endpoint(name: str, request: Any, messages: MessageService, http: Request) -> Response:
        if operation.long_poll:
            async with watched(http.receive) as recipient:  # it sees its client leave
                return _json(await handle(messages, name, request, recipient), success)
        return _json(await handle(messages, name, request, None), success)

    parameter = inspect.Parameter.POSITIONAL_OR_KEYWORD
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # what FastAPI reads
        [
            inspect.Parameter("name", parameter, annotation=QueueName),
            inspect.Parameter("request", parameter, annotation=operation.request),
            inspect.Parameter("messages", parameter, annotation=MessagesDep),
            inspect.Parameter("http", parameter, annotation=Request),
        ]
    )
    endpoint.__name__ = endpoint.__qualname__ = operation.operation_id
    return endpoint


# FastAPI's default for `response_model`: the endpoint's return type, unless it answers a Response.
_INFERRED: Any = inspect.signature(APIRouter.add_api_route).parameters["response_model"].default


def _add(router: APIRouter, operation: Operation) -> None:
    """Add the operation's route to `router`: a GuardedRoute when it is under /v1; outside /v1, an
    operation's action is declared on its route all the same, for its handler to apply."""
    guarded = under_v1(operation.path)
    if guarded and operation.action is None:
        raise ValueError(f"{operation.operation_id}: a /v1 operation declares its action")
    router.add_api_route(
        operation.path,
        _hot_endpoint(operation) if operation.hot else operation.handler,
        methods=[operation.method],
        operation_id=operation.operation_id,
        name=operation.operation_id,
        summary=operation.summary,
        description=operation.description,
        status_code=operation.status,
        response_model=operation.response if operation.hot else _INFERRED,
        responses=operation.responses or None,
        openapi_extra=needs(operation.action) if operation.action else None,
        route_class_override=GuardedRoute if guarded else JsonBodyRoute,
        include_in_schema=operation.in_schema,
    )


def routers(operations: Iterable[Operation] = OPERATIONS) -> tuple[APIRouter, ...]:
    """One router per tag (in the table's order), with the routes of its operations."""
    by_tag: dict[str, APIRouter] = {}
    for operation in operations:
        router = by_tag.get(operation.tag)
        if router is None:
            router = by_tag[operation.tag] = APIRouter(tags=[operation.tag])
        _add(router, operation)
    return tuple(by_tag.values())


ROUTERS = routers()
