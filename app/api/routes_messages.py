"""Message operations' handlers: send, batch send, receive, ack, nack, visibility, release, delete
by receipt. Their routes are rows of the operation table (app/api/operations.py).

The six hot operations are written once, as `handle_*` functions of a parsed request that return
the JSON bytes of the answer: FastAPI's route and the hot lane both call them. Each takes the
request's client (`recipient`), which a receive watches (app/service/recipient.py) and the others
do not need. A handler's docstring is its operation's description in the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import Path, Response, status
from pydantic_core import to_json

from app.api.deps import MessagesDep, QueueName
from app.api.schemas import (
    AckRequest,
    CountOut,
    NackRequest,
    ReceiptFields,
    ReceiveRequest,
    ReleaseRequest,
    SendBatchRequest,
    SendRequest,
    VisibilityRequest,
)
from app.domain import EntryFailure, ReceivedMessage, SendResult
from app.errors import InvalidInput, MessageTooLarge, PqsError, ReceiptNotFound
from app.service.messages import BatchOutcome, MessageService, ReceiptEntry
from app.service.recipient import Recipient
from app.service.validation import check_queue_name


def _unique_ids(ids: Sequence[str]) -> None:
    if len(set(ids)) != len(ids):
        raise InvalidInput("entry ids must be unique within a batch")


def _receipt_entries(entries: Sequence[ReceiptFields]) -> list[ReceiptEntry]:
    """An ack, nack or visibility batch's entries as the service takes them (the wire entries'
    fields are named as ReceiptEntry's); their ids must be unique within the batch."""
    _unique_ids([e.id for e in entries])
    return [ReceiptEntry(**dict(e)) for e in entries]


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
                    "attribute_types": m.attribute_types,
                    "sender_id": m.sender_id,
                    "trace_header": m.trace_header,
                }
                for m in messages
            ]
        }
    )


async def handle_send(
    messages: MessageService, name: str, message: SendRequest, recipient: Recipient | None = None
) -> bytes:
    """Answered after the commit. A duplicate (same dedup id inside the window) returns the
    original message id with `duplicate: true` and enqueues nothing."""
    check_queue_name(name)
    [result] = await messages.send(name, [message])
    if isinstance(result, EntryFailure):
        error_class = MessageTooLarge if result.code == MessageTooLarge.code else InvalidInput
        error = error_class(result.message)
        error.code = result.code
        raise error
    return send_answer(result)


async def handle_send_batch(
    messages: MessageService, name: str, batch: SendBatchRequest, recipient: Recipient | None = None
) -> bytes:
    """One transaction; a bad entry is reported in `failed` and does not fail the others."""
    check_queue_name(name)
    _unique_ids([e.id for e in batch.entries])
    results = await messages.send(name, batch.entries)
    return send_batch_answer([e.id for e in batch.entries], results)


async def handle_receive(
    messages: MessageService, name: str, request: ReceiveRequest, recipient: Recipient | None = None
) -> bytes:
    """Up to `max_messages`; waits up to `wait_seconds` for the first. On FIFO queues a group's
    messages come in order and no group has two receives in flight."""
    check_queue_name(name)
    # The receive sees its client leave (app/service/recipient.py).
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


async def handle_ack(
    messages: MessageService, name: str, batch: AckRequest, recipient: Recipient | None = None
) -> bytes:
    """Each acked message moves to history with its result; a stale handle fails its entry."""
    check_queue_name(name)
    return batch_answer(await messages.ack(name, _receipt_entries(batch.entries)))


async def handle_nack(
    messages: MessageService, name: str, batch: NackRequest, recipient: Recipient | None = None
) -> bytes:
    """Visible again now or after `delay_seconds`; the error is recorded."""
    check_queue_name(name)
    return batch_answer(await messages.nack(name, _receipt_entries(batch.entries)))


async def handle_visibility(
    messages: MessageService, name: str, batch: VisibilityRequest, recipient: Recipient | None = None
) -> bytes:
    """Extend (heartbeat) or shorten the time a received message stays hidden."""
    check_queue_name(name)
    return batch_answer(await messages.change_visibility(name, _receipt_entries(batch.entries)))


async def release_messages(name: QueueName, request: ReleaseRequest, messages: MessagesDep) -> CountOut:
    """For a consumer that restarts or gives up: every message it received with this
    `consumer_id` and still holds becomes receivable at once (as a nack without delay; the
    history records it as released). `count` says how many."""
    check_queue_name(name)
    return CountOut(count=await messages.release(name, request.consumer_id))


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
