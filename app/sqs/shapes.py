"""The inputs and outputs of the SQS actions PQS serves, as SQS's service model names them.

Each action decodes into its `<Action>Request` and answers with its `<Action>Result` (or nothing),
whichever protocol the request came in: the action code never sees the wire. Member names are
SQS's own, letter for letter (`queueUrls` included), since the AWS JSON 1.0 protocol sends them
as they are. The query protocol and its XML responses name some members otherwise (a flattened
list's items, a flattened map's entries, keys and values); `Wire` carries those names.

The facts come from SQS's service model: the JSON one that botocore ships (member names, types,
which members are required) and the last query-protocol one (the query and XML names).
`tests/sqs/test_shapes.py` compares this module with both, so the two cannot drift apart.
Every list and map here is flattened in the query protocol, as every one in SQS is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final


@dataclass(frozen=True, slots=True)
class Wire:
    """A member's name in the query protocol and in XML: a list's item element, or a map's entry
    element with the names of its key and value elements."""

    name: str
    key: str = "Name"
    value: str = "Value"


class _Long:
    """Marks an integer member that SQS's model types `long` (64 bits) rather than `integer`."""


LONG: Final = _Long()
Long = Annotated[int, LONG]


# Not frozen: the decoder builds one structure per batch entry, and a frozen dataclass's
# __init__ (a call of object.__setattr__ per field) costs four times as much. Nothing changes a
# structure once it is built.
@dataclass(slots=True, kw_only=True)
class Shape:
    """Base of every structure, so that the protocol code can take any of them."""


# --- values inside requests and results ---------------------------------------------------


@dataclass(slots=True, kw_only=True)
class MessageAttributeValue(Shape):
    StringValue: str | None = None
    BinaryValue: bytes | None = None
    StringListValues: Annotated[list[str] | None, Wire("StringListValue")] = None
    BinaryListValues: Annotated[list[bytes] | None, Wire("BinaryListValue")] = None
    DataType: str


@dataclass(slots=True, kw_only=True)
class MessageSystemAttributeValue(Shape):
    StringValue: str | None = None
    BinaryValue: bytes | None = None
    StringListValues: Annotated[list[str] | None, Wire("StringListValue")] = None
    BinaryListValues: Annotated[list[bytes] | None, Wire("BinaryListValue")] = None
    DataType: str


MessageAttributeMap = Annotated[dict[str, MessageAttributeValue] | None, Wire("MessageAttribute")]
SystemAttributeMap = Annotated[dict[str, MessageSystemAttributeValue] | None, Wire("MessageSystemAttribute")]
AttributeMap = Annotated[dict[str, str] | None, Wire("Attribute")]
TagMap = Annotated[dict[str, str] | None, Wire("Tag", key="Key")]


@dataclass(slots=True, kw_only=True)
class SendMessageBatchRequestEntry(Shape):
    Id: str
    MessageBody: str
    DelaySeconds: int | None = None
    MessageAttributes: MessageAttributeMap = None
    MessageSystemAttributes: SystemAttributeMap = None
    MessageDeduplicationId: str | None = None
    MessageGroupId: str | None = None


@dataclass(slots=True, kw_only=True)
class DeleteMessageBatchRequestEntry(Shape):
    Id: str
    ReceiptHandle: str


@dataclass(slots=True, kw_only=True)
class ChangeMessageVisibilityBatchRequestEntry(Shape):
    Id: str
    ReceiptHandle: str
    VisibilityTimeout: int | None = None


@dataclass(slots=True, kw_only=True)
class Message(Shape):
    MessageId: str | None = None
    ReceiptHandle: str | None = None
    MD5OfBody: str | None = None
    Body: str | None = None
    Attributes: AttributeMap = None
    MD5OfMessageAttributes: str | None = None
    MessageAttributes: MessageAttributeMap = None


@dataclass(slots=True, kw_only=True)
class BatchResultErrorEntry(Shape):
    Id: str
    SenderFault: bool
    Code: str
    Message: str | None = None


@dataclass(slots=True, kw_only=True)
class SendMessageBatchResultEntry(Shape):
    Id: str
    MessageId: str
    MD5OfMessageBody: str
    MD5OfMessageAttributes: str | None = None
    MD5OfMessageSystemAttributes: str | None = None
    SequenceNumber: str | None = None


@dataclass(slots=True, kw_only=True)
class DeleteMessageBatchResultEntry(Shape):
    Id: str


@dataclass(slots=True, kw_only=True)
class ChangeMessageVisibilityBatchResultEntry(Shape):
    Id: str


@dataclass(slots=True, kw_only=True)
class ListMessageMoveTasksResultEntry(Shape):
    TaskHandle: str | None = None
    Status: str | None = None
    SourceArn: str | None = None
    DestinationArn: str | None = None
    MaxNumberOfMessagesPerSecond: int | None = None
    ApproximateNumberOfMessagesMoved: Long | None = None
    ApproximateNumberOfMessagesToMove: Long | None = None
    FailureReason: str | None = None
    StartedTimestamp: Long | None = None


