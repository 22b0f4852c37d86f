"""The SQS actions on message move tasks: StartMessageMoveTask, ListMessageMoveTasks,
CancelMessageMoveTask. Each calls the move-task service (app/service/move_tasks.py).

A task handle is URL-safe base64 of the JSON `{"taskId": ..., "sourceArn": ...}`: the task and
its dead-letter queue, so that CancelMessageMoveTask is checked on that queue's scope as the
others are. A handle is no secret: the scope decides who may cancel.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from typing import Any, Final

from app.domain import MoveTask
from app.errors import Forbidden
from app.sqs import errors
from app.sqs.context import Context, Place
from app.sqs.errors import SqsError
from app.sqs.shapes import (
    CancelMessageMoveTaskRequest,
    CancelMessageMoveTaskResult,
    ListMessageMoveTasksRequest,
    ListMessageMoveTasksResult,
    ListMessageMoveTasksResultEntry,
    StartMessageMoveTaskRequest,
    StartMessageMoveTaskResult,
)

MAX_LIST: Final = 10
_BAD_HANDLE: Final = "Value for parameter TaskHandle is invalid."


def queue_of_arn(place: Place, arn: str, parameter: str = "SourceArn") -> str:
    """The queue a move task's ARN names. A queue of another account, or a name no queue can
    have, is ResourceNotFoundException, as SQS answers a move task's missing queue."""
    try:
        return place.name_of_arn(arn)
    except SqsError as exc:
        if exc.error is errors.QUEUE_DOES_NOT_EXIST:
            raise SqsError(
                errors.RESOURCE_NOT_FOUND,
                f"The resource that you specified for the {parameter} parameter doesn't exist.",
            ) from None
        raise


def task_handle(place: Place, task: MoveTask) -> str:
    """The handle SQS clients cancel a task with."""
    document = json.dumps({"taskId": str(task.id), "sourceArn": place.arn(task.source)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(document.encode()).decode()


def _handle(handle: str) -> tuple[uuid.UUID, str]:
    """A handle's task id and source ARN; InvalidParameterValue for anything else."""
    try:
        document: Any = json.loads(base64.urlsafe_b64decode(handle.encode("ascii")))
        task_id, arn = uuid.UUID(document["taskId"]), document["sourceArn"]
    except (ValueError, TypeError, KeyError, AttributeError, binascii.Error, RecursionError):
        raise SqsError(errors.INVALID_PARAMETER_VALUE, _BAD_HANDLE) from None
    if not isinstance(arn, str):
        raise SqsError(errors.INVALID_PARAMETER_VALUE, _BAD_HANDLE)
    return task_id, arn


def queue_of_handle(place: Place, handle: str) -> str:
    """The dead-letter queue a task handle names."""
    _, arn = _handle(handle)
    try:
        return queue_of_arn(place, arn)
    except SqsError as exc:
        if exc.error is errors.INVALID_PARAMETER_VALUE:
            raise SqsError(errors.INVALID_PARAMETER_VALUE, _BAD_HANDLE) from None
        raise


async def start_message_move_task(ctx: Context, request: StartMessageMoveTaskRequest) -> StartMessageMoveTaskResult:
    """The caller needs `send` on the destination, or on every source queue of the messages
    (a move sends into them), besides `admin` on the dead-letter queue (the action's own)."""
    source = queue_of_arn(ctx.place, request.SourceArn)
    destination = None
    if request.DestinationArn is not None:
        destination = queue_of_arn(ctx.place, request.DestinationArn, "DestinationArn")
        ctx.authorize("send", destination)

    def may_send_into(name: str) -> None:
        try:
            ctx.authorize("send", name)
        except Forbidden:
            # The source is not named: the key may have no right to know of it.
            raise Forbidden("this key may not send into a queue this move task would move messages into") from None

    task = await ctx.moves.start(
        source, destination, request.MaxNumberOfMessagesPerSecond, check_destination=may_send_into
    )
    return StartMessageMoveTaskResult(TaskHandle=task_handle(ctx.place, task))


def _entry(ctx: Context, task: MoveTask) -> ListMessageMoveTasksResultEntry:
    place = ctx.place
    # The destination is another queue than the one asked about: named only to a key that may
    # know of it (a reader of the dead-letter queue may hold no right on where its messages went).
    shown = task.destination if task.destination is not None and ctx.knows(task.destination) else None
    return ListMessageMoveTasksResultEntry(
        TaskHandle=task_handle(place, task) if task.status == "RUNNING" else None,
        Status=task.status,
        SourceArn=place.arn(task.source),
        DestinationArn=place.arn(shown) if shown is not None else None,
        MaxNumberOfMessagesPerSecond=task.max_per_second,
        ApproximateNumberOfMessagesMoved=task.moved,
        ApproximateNumberOfMessagesToMove=task.to_move,
        FailureReason=task.failure_reason,
        StartedTimestamp=int(task.started_at.timestamp() * 1000),
    )


async def list_message_move_tasks(ctx: Context, request: ListMessageMoveTasksRequest) -> ListMessageMoveTasksResult:
    """The most recent tasks of the queue, newest first: 1 without MaxResults, as SQS."""
    limit = 1 if request.MaxResults is None else request.MaxResults
    if not 1 <= limit <= MAX_LIST:
        raise SqsError(errors.INVALID_PARAMETER_VALUE, f"MaxResults must be between 1 and {MAX_LIST}.")
    tasks = await ctx.moves.list(queue_of_arn(ctx.place, request.SourceArn), limit)
    return ListMessageMoveTasksResult(Results=[_entry(ctx, task) for task in tasks])


async def cancel_message_move_task(ctx: Context, request: CancelMessageMoveTaskRequest) -> CancelMessageMoveTaskResult:
    task_id, _ = _handle(request.TaskHandle)
    moved = await ctx.moves.cancel(queue_of_handle(ctx.place, request.TaskHandle), task_id)
    return CancelMessageMoveTaskResult(ApproximateNumberOfMessagesMoved=moved)
