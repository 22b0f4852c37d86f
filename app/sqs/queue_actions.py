"""The SQS actions on queues: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue,
GetQueueAttributes, SetQueueAttributes, PurgeQueue, TagQueue, UntagQueue, ListQueueTags,
ListDeadLetterSourceQueues. Each calls the queue service; attributes are translated between SQS's
names and values and PQS's `QueueAttributes`."""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import fields, replace
from typing import Any, Final

from app.access import Action
from app.domain import DeadLetter, Queue, QueueAttributes, QueueStats
from app.errors import Forbidden
from app.service.validation import MAX_DEAD_LETTER_FOR, MAX_RECEIVE_COUNT
from app.sqs import errors
from app.sqs.context import Context, existing_name
from app.sqs.errors import SqsError
from app.sqs.shapes import (
    CreateQueueRequest,
    CreateQueueResult,
    DeleteQueueRequest,
    GetQueueAttributesRequest,
    GetQueueAttributesResult,
    GetQueueUrlRequest,
    GetQueueUrlResult,
    ListDeadLetterSourceQueuesRequest,
    ListDeadLetterSourceQueuesResult,
    ListQueuesRequest,
    ListQueuesResult,
    ListQueueTagsRequest,
    ListQueueTagsResult,
    PurgeQueueRequest,
    SetQueueAttributesRequest,
    TagQueueRequest,
    UntagQueueRequest,
)

# SQS attribute -> QueueAttributes field, for the integer attributes.
INTEGER_ATTRIBUTES: Final = {
    "VisibilityTimeout": "visibility_timeout",
    "DelaySeconds": "delay_seconds",
    "MessageRetentionPeriod": "retention_seconds",
    "MaximumMessageSize": "max_message_bytes",
    "ReceiveMessageWaitTimeSeconds": "receive_wait_seconds",
}
SCOPES: Final = {"queue": "queue", "messageGroup": "group"}
PERMISSIONS: Final = ("allowAll", "denyAll", "byQueue")
# Accepted for SDKs and templates that set it; PQS has one throughput mode, so it is not kept.
THROUGHPUT_LIMITS: Final = ("perQueue", "perMessageGroupId")
SETTABLE: Final = (
    *INTEGER_ATTRIBUTES,
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
)
COUNTS: Final = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)
READABLE: Final = (*COUNTS, "CreatedTimestamp", "LastModifiedTimestamp", "QueueArn", *SETTABLE)
MAX_LIST: Final = 1000
INTEGER: Final = re.compile(r"-?[0-9]{1,11}")
COUNT: Final = re.compile(r"[0-9]{1,11}")


def _invalid_value(name: str, value: str, reason: str) -> SqsError:
    return SqsError(errors.INVALID_ATTRIBUTE_VALUE, f"Invalid value for the parameter {name}: {reason}")


def _invalid_policy(name: str, value: str, reason: str) -> SqsError:
    """SQS answers a bad RedrivePolicy or RedriveAllowPolicy as an invalid parameter, in these words."""
    message = f"Value {value[:200]} for parameter {name} is invalid. Reason: {reason}"
    return SqsError(errors.INVALID_PARAMETER_VALUE, message)