FailedEntries = Annotated[list[BatchResultErrorEntry], Wire("BatchResultErrorEntry")]
QueueUrlList = Annotated[list[str] | None, Wire("QueueUrl")]
AttributeNameList = Annotated[list[str] | None, Wire("AttributeName")]


# --- queues --------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class CreateQueueRequest(Shape):
    QueueName: str
    Attributes: AttributeMap = None
    tags: TagMap = None


@dataclass(slots=True, kw_only=True)
class CreateQueueResult(Shape):
    QueueUrl: str | None = None


@dataclass(slots=True, kw_only=True)
class GetQueueUrlRequest(Shape):
    QueueName: str
    QueueOwnerAWSAccountId: str | None = None


@dataclass(slots=True, kw_only=True)
class GetQueueUrlResult(Shape):
    QueueUrl: str | None = None


@dataclass(slots=True, kw_only=True)
class ListQueuesRequest(Shape):
    QueueNamePrefix: str | None = None
    NextToken: str | None = None
    MaxResults: int | None = None


@dataclass(slots=True, kw_only=True)
class ListQueuesResult(Shape):
    QueueUrls: QueueUrlList = None
    NextToken: str | None = None


@dataclass(slots=True, kw_only=True)
class DeleteQueueRequest(Shape):
    QueueUrl: str


@dataclass(slots=True, kw_only=True)
class GetQueueAttributesRequest(Shape):
    QueueUrl: str
    AttributeNames: AttributeNameList = None


@dataclass(slots=True, kw_only=True)
class GetQueueAttributesResult(Shape):
    Attributes: AttributeMap = None


@dataclass(slots=True, kw_only=True)
class SetQueueAttributesRequest(Shape):
    QueueUrl: str
    Attributes: Annotated[dict[str, str], Wire("Attribute")]


@dataclass(slots=True, kw_only=True)
class PurgeQueueRequest(Shape):
    QueueUrl: str


@dataclass(slots=True, kw_only=True)
class TagQueueRequest(Shape):
    QueueUrl: str
    Tags: Annotated[dict[str, str], Wire("Tag", key="Key")]


@dataclass(slots=True, kw_only=True)
class UntagQueueRequest(Shape):
    QueueUrl: str
    TagKeys: Annotated[list[str], Wire("TagKey")]


@dataclass(slots=True, kw_only=True)
class ListQueueTagsRequest(Shape):
    QueueUrl: str


@dataclass(slots=True, kw_only=True)
class ListQueueTagsResult(Shape):
    Tags: TagMap = None


@dataclass(slots=True, kw_only=True)
class ListDeadLetterSourceQueuesRequest(Shape):
    QueueUrl: str
    NextToken: str | None = None
    MaxResults: int | None = None


@dataclass(slots=True, kw_only=True)
class ListDeadLetterSourceQueuesResult(Shape):
    queueUrls: Annotated[list[str], Wire("QueueUrl")]
    NextToken: str | None = None


# --- messages ------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class SendMessageRequest(Shape):
    QueueUrl: str
    MessageBody: str
    DelaySeconds: int | None = None
    MessageAttributes: MessageAttributeMap = None
    MessageSystemAttributes: SystemAttributeMap = None
    MessageDeduplicationId: str | None = None
    MessageGroupId: str | None = None


@dataclass(slots=True, kw_only=True)
class SendMessageResult(Shape):
    MD5OfMessageBody: str | None = None
    MD5OfMessageAttributes: str | None = None
    MD5OfMessageSystemAttributes: str | None = None
    MessageId: str | None = None
    SequenceNumber: str | None = None


@dataclass(slots=True, kw_only=True)
class SendMessageBatchRequest(Shape):
    QueueUrl: str
    Entries: Annotated[list[SendMessageBatchRequestEntry], Wire("SendMessageBatchRequestEntry")]


@dataclass(slots=True, kw_only=True)
class SendMessageBatchResult(Shape):
    Successful: Annotated[list[SendMessageBatchResultEntry], Wire("SendMessageBatchResultEntry")]
    Failed: FailedEntries


@dataclass(slots=True, kw_only=True)
class ReceiveMessageRequest(Shape):
    """`MessageSystemAttributeNames` came after the query protocol: its query name is
    `AttributeName`, the same as `AttributeNames`', so a query request fills `AttributeNames`
    and the action reads the two as one."""

    QueueUrl: str
    AttributeNames: AttributeNameList = None
    MessageSystemAttributeNames: AttributeNameList = None
    MessageAttributeNames: Annotated[list[str] | None, Wire("MessageAttributeName")] = None
    MaxNumberOfMessages: int | None = None
    VisibilityTimeout: int | None = None
    WaitTimeSeconds: int | None = None
    ReceiveRequestAttemptId: str | None = None


