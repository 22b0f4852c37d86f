"""The SQS actions on messages: SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch),
ChangeMessageVisibility(Batch). Each calls the message service.

Bodies: an SQS body is a string, stored as a JSON string, so that REST receives that string. A
message sent over REST whose JSON body is not a string is received here as its compact JSON text.
MD5OfBody is over the string SQS carries.

Message attributes and AWSTraceHeader: app/sqs/message_attributes.py. SenderId is the id of the
key that signed the send.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

from app.domain import TOKEN, EntryFailure, ReceivedMessage, SendEntry, SendResult
from app.errors import ReceiptNotFound
from app.service.messages import ReceiptEntry
from app.service.validation import XML_REFUSED
from app.sqs import errors, message_attributes
from app.sqs.checksums import md5_of_body
from app.sqs.context import Context, failure_to_sqs
from app.sqs.errors import SqsError, batch_error
from app.sqs.shapes import (
    BatchResultErrorEntry,
    ChangeMessageVisibilityBatchRequest,
    ChangeMessageVisibilityBatchResult,
    ChangeMessageVisibilityBatchResultEntry,
    ChangeMessageVisibilityRequest,
    DeleteMessageBatchRequest,
    DeleteMessageBatchResult,
    DeleteMessageBatchResultEntry,
    DeleteMessageRequest,
    Message,
    ReceiveMessageRequest,
    ReceiveMessageResult,
    SendMessageBatchRequest,
    SendMessageBatchRequestEntry,
    SendMessageBatchResult,
    SendMessageBatchResultEntry,
    SendMessageRequest,
    SendMessageResult,
)

MAX_BATCH: Final = 10
BATCH_IDS: Final = re.compile(r"[A-Za-z0-9_-]{1,80}(?:\n[A-Za-z0-9_-]{1,80})*")
# The characters SQS accepts in a message body (and that XML 1.0 can carry): as in tags.
BODY_REFUSED: Final = XML_REFUSED
SYSTEM_ATTRIBUTES: Final = (
    "SentTimestamp",
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "MessageGroupId",
    "MessageDeduplicationId",
    "SequenceNumber",
    "SenderId",
    "AWSTraceHeader",
    "DeadLetterQueueSourceArn",
)


def _invalid(message: str) -> SqsError:
    return SqsError(errors.INVALID_PARAMETER_VALUE, message)


def _check_batch(ids: Sequence[str]) -> None:
    if not ids:
        raise SqsError(errors.EMPTY_BATCH_REQUEST, "There should be at least one entry in the request.")
    if len(ids) > MAX_BATCH:
        raise SqsError(
            errors.TOO_MANY_ENTRIES_IN_BATCH_REQUEST, f"Maximum number of entries per request are {MAX_BATCH}."
        )
    # One match over the ids joined by newlines (which no valid id holds) checks them all.
    if not BATCH_IDS.fullmatch("\n".join(ids)):
        raise SqsError(
            errors.INVALID_BATCH_ENTRY_ID,
            "A batch entry id can only contain alphanumeric characters, hyphens and underscores,"
            " and be 1 to 80 characters long.",
        )
    if len(set(ids)) != len(ids):
        raise SqsError(errors.BATCH_ENTRY_IDS_NOT_DISTINCT, "Two or more batch entries have the same Id.")


def _entry(message: SendMessageRequest | SendMessageBatchRequestEntry, fifo: bool, sender: str | None) -> SendEntry:
    """The message to enqueue; SqsError for what SQS or PQS refuses before the queue is read."""
    # (Fields read once into locals: this runs for every message an SQS client sends.)
    body, group, dedup = message.MessageBody, message.MessageGroupId, message.MessageDeduplicationId
    if not body:
        raise SqsError(errors.MISSING_PARAMETER, "The request must contain the parameter MessageBody.")
    if fifo and group is None:
        raise SqsError(errors.MISSING_PARAMETER, "The request must contain the parameter MessageGroupId.")
    # Printable ASCII holds no refused character: one scan in C answers most bodies.
    if not (body.isascii() and body.isprintable()) and BODY_REFUSED.search(body):
        raise SqsError(
            errors.INVALID_MESSAGE_CONTENTS,
            "Invalid characters found. Valid characters are #x9 | #xA | #xD |"
            " #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        )
    if group is not None and not TOKEN.fullmatch(group):
        raise _invalid("MessageGroupId must be 1-128 letters, digits or punctuation.")
    if dedup is not None and not TOKEN.fullmatch(dedup):
        raise _invalid("MessageDeduplicationId must be 1-128 letters, digits or punctuation.")
    if message.MessageAttributes is None and message.MessageSystemAttributes is None:
        return SendEntry(body, group, dedup, message.DelaySeconds, sender)
    strings, typed = message_attributes.split(message.MessageAttributes)
    return SendEntry(
        body=message.MessageBody,
        group_id=message.MessageGroupId,
        dedup_id=message.MessageDeduplicationId,
        delay_seconds=message.DelaySeconds,
        attributes=strings,
        attribute_types=typed,
        trace_header=message_attributes.trace_header(message.MessageSystemAttributes),
        sender_id=sender,
    )


def _sequence(fifo: bool, result: SendResult) -> str | None:
    # SQS gives sequence numbers of FIFO messages only, as 20-digit strings.
    return f"{result.sequence_number:020d}" if fifo else None


def _fifo(name: str) -> bool:
    # A queue's name ends in .fifo exactly when it is FIFO (app.service.validation).
    return name.endswith(".fifo")


async def send_message(ctx: Context, request: SendMessageRequest) -> SendMessageResult:
    name = ctx.place.name_of_url(request.QueueUrl)
    [result] = await ctx.messages.send(name, [_entry(request, _fifo(name), ctx.sender_id)])
    if isinstance(result, EntryFailure):
        raise failure_to_sqs(result)
    return SendMessageResult(
        MD5OfMessageBody=md5_of_body(request.MessageBody),
        MD5OfMessageAttributes=message_attributes.md5_sent(request.MessageAttributes),
        MD5OfMessageSystemAttributes=message_attributes.md5_sent(request.MessageSystemAttributes),
        MessageId=result.message_id,
        SequenceNumber=_sequence(_fifo(name), result),
    )


async def send_message_batch(ctx: Context, request: SendMessageBatchRequest) -> SendMessageBatchResult:
    name = ctx.place.name_of_url(request.QueueUrl)
    _check_batch([e.Id for e in request.Entries])
    fifo = _fifo(name)
    failed: list[BatchResultErrorEntry] = []
    accepted: list[SendMessageBatchRequestEntry] = []
    entries: list[SendEntry] = []
    sender = ctx.sender_id
    for item in request.Entries:
        try:
            entries.append(_entry(item, fifo, sender))
        except SqsError as exc:
            failed.append(batch_error(item.Id, exc))
        else:
            accepted.append(item)
    results = await ctx.messages.send(name, entries) if entries else []
    successful = []
    for item, result in zip(accepted, results, strict=True):
        if isinstance(result, EntryFailure):
            failed.append(batch_error(item.Id, failure_to_sqs(result)))
            continue
        done = SendMessageBatchResultEntry(
            Id=item.Id, MessageId=result.message_id, MD5OfMessageBody=md5_of_body(item.MessageBody)
        )
        # (The optional members set only when there: most sends have none of them.)
        if item.MessageAttributes:
            done.MD5OfMessageAttributes = message_attributes.md5_sent(item.MessageAttributes)
        if item.MessageSystemAttributes:
            done.MD5OfMessageSystemAttributes = message_attributes.md5_sent(item.MessageSystemAttributes)
        if fifo:
            done.SequenceNumber = f"{result.sequence_number:020d}"
        successful.append(done)
    return SendMessageBatchResult(Successful=successful, Failed=failed)


def body_text(body: Any) -> str:
    """A stored body as SQS carries it: a JSON string is that string, anything else its compact
    JSON text. A body sent over REST may hold characters SQS refuses (JSON carries U+0001, XML
    1.0 cannot): each becomes U+FFFD, in both protocols alike, and MD5OfBody is over the text
    sent, so an SDK that checks the digest accepts it."""
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return BODY_REFUSED.sub("\ufffd", text)


def _millis(moment: Any) -> str:
    return str(int(moment.timestamp() * 1000))


def _system_attributes(message: ReceivedMessage, wanted: set[str], sources: dict[int, str]) -> dict[str, str] | None:
    found = {
        "SentTimestamp": _millis(message.sent_at),
        "ApproximateReceiveCount": str(message.receive_count),
        "ApproximateFirstReceiveTimestamp": _millis(message.first_received_at),
    }
    if message.sender_id is not None:
        found["SenderId"] = message.sender_id
    if message.trace_header is not None:
        found["AWSTraceHeader"] = BODY_REFUSED.sub("\ufffd", message.trace_header)
    if message.source_queue_id in sources:
        found["DeadLetterQueueSourceArn"] = sources[message.source_queue_id]
    if message.group_id is not None:
        found["MessageGroupId"] = message.group_id
        found["SequenceNumber"] = f"{message.sequence_number:020d}"
        if message.dedup_id is not None:
            found["MessageDeduplicationId"] = message.dedup_id
    if "All" not in wanted:
        found = {name: value for name, value in found.items() if name in wanted}
    return found or None


async def _sources(ctx: Context, got: Sequence[ReceivedMessage]) -> dict[int, str]:
    """The ARNs of the queues dead-lettered messages came from, by queue id (a queue deleted
    since has none, nor one the caller may not know of: it is another queue than the one
    received from, and the caller may hold no right there)."""
    found: dict[int, str] = {}
    for queue_id in {m.source_queue_id for m in got if m.source_queue_id is not None}:
        name = await ctx.queues.name_by_id(queue_id)
        if name is not None and ctx.knows(name):
            found[queue_id] = ctx.place.arn(name)
    return found


async def receive_message(ctx: Context, request: ReceiveMessageRequest) -> ReceiveMessageResult:
    name = ctx.place.name_of_url(request.QueueUrl)
    count = 1 if request.MaxNumberOfMessages is None else request.MaxNumberOfMessages
    if not 1 <= count <= MAX_BATCH:
        raise _invalid(f"Value {count} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10.")
    wait = request.WaitTimeSeconds
    if wait is not None and not 0 <= wait <= 20:
        raise _invalid(f"Value {wait} for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20.")
    hidden = request.VisibilityTimeout
    if hidden is not None and not 0 <= hidden <= 43_200:
        raise _invalid(f"Value {hidden} for parameter VisibilityTimeout is invalid. Reason: Must be 0 to 43200.")
    attempt = request.ReceiveRequestAttemptId
    if attempt is not None and not TOKEN.fullmatch(attempt):
        raise _invalid("ReceiveRequestAttemptId must be 1-128 letters, digits or punctuation.")
    wanted = set(request.AttributeNames or ()) | set(request.MessageSystemAttributeNames or ())
    got = await ctx.messages.receive(
        name,
        max_messages=count,
        wait_seconds=wait,
        visibility_timeout=hidden,
        attempt_id=attempt,
        recipient=ctx.recipient,
    )
    sources = await _sources(ctx, got) if wanted & {"All", "DeadLetterQueueSourceArn"} else {}
    filters = request.MessageAttributeNames or ()
    messages = []
    for message in got:
        text = body_text(message.body)
        found, digest = None, None
        if filters and (message.attributes or message.attribute_types):
            found, digest = message_attributes.received(message, filters)
        messages.append(
            Message(
                MessageId=str(message.message_id),
                ReceiptHandle=message.receipt_handle,
                MD5OfBody=md5_of_body(text),
                Body=text,
                Attributes=_system_attributes(message, wanted, sources) if wanted else None,
                MD5OfMessageAttributes=digest,
                MessageAttributes=found,
            )
        )
    return ReceiveMessageResult(Messages=messages or None)


def _single(outcome: dict[str, EntryFailure | None]) -> None:
    failure = outcome["0"]
    if failure is not None:
        raise failure_to_sqs(failure)


async def delete_message(ctx: Context, request: DeleteMessageRequest) -> None:
    name = ctx.place.name_of_url(request.QueueUrl)
    _single(await ctx.messages.ack(name, [ReceiptEntry(id="0", receipt_handle=request.ReceiptHandle)]))


def _failed(outcome: dict[str, EntryFailure | None]) -> list[BatchResultErrorEntry]:
    return [batch_error(i, failure_to_sqs(f)) for i, f in outcome.items() if f is not None]


async def delete_message_batch(ctx: Context, request: DeleteMessageBatchRequest) -> DeleteMessageBatchResult:
    name = ctx.place.name_of_url(request.QueueUrl)
    _check_batch([e.Id for e in request.Entries])
    entries = [ReceiptEntry(id=e.Id, receipt_handle=e.ReceiptHandle) for e in request.Entries]
    outcome = await ctx.messages.ack(name, entries)
    ok = [DeleteMessageBatchResultEntry(Id=i) for i, f in outcome.items() if f is None]
    return DeleteMessageBatchResult(Successful=ok, Failed=_failed(outcome))


def _check_timeout(timeout: int) -> None:
    if not 0 <= timeout <= 43_200:
        raise _invalid(f"Value {timeout} for parameter VisibilityTimeout is invalid. Reason: Must be 0 to 43200.")


async def change_message_visibility(ctx: Context, request: ChangeMessageVisibilityRequest) -> None:
    name = ctx.place.name_of_url(request.QueueUrl)
    _check_timeout(request.VisibilityTimeout)
    entry = ReceiptEntry(id="0", receipt_handle=request.ReceiptHandle, visibility_timeout=request.VisibilityTimeout)
    outcome = await ctx.messages.change_visibility(name, [entry])
    failure = outcome["0"]
    if failure is not None and failure.code == ReceiptNotFound.code:
        # A handle of ours whose delivery has ended (acked, or its timeout ran out): SQS answers
        # this, not MessageNotInflight (and ReceiptHandleIsInvalid in a batch's entry). The
        # handle decoded, so it is one PQS issued: short, and safe to echo.
        raise _invalid(
            f"Value {request.ReceiptHandle} for parameter ReceiptHandle is invalid."
            " Reason: Message does not exist or is not available for visibility timeout change."
        )
    _single(outcome)


async def change_message_visibility_batch(
    ctx: Context, request: ChangeMessageVisibilityBatchRequest
) -> ChangeMessageVisibilityBatchResult:
    name = ctx.place.name_of_url(request.QueueUrl)
    _check_batch([e.Id for e in request.Entries])
    failed: list[BatchResultErrorEntry] = []
    entries = []
    for item in request.Entries:
        timeout = item.VisibilityTimeout or 0
        try:
            _check_timeout(timeout)
        except SqsError as exc:
            failed.append(batch_error(item.Id, exc))
            continue
        entries.append(ReceiptEntry(id=item.Id, receipt_handle=item.ReceiptHandle, visibility_timeout=timeout))
    outcome = await ctx.messages.change_visibility(name, entries) if entries else {}
    ok = [ChangeMessageVisibilityBatchResultEntry(Id=i) for i, f in outcome.items() if f is None]
    return ChangeMessageVisibilityBatchResult(Successful=ok, Failed=[*failed, *_failed(outcome)])
