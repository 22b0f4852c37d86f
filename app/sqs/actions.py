"""The SQS actions PQS serves, each with the REST operation it is (an operationId of the
operation table, app/api/operations.py) and its handler. The table derives each action's scope
from that operation's, so the scopes are written once, in the operation table; an action marked
`any_scope` needs any action at all on its queue instead (app/access.py, ANY_ACTION)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from app.sqs import message_actions as m
from app.sqs import move_actions as mv
from app.sqs import queue_actions as q
from app.sqs.context import Context
from app.sqs.shapes import Shape


@dataclass(frozen=True)
class SqsAction:
    """An SQS action: the operationId of the REST operation it maps to, and its handler.
    `any_scope`: allowed to a key with any action on the queue (not only that operation's), and
    refused as QueueDoesNotExist to one with none, so that it tells nothing of queues the key
    may not use."""

    operation_id: str
    handler: Callable[[Context, Any], Awaitable[Shape | None]]
    any_scope: bool = False


SQS_ACTIONS: Final[dict[str, SqsAction]] = {
    "CreateQueue": SqsAction("create_queue", q.create_queue),
    # A worker resolves its queue's URL before anything else, whatever it may do there.
    "GetQueueUrl": SqsAction("get_queue", q.get_queue_url, any_scope=True),
    "ListQueues": SqsAction("list_queues", q.list_queues),
    "DeleteQueue": SqsAction("delete_queue", q.delete_queue),
    "GetQueueAttributes": SqsAction("get_queue", q.get_queue_attributes),
    "SetQueueAttributes": SqsAction("update_queue", q.set_queue_attributes),
    "PurgeQueue": SqsAction("purge_queue", q.purge_queue),
    "TagQueue": SqsAction("update_queue", q.tag_queue),
    "UntagQueue": SqsAction("update_queue", q.untag_queue),
    "ListQueueTags": SqsAction("get_queue", q.list_queue_tags),
    "ListDeadLetterSourceQueues": SqsAction("get_queue", q.list_dead_letter_source_queues),
    "SendMessage": SqsAction("send_message", m.send_message),
    "SendMessageBatch": SqsAction("send_message_batch", m.send_message_batch),
    "ReceiveMessage": SqsAction("receive_messages", m.receive_message),
    "DeleteMessage": SqsAction("ack_messages", m.delete_message),
    "DeleteMessageBatch": SqsAction("ack_messages", m.delete_message_batch),
    "ChangeMessageVisibility": SqsAction("change_visibility", m.change_message_visibility),
    "ChangeMessageVisibilityBatch": SqsAction("change_visibility", m.change_message_visibility_batch),
    # On the dead-letter queue (SourceArn, or the one a TaskHandle names); a start also needs
    # send where the messages go (app/sqs/move_actions.py).
    "StartMessageMoveTask": SqsAction("redrive_queue", mv.start_message_move_task),
    "ListMessageMoveTasks": SqsAction("get_queue", mv.list_message_move_tasks),
    "CancelMessageMoveTask": SqsAction("redrive_queue", mv.cancel_message_move_task),
}