@dataclass(slots=True, kw_only=True)
class ReceiveMessageResult(Shape):
    Messages: Annotated[list[Message] | None, Wire("Message")] = None


@dataclass(slots=True, kw_only=True)
class DeleteMessageRequest(Shape):
    QueueUrl: str
    ReceiptHandle: str


@dataclass(slots=True, kw_only=True)
class DeleteMessageBatchRequest(Shape):
    QueueUrl: str
    Entries: Annotated[list[DeleteMessageBatchRequestEntry], Wire("DeleteMessageBatchRequestEntry")]


@dataclass(slots=True, kw_only=True)
class DeleteMessageBatchResult(Shape):
    Successful: Annotated[list[DeleteMessageBatchResultEntry], Wire("DeleteMessageBatchResultEntry")]
    Failed: FailedEntries


@dataclass(slots=True, kw_only=True)
class ChangeMessageVisibilityRequest(Shape):
    QueueUrl: str
    ReceiptHandle: str
    VisibilityTimeout: int


@dataclass(slots=True, kw_only=True)
class ChangeMessageVisibilityBatchRequest(Shape):
    QueueUrl: str
    Entries: Annotated[list[ChangeMessageVisibilityBatchRequestEntry], Wire("ChangeMessageVisibilityBatchRequestEntry")]


@dataclass(slots=True, kw_only=True)
class ChangeMessageVisibilityBatchResult(Shape):
    Successful: Annotated[
        list[ChangeMessageVisibilityBatchResultEntry], Wire("ChangeMessageVisibilityBatchResultEntry")
    ]
    Failed: FailedEntries


# --- message move tasks (redrive from a dead-letter queue) ---------------------------------


@dataclass(slots=True, kw_only=True)
class StartMessageMoveTaskRequest(Shape):
    SourceArn: str
    DestinationArn: str | None = None
    MaxNumberOfMessagesPerSecond: int | None = None


@dataclass(slots=True, kw_only=True)
class StartMessageMoveTaskResult(Shape):
    TaskHandle: str | None = None


@dataclass(slots=True, kw_only=True)
class ListMessageMoveTasksRequest(Shape):
    SourceArn: str
    MaxResults: int | None = None


@dataclass(slots=True, kw_only=True)
class ListMessageMoveTasksResult(Shape):
    Results: Annotated[list[ListMessageMoveTasksResultEntry] | None, Wire("ListMessageMoveTasksResultEntry")] = None


@dataclass(slots=True, kw_only=True)
class CancelMessageMoveTaskRequest(Shape):
    TaskHandle: str


@dataclass(slots=True, kw_only=True)
class CancelMessageMoveTaskResult(Shape):
    ApproximateNumberOfMessagesMoved: Long | None = None


@dataclass(frozen=True, slots=True)
class Action:
    """One SQS action: its name on the wire, its input, and its output (None: an empty answer)."""

    name: str
    request: type[Shape]
    result: type[Shape] | None


ACTIONS: Final[dict[str, Action]] = {
    action.name: action
    for action in (
        Action("CreateQueue", CreateQueueRequest, CreateQueueResult),
        Action("GetQueueUrl", GetQueueUrlRequest, GetQueueUrlResult),
        Action("ListQueues", ListQueuesRequest, ListQueuesResult),
        Action("DeleteQueue", DeleteQueueRequest, None),
        Action("GetQueueAttributes", GetQueueAttributesRequest, GetQueueAttributesResult),
        Action("SetQueueAttributes", SetQueueAttributesRequest, None),
        Action("PurgeQueue", PurgeQueueRequest, None),
        Action("SendMessage", SendMessageRequest, SendMessageResult),
        Action("SendMessageBatch", SendMessageBatchRequest, SendMessageBatchResult),
        Action("ReceiveMessage", ReceiveMessageRequest, ReceiveMessageResult),
        Action("DeleteMessage", DeleteMessageRequest, None),
        Action("DeleteMessageBatch", DeleteMessageBatchRequest, DeleteMessageBatchResult),
        Action("ChangeMessageVisibility", ChangeMessageVisibilityRequest, None),
        Action("ChangeMessageVisibilityBatch", ChangeMessageVisibilityBatchRequest, ChangeMessageVisibilityBatchResult),
        Action("TagQueue", TagQueueRequest, None),
        Action("UntagQueue", UntagQueueRequest, None),
        Action("ListQueueTags", ListQueueTagsRequest, ListQueueTagsResult),
        Action("ListDeadLetterSourceQueues", ListDeadLetterSourceQueuesRequest, ListDeadLetterSourceQueuesResult),
        Action("StartMessageMoveTask", StartMessageMoveTaskRequest, StartMessageMoveTaskResult),
        Action("ListMessageMoveTasks", ListMessageMoveTasksRequest, ListMessageMoveTasksResult),
        Action("CancelMessageMoveTask", CancelMessageMoveTaskRequest, CancelMessageMoveTaskResult),
    )
}