def _policy(name: str, value: str) -> dict[str, Any]:
    try:
        # NaN and Infinity are not JSON; a very deep policy ends in RecursionError.
        policy = json.loads(value, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise _invalid_policy(name, value, "Invalid JSON.") from None
    if not isinstance(policy, dict):
        raise _invalid_policy(name, value, "Invalid JSON.")
    return policy


def _boolean(name: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise _invalid_value(name, value, "must be true or false")
    return value.lower() == "true"


def _integer(name: str, value: str) -> int:
    # ASCII digits only: str.isdigit() also takes "²" (which int() refuses) and "٣" (which int()
    # reads as 3), and an optional single sign; the range is checked with the other attributes.
    if not INTEGER.fullmatch(value.strip()):
        raise _invalid_value(name, value, "must be an integer")
    return int(value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _count(value: Any) -> int:
    """maxReceiveCount as a JSON number or a string of digits (SQS's own answers use both);
    floats and booleans are not counts."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and COUNT.fullmatch(value):
        return int(value)
    raise ValueError("maxReceiveCount must be an integer")


def _dead_letter(ctx: Context, value: str) -> DeadLetter | None:
    if value == "":
        return None
    policy = _policy("RedrivePolicy", value)
    for key in ("deadLetterTargetArn", "maxReceiveCount"):
        if key not in policy:
            reason = f"Redrive policy does not contain mandatory attribute: {key}."
            raise _invalid_policy("RedrivePolicy", value, reason)
    arn = policy["deadLetterTargetArn"]
    try:
        count = _count(policy["maxReceiveCount"])
    except ValueError:
        raise _invalid_policy("RedrivePolicy", value, "maxReceiveCount must be an integer.") from None
    if not 1 <= count <= MAX_RECEIVE_COUNT:
        reason = f"Invalid value for maxReceiveCount: {count}, valid values are from 1 to {MAX_RECEIVE_COUNT}"
        raise _invalid_policy("RedrivePolicy", value, reason + " both inclusive.")
    if not isinstance(arn, str):
        raise _invalid_policy("RedrivePolicy", value, "deadLetterTargetArn must be a queue ARN.")
    queue = ctx.place.name_of_arn(arn)
    ctx.authorize("admin", queue)  # dead letters are sends into that queue, as over REST
    return DeadLetter(queue, count)


def _dead_letter_for(ctx: Context, value: str) -> tuple[str, ...] | None:
    """RedriveAllowPolicy as the queues that may name this one as their dead-letter queue: None
    for allowAll (and for an empty value, as SQS clears RedrivePolicy), () for denyAll."""
    if value == "":
        return None
    policy = _policy("RedriveAllowPolicy", value)
    permission, arns = policy.get("redrivePermission"), policy.get("sourceQueueArns")
    if permission not in PERMISSIONS:
        raise _invalid_policy("RedriveAllowPolicy", value, "redrivePermission must be allowAll, denyAll or byQueue.")
    if permission != "byQueue":
        if arns is not None:
            raise _invalid_policy("RedriveAllowPolicy", value, "sourceQueueArns is allowed only with byQueue.")
        return None if permission == "allowAll" else ()
    if not isinstance(arns, list) or not 1 <= len(arns) <= MAX_DEAD_LETTER_FOR:
        raise _invalid_policy(
            "RedriveAllowPolicy", value, f"byQueue needs sourceQueueArns: 1 to {MAX_DEAD_LETTER_FOR} queue ARNs."
        )
    if not all(isinstance(arn, str) for arn in arns):
        raise _invalid_policy("RedriveAllowPolicy", value, "sourceQueueArns must be queue ARNs.")
    # Named queues need not exist yet: a template may allow a source before it creates it.
    return tuple(ctx.place.name_of_arn(arn) for arn in arns)


def _apply(ctx: Context, attrs: QueueAttributes, given: dict[str, str], *, creating: bool) -> QueueAttributes:
    """`attrs` with the SQS attributes `given` applied."""
    changes: dict[str, Any] = {}
    for name, value in given.items():
        if name in INTEGER_ATTRIBUTES:
            changes[INTEGER_ATTRIBUTES[name]] = _integer(name, value)
        elif name == "FifoQueue":
            fifo = _boolean(name, value)
            if not creating and fifo != attrs.fifo:
                raise _invalid_value(name, value, "a queue's type cannot change")
            changes["fifo"] = fifo
        elif name == "ContentBasedDeduplication":
            changes["content_based_deduplication"] = _boolean(name, value)
        elif name == "DeduplicationScope":
            if value not in SCOPES:
                raise _invalid_value(name, value, "must be messageGroup or queue")
            changes["deduplication_scope"] = SCOPES[value]
        elif name == "FifoThroughputLimit":
            if value not in THROUGHPUT_LIMITS:
                raise _invalid_value(name, value, "must be perQueue or perMessageGroupId")
        elif name == "RedrivePolicy":
            changes["dead_letter"] = _dead_letter(ctx, value)
        elif name == "RedriveAllowPolicy":
            changes["dead_letter_for"] = _dead_letter_for(ctx, value)
        else:
            raise SqsError(errors.INVALID_ATTRIBUTE_NAME, f"Unknown Attribute {name[:100]}.")
    merged = replace(attrs, **changes)
    fifo_only = ("ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit")
    if not merged.fifo and any(name in given for name in fifo_only):
        raise SqsError(
            errors.INVALID_ATTRIBUTE_NAME,
            "ContentBasedDeduplication, DeduplicationScope and FifoThroughputLimit are attributes of FIFO queues only.",
        )
    return merged


async def create_queue(ctx: Context, request: CreateQueueRequest) -> CreateQueueResult:
    attrs = _apply(ctx, QueueAttributes(), request.Attributes or {}, creating=True)
    queue, _ = await ctx.queues.create(request.QueueName, attrs, request.tags)
    return CreateQueueResult(QueueUrl=ctx.place.url(queue.name))


async def get_queue_url(ctx: Context, request: GetQueueUrlRequest) -> GetQueueUrlResult:
    if request.QueueOwnerAWSAccountId not in (None, ctx.place.account_id):
        raise SqsError(errors.QUEUE_DOES_NOT_EXIST, "The specified queue does not exist.")
    queue, _ = await ctx.queues.get(existing_name(request.QueueName))
    return GetQueueUrlResult(QueueUrl=ctx.place.url(queue.name))


def _token(after: str) -> str:
    return base64.urlsafe_b64encode(after.encode()).decode()


def _after(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode("ascii")).decode()
    except (binascii.Error, ValueError):
        raise SqsError(errors.INVALID_PARAMETER_VALUE, "Invalid NextToken value.") from None


def _max_results(limit: int | None) -> int | None:
    if limit is not None and not 1 <= limit <= MAX_LIST:
        raise SqsError(errors.INVALID_PARAMETER_VALUE, f"MaxResults must be between 1 and {MAX_LIST}.")
    return limit


async def list_queues(ctx: Context, request: ListQueuesRequest) -> ListQueuesResult:
    """Without MaxResults SQS answers up to 1,000 queues and no NextToken; with it, pages."""
    limit = _max_results(request.MaxResults)
    after = _after(request.NextToken) if request.NextToken else ""
    page = await ctx.queues.list(request.QueueNamePrefix or "", after, limit or MAX_LIST)
    token = _token(page.next_after) if limit is not None and page.next_after else None
    return ListQueuesResult(QueueUrls=[ctx.place.url(q.name) for q in page.queues] or None, NextToken=token)


async def delete_queue(ctx: Context, request: DeleteQueueRequest) -> None:
    await ctx.queues.delete(ctx.place.name_of_url(request.QueueUrl))


async def purge_queue(ctx: Context, request: PurgeQueueRequest) -> None:
    await ctx.queues.purge(ctx.place.name_of_url(request.QueueUrl))


def _seconds(moment: Any) -> str:
    return str(int(moment.timestamp()))


def _readable(ctx: Context, queue: Queue, stats: QueueStats) -> dict[str, str]:
    attrs = queue.attributes
    found = {
        "ApproximateNumberOfMessages": str(stats.visible),
        "ApproximateNumberOfMessagesNotVisible": str(stats.in_flight),
        "ApproximateNumberOfMessagesDelayed": str(stats.delayed),
        "CreatedTimestamp": _seconds(queue.created_at),
        "LastModifiedTimestamp": _seconds(queue.updated_at),
        "QueueArn": ctx.place.arn(queue.name),
        **{sqs: str(getattr(attrs, field)) for sqs, field in INTEGER_ATTRIBUTES.items()},
    }
    if attrs.dead_letter is not None:
        policy = {
            "deadLetterTargetArn": ctx.place.arn(attrs.dead_letter.queue),
            "maxReceiveCount": attrs.dead_letter.max_receive_count,
        }
        found["RedrivePolicy"] = json.dumps(policy, separators=(",", ":"))
    if attrs.dead_letter_for is not None:
        allow: dict[str, Any] = {"redrivePermission": "byQueue" if attrs.dead_letter_for else "denyAll"}
        if attrs.dead_letter_for:
            allow["sourceQueueArns"] = [ctx.place.arn(name) for name in attrs.dead_letter_for]
        found["RedriveAllowPolicy"] = json.dumps(allow, separators=(",", ":"))
    if attrs.fifo:
        found["FifoQueue"] = "true"
        found["ContentBasedDeduplication"] = str(attrs.content_based_deduplication).lower()
        found["DeduplicationScope"] = "messageGroup" if attrs.deduplication_scope == "group" else "queue"
        found["FifoThroughputLimit"] = "perQueue"
    return found


async def get_queue_attributes(ctx: Context, request: GetQueueAttributesRequest) -> GetQueueAttributesResult:
    wanted = request.AttributeNames or []
    for name in wanted:
        if name != "All" and name not in READABLE:
            raise SqsError(errors.INVALID_ATTRIBUTE_NAME, f"Unknown Attribute {name[:100]}.")
    queue, stats = await ctx.queues.get(ctx.place.name_of_url(request.QueueUrl))
    if not wanted:
        return GetQueueAttributesResult()
    found = _readable(ctx, queue, stats)
    if "All" not in wanted:
        found = {name: value for name, value in found.items() if name in wanted}
    return GetQueueAttributesResult(Attributes=found or None)


async def set_queue_attributes(ctx: Context, request: SetQueueAttributesRequest) -> None:
    name = ctx.place.name_of_url(request.QueueUrl)
    queue, _ = await ctx.queues.get(name)
    merged = _apply(ctx, queue.attributes, request.Attributes, creating=False)
    # Only what differs: the type cannot change (_apply refused it), and an update checks only
    # what it is given (a dead-letter queue named again is not checked again).
    changes: dict[str, Any] = {
        field.name: getattr(merged, field.name)
        for field in fields(QueueAttributes)
        if field.name != "fifo" and getattr(merged, field.name) != getattr(queue.attributes, field.name)
    }
    if changes:
        await ctx.queues.update(name, changes)


async def list_dead_letter_source_queues(
    ctx: Context, request: ListDeadLetterSourceQueuesRequest
) -> ListDeadLetterSourceQueuesResult:
    """The queues whose dead-letter queue this is; pages as ListQueues does."""
    limit = _max_results(request.MaxResults)
    after = _after(request.NextToken) if request.NextToken else ""
    name = ctx.place.name_of_url(request.QueueUrl)
    names, next_after = await ctx.queues.dead_letter_sources(name, after, limit or MAX_LIST)
    token = _token(next_after) if limit is not None and next_after else None
    # Only the sources the caller may look at: read on a dead-letter queue does not tell
    # which other queues exist (DeleteQueue's QueueInUse names none, for the same reason). A
    # page may come out shorter than MaxResults; its NextToken still goes on.
    shown = [n for n in names if _may(ctx, "read", n)]
    return ListDeadLetterSourceQueuesResult(queueUrls=[ctx.place.url(n) for n in shown], NextToken=token)


def _may(ctx: Context, action: Action, queue: str) -> bool:
    try:
        ctx.authorize(action, queue)
    except Forbidden:
        return False
    return True


async def tag_queue(ctx: Context, request: TagQueueRequest) -> None:
    await ctx.queues.tag(ctx.place.name_of_url(request.QueueUrl), request.Tags)


async def untag_queue(ctx: Context, request: UntagQueueRequest) -> None:
    await ctx.queues.untag(ctx.place.name_of_url(request.QueueUrl), request.TagKeys)


async def list_queue_tags(ctx: Context, request: ListQueueTagsRequest) -> ListQueueTagsResult:
    tags = await ctx.queues.tags(ctx.place.name_of_url(request.QueueUrl))
    return ListQueueTagsResult(Tags=tags or None)
