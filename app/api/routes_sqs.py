"""The SQS endpoint, `POST /`: a row of the operation table (operationId `sqs`) whose one match
dispatches every SQS request. The permission is decided on that same dispatch: the request's SQS
action names a REST operation (app/sqs/actions.py) and needs that operation's scope, checked by
the same `refusal` as every route, on the queue the request names.

In order: the signature is verified (SigV4, app/sqs/signature.py) with the secret of the key id it
names (KeyVerifier.credentials, cached like bearer keys); the request is decoded (either SQS
protocol); the action's scope is checked; the action runs. Every failure is answered as SQS
answers it, in the protocol the request came in. With access control off (PQS_AUTH_ENABLED=false,
loopback only) signatures are not checked, as bearer keys are not.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from fastapi import Request, Response
from starlette.types import Scope

from app.access import ANY_ACTION, Action, Need
from app.api.auth import ACCESS, authorize, knows, refusal
from app.api.departure import watched
from app.api.errors import Header
from app.api.request_id import EXCHANGE, Exchange, make
from app.errors import PqsError
from app.service.recipient import Recipient
from app.sqs import errors
from app.sqs.actions import SQS_ACTIONS
from app.sqs.context import Context, Place, to_sqs
from app.sqs.errors import SqsError
from app.sqs.move_actions import queue_of_arn, queue_of_handle
from app.sqs.protocol import WireResponse, decode_request, encode_error, encode_result, protocol_of
from app.sqs.signature import HeaderMap, SignatureError, check_signature, header_map, parse_signed_request

log = logging.getLogger(__name__)
_INTERNAL = "The request processing has failed because of an unknown error, exception or failure."
# The client of a receive, watched for the block's duration (it leaves when the client does).
Watch = Callable[[], AbstractAsyncContextManager[Recipient | None]]


def queue_named(place: Place, request: Any) -> str | None:
    """The queue a request names (by URL, by name, or a move task's dead-letter queue by ARN or
    task handle); None for one that names every queue."""
    url = getattr(request, "QueueUrl", None)
    if isinstance(url, str):
        return place.name_of_url(url)
    arn = getattr(request, "SourceArn", None)
    if isinstance(arn, str):
        return queue_of_arn(place, arn)
    handle = getattr(request, "TaskHandle", None)
    if isinstance(handle, str):
        return queue_of_handle(place, handle)
    name = getattr(request, "QueueName", None)
    return name if isinstance(name, str) else None


async def _verify(state: Any, scope: Scope, headers: HeaderMap, body: bytes) -> None:
    """Authenticate the request's signature and put the key's Access in the scope."""
    signed = parse_signed_request(
        method=scope["method"],
        raw_path=scope.get("raw_path") or scope["path"].encode(),
        raw_query=scope.get("query_string", b""),
        headers=headers,
        body=body,
        now=datetime.now(UTC),
        region=state.settings.sqs_region,
    )
    found = await state.keys.credentials(signed.key_id)
    check_signature(signed, found[1] if found else None)
    assert found is not None  # check_signature refuses a key without a secret
    scope[ACCESS] = found[0]


async def _answer(
    state: Any,
    scope: Scope,
    headers: HeaderMap,
    body: bytes,
    scopes: Mapping[str, Need],
    request_id: str,
    recipient: Watch,
) -> WireResponse:
    settings = state.settings
    if settings.auth_enabled:
        await _verify(state, scope, headers, body)
    decoded = decode_request(headers, scope.get("query_string", b""), body)
    action = SQS_ACTIONS.get(decoded.action.name)
    if action is None:
        raise SqsError(errors.UNSUPPORTED_OPERATION, f"PQS does not serve {decoded.action.name} yet.")
    exchange: Exchange | None = scope.get(EXCHANGE)
    if exchange is not None:  # for the access log: the action served, then the queue it names
        exchange.sqs_action = decoded.action.name
    place = Place(settings.sqs_account_id, settings.sqs_region, partial(_base_url, settings.sqs_base_url, scope))
    queue = queue_named(place, decoded.input)
    if exchange is not None:
        exchange.queue = queue
    needed = scopes[decoded.action.name]
    refused = refusal(scope, needed, queue)
    if refused is not None and needed == ANY_ACTION:
        # The key may do nothing on the queue: it is told nothing about it either.
        raise SqsError(errors.QUEUE_DOES_NOT_EXIST, "The specified queue does not exist.")
    if refused is not None:
        raise SqsError(errors.ACCESS_DENIED, f"Access to the resource is denied: {refused.message}.")

    def also(needed: Action, name: str) -> None:
        authorize(scope, needed, name)

    sender = scope[ACCESS].key_id if settings.auth_enabled else None

    ctx = Context(
        queues=state.queues,
        messages=state.messages,
        moves=state.moves,
        place=place,
        authorize=also,
        knows=partial(knows, scope),
        sender_id=sender,
    )
    if decoded.action.name == "ReceiveMessage":
        async with recipient() as watching:  # a long poll sees its client leave
            result = await action.handler(replace(ctx, recipient=watching), decoded.input)
    else:
        result = await action.handler(ctx, decoded.input)
    return encode_result(decoded.protocol, decoded.action, result, request_id)


def _base_url(configured: str | None, scope: Scope) -> str:
    # Only the actions that answer queue URLs ask for it: the hot ones never pay for it.
    return configured or str(Request(scope).base_url)


async def answer_sqs(
    state: Any, scope: Scope, body: bytes, scopes: Mapping[str, Need], recipient: Watch
) -> WireResponse:
    """The answer to one SQS request (`body` read whole), in the protocol it came in; every
    failure answered as SQS answers it, a bug as InternalFailure (500). The one answer of both
    ways of serving `POST /`: the FastAPI route below and the hot lane (app/api/lane.py).
    `state` is the application's state; `scopes` the scope each SQS action needs (derived from
    the operation table, app/api/operations.py); `recipient` watches the client of a receive.
    The answer's RequestId is the request's id: its valid X-Request-Id, if it sent one."""
    # The request's own id (app/api/request_id.py): the one echoed in X-Request-Id and logged.
    exchange: Exchange | None = scope.get(EXCHANGE)
    request_id = exchange.request_id if exchange is not None else make()
    # The headers by name, made once: the signature check and the decoder both read them.
    headers = header_map(scope["headers"])
    protocol = protocol_of(headers)
    try:
        return await _answer(state, scope, headers, body, scopes, request_id, recipient)
    except SignatureError as exc:
        return encode_error(protocol, SqsError.from_signature(exc), request_id)
    except SqsError as exc:
        return encode_error(protocol, exc, request_id)
    except PqsError as exc:
        return encode_error(protocol, to_sqs(exc), request_id)
    except Exception:
        # A bug (also one in rendering an error): still a 500, but answered as SQS answers
        # one, in the request's protocol, so an SDK reports (and may retry) it as the
        # InternalFailure it is.
        log.exception("SQS request %s failed", request_id)
        return encode_error(protocol, SqsError(errors.INTERNAL_FAILURE, _INTERNAL), request_id)


def sqs_head(wire: WireResponse) -> list[Header]:
    """The answer's headers as both ways of serving write them (as a Starlette Response given
    them has them: lower-case names, then the content length)."""
    return [
        *((name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in wire.headers),
        (b"content-length", b"%d" % len(wire.body)),
    ]


def sqs_endpoint(scopes: Mapping[str, Need]) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint of `POST /`, with the scope each SQS action needs (derived from the operation
    table by app/api/operations.py)."""

    async def sqs(request: Request) -> Response:
        """The SQS wire protocol (AWS JSON 1.0 and query), authenticated by SigV4."""
        body = await request.body()  # ClientDisconnect: no one is left to answer
        wire = await answer_sqs(request.app.state, request.scope, body, scopes, partial(watched, request.receive))
        response = Response(wire.body, wire.status)
        response.raw_headers = sqs_head(wire)
        return response

    return sqs
