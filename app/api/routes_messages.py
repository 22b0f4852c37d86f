"""Message routes: send, batch send, receive, ack, nack, visibility, delete by receipt.

The six POST routes are written once, as `handle_*` functions of a parsed request that return the
JSON bytes of the answer. The FastAPI routes below call them (and document the API); so does the
fast path (`app.api.fastpath`), which serves these routes without FastAPI's per-request machinery.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Path, Request, Response, status
from fastapi.routing import APIRoute
from pydantic_core import to_json

from app.access import Action
from app.api.auth import GuardedRoute, needed_action, needs
from app.api.departure import watched
from app.api.deps import MessagesDep, QueueName
from app.api.schemas import (
    AckRequest,
    BatchResponse,
    CountOut,
    Model,
    NackRequest,
    ReceiveRequest,
    ReceiveResponse,
    ReleaseRequest,
    SendBatchRequest,
    SendBatchResponse,
    SendRequest,
    SendResponse,
    VisibilityRequest,
)
from app.domain import EntryFailure, ReceivedMessage, SendResult
from app.errors import InvalidInput, MessageTooLarge, PqsError, ReceiptNotFound
from app.service.messages import BatchOutcome, MessageService, ReceiptEntry
from app.service.recipient import Recipient
from app.service.validation import check_queue_name

router = APIRouter(prefix="/v1/queues/{name}/messages", tags=["messages"], route_class=GuardedRoute)


def _unique_ids(ids: Sequence[str]) -> None:
    if len(set(ids)) != len(ids):
        raise InvalidInput("entry ids must be unique within a batch")


# Answers are plain dicts and lists encoded by pydantic-core's serializer (`to_json`), keys in the
# order of the response model's fields: the same bytes as `Model(...).model_dump_json()` (a test
# holds them equal) for a tenth of the CPU. The values come from the service, not the client, so
# there is nothing to validate; the response models still document the answers (OpenAPI).


def _failure(entry_id: str, failure: EntryFailure) -> dict[str, str]:
    return {"id": entry_id, "code": failure.code, "message": failure.message}


def batch_answer(outcome: BatchOutcome) -> bytes:
    """BatchResponse of an ack, nack or visibility batch."""
    ok = [{"id": i} for i, failure in outcome.items() if failure is None]
    failed = [_failure(i, failure) for i, failure in outcome.items() if failure is not None]
    return to_json({"successful": ok, "failed": failed})


def _sent(result: SendResult) -> dict[str, Any]:
    return {"message_id": result.message_id, "sequence_number": result.sequence_number, "duplicate": result.duplicate}


def send_answer(result: SendResult) -> bytes:
    """SendResponse of one send."""
    return to_json(_sent(result))


def send_batch_answer(ids: Sequence[str], results: Sequence[SendResult | EntryFailure]) -> bytes:
    """SendBatchResponse: per entry id its result (SendBatchResult) or its failure."""
    ok: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    for entry_id, result in zip(ids, results, strict=True):
        if isinstance(result, EntryFailure):
            failed.append(_failure(entry_id, result))
        else:
            answer = _sent(result)
            answer["id"] = entry_id
            ok.append(answer)
    return to_json({"successful": ok, "failed": failed})


def receive_answer(messages: Sequence[ReceivedMessage]) -> bytes:
    """ReceiveResponse of a receive."""
    return to_json(
        {
            "messages": [
                {
                    "message_id": m.message_id,
                    "receipt_handle": m.receipt_handle,
                    "body": m.body,
                    "group_id": m.group_id,
                    "dedup_id": m.dedup_id,
                    "sequence_number": m.sequence_number,
                    "receive_count": m.receive_count,
                    "sent_at": m.sent_at,
                    "first_received_at": m.first_received_at,
                    "attributes": m.attributes,
                }
                for m in messages
            ]
        }
    )


async def handle_send(messages: MessageService, name: str, message: SendRequest) -> bytes:
    check_queue_name(name)
    [result] = await messages.send(name, [message])
    if isinstance(result, EntryFailure):
        error_class = MessageTooLarge if result.code == MessageTooLarge.code else InvalidInput
        error = error_class(result.message)
        error.code = result.code
        raise error
    return send_answer(result)


async def handle_send_batch(messages: MessageService, name: str, batch: SendBatchRequest) -> bytes:
    check_queue_name(name)
    _unique_ids([e.id for e in batch.entries])
    results = await messages.send(name, batch.entries)
    return send_batch_answer([e.id for e in batch.entries], results)


async def handle_receive(
    messages: MessageService, name: str, request: ReceiveRequest, recipient: Recipient | None = None
) -> bytes:
    """A receive for `recipient`, the request's client (app/service/recipient.py)."""
    check_queue_name(name)
    got = await messages.receive(
        name,
        max_messages=request.max_messages,
        wait_seconds=request.wait_seconds,
        visibility_timeout=request.visibility_timeout,
        attempt_id=request.attempt_id,
        consumer_id=request.consumer_id,
        recipient=recipient,
    )
    return receive_answer(got)


async def handle_ack(messages: MessageService, name: str, batch: AckRequest) -> bytes:
    check_queue_name(name)
    _unique_ids([e.id for e in batch.entries])
    entries = [ReceiptEntry(id=e.id, receipt_handle=e.receipt_handle, result=e.result) for e in batch.entries]
    return batch_answer(await messages.ack(name, entries))


async def handle_nack(messages: MessageService, name: str, batch: NackRequest) -> bytes:
    check_queue_name(name)
    _unique_ids([e.id for e in batch.entries])
    entries = [
        ReceiptEntry(id=e.id, receipt_handle=e.receipt_handle, delay_seconds=e.delay_seconds, error=e.error)
        for e in batch.entries
    ]
    return batch_answer(await messages.nack(name, entries))


