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
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from fastapi import Request, Response
from starlette.requests import ClientDisconnect

from app.access import ANY_ACTION, Action, Need
from app.api.auth import ACCESS, authorize, refusal
from app.api.departure import watched
from app.errors import PqsError
from app.sqs import errors
from app.sqs.actions import SQS_ACTIONS
from app.sqs.context import Context, Place, to_sqs
from app.sqs.errors import SqsError
from app.sqs.move_actions import queue_of_arn, queue_of_handle
from app.sqs.protocol import Protocol, WireResponse, decode_request, encode_error, encode_result, protocol_of
from app.sqs.signature import SignatureError, check_signature, parse_signed_request

log = logging.getLogger(__name__)
_INTERNAL = "The request processing has failed because of an unknown error, exception or failure."


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


async def _verify(request: Request, body: bytes, region: str) -> None:
    """Authenticate the request's signature and put the key's Access in the scope."""
    scope = request.scope
    signed = parse_signed_request(
        method=request.method,
        raw_path=scope.get("raw_path") or scope["path"].encode(),
        raw_query=scope.get("query_string", b""),
        headers=scope["headers"],
        body=body,
        now=datetime.now(UTC),
        region=region,
    )
    found = await request.app.state.keys.credentials(signed.key_id)
    check_signature(signed, found[1] if found else None)
    assert found is not None  # check_signature refuses a key without a secret
    scope[ACCESS] = found[0]


async def _answer(request: Request, scopes: Mapping[str, Need], request_id: str) -> WireResponse:
    state = request.app.state
    settings = state.settings
    scope = request.scope
    body = await request.body()
    if settings.auth_enabled:
        await _verify(request, body, settings.sqs_region)
    decoded = decode_request(scope["headers"], scope.get("query_string", b""), body)
    action = SQS_ACTIONS.get(decoded.action.name)
    if action is None:
        raise SqsError(errors.UNSUPPORTED_OPERATION, f"PQS does not serve {decoded.action.name} yet.")
    base = settings.sqs_base_url or str(request.base_url)
    place = Place(base.rstrip("/"), settings.sqs_account_id, settings.sqs_region)
    queue = queue_named(place, decoded.input)
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
        queues=state.queues, messages=state.messages, moves=state.moves, place=place, authorize=also, sender_id=sender
    )
    if decoded.action.name == "ReceiveMessage":
        async with watched(request.receive) as recipient:  # a long poll sees its client leave
            result = await action.handler(replace(ctx, recipient=recipient), decoded.input)
    else:
        result = await action.handler(ctx, decoded.input)
    return encode_result(decoded.protocol, decoded.action, result, request_id)


async def _answered(request: Request, scopes: Mapping[str, Need], request_id: str, protocol: Protocol) -> WireResponse:
    """The answer to a request, or to the SQS error it ran into."""
    try:
        return await _answer(request, scopes, request_id)
    except SignatureError as exc:
        return encode_error(protocol, SqsError.from_signature(exc), request_id)
    except SqsError as exc:
        return encode_error(protocol, exc, request_id)
    except PqsError as exc:
        return encode_error(protocol, to_sqs(exc), request_id)


def sqs_endpoint(scopes: Mapping[str, Need]) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint of `POST /`, with the scope each SQS action needs (derived from the operation
    table by app/api/operations.py)."""

    async def sqs(request: Request) -> Response:
        """The SQS wire protocol (AWS JSON 1.0 and query), authenticated by SigV4."""
        request_id = str(uuid.uuid4())
        protocol = protocol_of(request.scope["headers"])
        try:
            wire = await _answered(request, scopes, request_id, protocol)
        except ClientDisconnect:
            raise  # no one is left to answer
        except Exception:
            # A bug (also one in rendering an error): still a 500, but answered as SQS answers
            # one, in the request's protocol, so an SDK reports (and may retry) it as the
            # InternalFailure it is.
            log.exception("SQS request %s failed", request_id)
            wire = encode_error(protocol, SqsError(errors.INTERNAL_FAILURE, _INTERNAL), request_id)
        return Response(content=wire.body, status_code=wire.status, headers=dict(wire.headers))

    return sqs