async def handle_visibility(messages: MessageService, name: str, batch: VisibilityRequest) -> bytes:
    check_queue_name(name)
    _unique_ids([e.id for e in batch.entries])
    entries = [
        ReceiptEntry(id=e.id, receipt_handle=e.receipt_handle, visibility_timeout=e.visibility_timeout)
        for e in batch.entries
    ]
    return batch_answer(await messages.change_visibility(name, entries))


def _json(body: bytes, status_code: int = 200) -> Response:
    return Response(content=body, status_code=status_code, media_type="application/json")


@router.post(
    "",
    openapi_extra=needs("send"),
    summary="Send a message",
    response_model=SendResponse,
    status_code=status.HTTP_201_CREATED,
)
async def send_message(name: QueueName, message: SendRequest, messages: MessagesDep) -> Response:
    """Answered after the commit. A duplicate (same dedup id inside the window) returns the
    original message id with `duplicate: true` and enqueues nothing."""
    return _json(await handle_send(messages, name, message), status.HTTP_201_CREATED)


@router.post(
    "/batch", openapi_extra=needs("send"), summary="Send up to 1,000 messages", response_model=SendBatchResponse
)
async def send_batch(name: QueueName, batch: SendBatchRequest, messages: MessagesDep) -> Response:
    """One transaction; a bad entry is reported in `failed` and does not fail the others."""
    return _json(await handle_send_batch(messages, name, batch))


@router.post(
    "/receive", openapi_extra=needs("receive"), summary="Receive messages (long poll)", response_model=ReceiveResponse
)
async def receive(name: QueueName, request: ReceiveRequest, messages: MessagesDep, http: Request) -> Response:
    """Up to `max_messages`; waits up to `wait_seconds` for the first. On FIFO queues a group's
    messages come in order and no group has two receives in flight."""
    async with watched(http.receive) as recipient:  # the receive sees its client leave
        return _json(await handle_receive(messages, name, request, recipient))


@router.post("/ack", openapi_extra=needs("ack"), summary="Ack (delete) received messages", response_model=BatchResponse)
async def ack(name: QueueName, batch: AckRequest, messages: MessagesDep) -> Response:
    """Each acked message moves to history with its result; a stale handle fails its entry."""
    return _json(await handle_ack(messages, name, batch))


@router.post(
    "/nack",
    openapi_extra=needs("ack"),
    summary="Return received messages for another try",
    response_model=BatchResponse,
)
async def nack(name: QueueName, batch: NackRequest, messages: MessagesDep) -> Response:
    """Visible again now or after `delay_seconds`; the error is recorded."""
    return _json(await handle_nack(messages, name, batch))


@router.post(
    "/visibility",
    openapi_extra=needs("ack"),
    summary="Change the visibility timeout of received messages",
    response_model=BatchResponse,
)
async def visibility(name: QueueName, batch: VisibilityRequest, messages: MessagesDep) -> Response:
    """Extend (heartbeat) or shorten the time a received message stays hidden."""
    return _json(await handle_visibility(messages, name, batch))


@router.post(
    "/release", openapi_extra=needs("ack"), summary="Return every message a consumer holds", response_model=CountOut
)
async def release(name: QueueName, request: ReleaseRequest, messages: MessagesDep) -> CountOut:
    """For a consumer that restarts or gives up: every message it received with this
    `consumer_id` and still holds becomes receivable at once (as a nack without delay; the
    history records it as released). `count` says how many."""
    check_queue_name(name)
    return CountOut(count=await messages.release(name, request.consumer_id))


@router.delete(
    "/{receipt_handle}",
    openapi_extra=needs("ack"),
    summary="Ack one message by its receipt handle",
    status_code=status.HTTP_204_NO_CONTENT,
)
async def delete_message(
    name: QueueName,
    messages: MessagesDep,
    receipt_handle: str = Path(max_length=256, description="Receipt handle from receive."),
) -> Response:
    """204 when acked; 404 when no in-flight message holds the handle."""
    check_queue_name(name)
    outcome = await messages.ack(name, [ReceiptEntry(id="0", receipt_handle=receipt_handle)])
    failure = outcome["0"]
    if failure is not None:
        error: PqsError = (
            ReceiptNotFound(failure.message) if failure.code == ReceiptNotFound.code else InvalidInput(failure.message)
        )
        error.code = failure.code
        raise error
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@dataclass(frozen=True)
class HotRoute:
    """A POST route under /v1/queues/{name}/messages that the fast path serves: the action and
    success status its FastAPI route declares (the fast path authorizes on its own match), the
    request model, and the handler both ways call."""

    action: Action
    request: type[Model]
    handle: Callable[[MessageService, str, Any], Awaitable[bytes]]
    status: int


def _hot(suffix: str, request: type[Model], handle: Callable[[MessageService, str, Any], Awaitable[bytes]]) -> HotRoute:
    path = f"{router.prefix}{suffix}"
    [route] = [r for r in router.routes if isinstance(r, APIRoute) and r.path == path and r.methods == {"POST"}]
    return HotRoute(needed_action(route), request, handle, route.status_code or status.HTTP_200_OK)


# Keyed by the path after `/messages`; read off the routes above.
HOT_ROUTES: dict[str, HotRoute] = {
    "": _hot("", SendRequest, handle_send),
    "/batch": _hot("/batch", SendBatchRequest, handle_send_batch),
    "/receive": _hot("/receive", ReceiveRequest, handle_receive),
    "/ack": _hot("/ack", AckRequest, handle_ack),
    "/nack": _hot("/nack", NackRequest, handle_nack),
    "/visibility": _hot("/visibility", VisibilityRequest, handle_visibility),
}
