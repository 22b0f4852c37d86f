"""One input and one output of every action, with the awkward values a wire must carry: text
beyond ASCII, XML's special characters, carriage returns and line feeds, binary values."""

from __future__ import annotations

from typing import Any

from app.sqs import shapes as s

URL = "http://127.0.0.1:9324/000000000000/orders.fifo"
ARN = "arn:aws:sqs:us-east-1:000000000000:orders-dlq.fifo"
AWKWARD = "<a href=\"x\">&amp;</a> 'q' \r\n\tline\rcr é ü 漢字 🙂"

ATTRIBUTES: dict[str, Any] = {
    "text": {"DataType": "String", "StringValue": AWKWARD},
    "n": {"DataType": "Number.float", "StringValue": "-1.5e3"},
    "blob": {"DataType": "Binary.png", "BinaryValue": b"\x00\x01\xfe\xff<&>"},
}

INPUTS: dict[str, dict[str, Any]] = {
    "CreateQueue": {
        "QueueName": "orders.fifo",
        "Attributes": {
            "FifoQueue": "true",
            "RedrivePolicy": '{"deadLetterTargetArn":"' + ARN + '","maxReceiveCount":"3"}',
        },
        "tags": {"team": "pay & ship", "env": "<prod>"},
    },
    "GetQueueUrl": {"QueueName": "orders.fifo", "QueueOwnerAWSAccountId": "000000000000"},
    "ListQueues": {"QueueNamePrefix": "ord", "NextToken": "tok+/=", "MaxResults": 1000},
    "DeleteQueue": {"QueueUrl": URL},
    "GetQueueAttributes": {"QueueUrl": URL, "AttributeNames": ["All", "QueueArn"]},
    "SetQueueAttributes": {"QueueUrl": URL, "Attributes": {"VisibilityTimeout": "45", "DelaySeconds": "0"}},
    "PurgeQueue": {"QueueUrl": URL},
    "SendMessage": {
        "QueueUrl": URL,
        "MessageBody": AWKWARD,
        "DelaySeconds": 0,
        "MessageAttributes": ATTRIBUTES,
        "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-5759e988"}},
        "MessageDeduplicationId": "dedup-1",
        "MessageGroupId": "group-1",
    },
    "SendMessageBatch": {
        "QueueUrl": URL,
        "Entries": [
            {"Id": "m1", "MessageBody": "first", "MessageGroupId": "g", "MessageAttributes": ATTRIBUTES},
            {"Id": "m2", "MessageBody": AWKWARD, "DelaySeconds": 5, "MessageDeduplicationId": "d2"},
        ],
    },
    "ReceiveMessage": {
        "QueueUrl": URL,
        "AttributeNames": ["All"],
        "MessageAttributeNames": ["text", "blob.*"],
        "MaxNumberOfMessages": 10,
        "VisibilityTimeout": 30,
        "WaitTimeSeconds": 20,
        "ReceiveRequestAttemptId": "attempt-1",
    },
    "DeleteMessage": {"QueueUrl": URL, "ReceiptHandle": "rh+/=="},
    "DeleteMessageBatch": {
        "QueueUrl": URL,
        "Entries": [{"Id": "a", "ReceiptHandle": "rh-a"}, {"Id": "b", "ReceiptHandle": "rh-b"}],
    },
    "ChangeMessageVisibility": {"QueueUrl": URL, "ReceiptHandle": "rh", "VisibilityTimeout": 0},
    "ChangeMessageVisibilityBatch": {
        "QueueUrl": URL,
        "Entries": [
            {"Id": "a", "ReceiptHandle": "rh-a", "VisibilityTimeout": 43200},
            {"Id": "b", "ReceiptHandle": "rh-b"},
        ],
    },
    "TagQueue": {"QueueUrl": URL, "Tags": {"team": "pay", "cost-center": "42"}},
    "UntagQueue": {"QueueUrl": URL, "TagKeys": ["team", "cost-center"]},
    "ListQueueTags": {"QueueUrl": URL},
    "ListDeadLetterSourceQueues": {"QueueUrl": URL, "NextToken": "t", "MaxResults": 5},
    "StartMessageMoveTask": {"SourceArn": ARN, "DestinationArn": ARN, "MaxNumberOfMessagesPerSecond": 50},
    "ListMessageMoveTasks": {"SourceArn": ARN, "MaxResults": 10},
    "CancelMessageMoveTask": {"TaskHandle": "handle=="},
}

_VALUE = s.MessageAttributeValue

OUTPUTS: dict[str, s.Shape | None] = {
    "CreateQueue": s.CreateQueueResult(QueueUrl=URL),
    "GetQueueUrl": s.GetQueueUrlResult(QueueUrl=URL),
    "ListQueues": s.ListQueuesResult(QueueUrls=[URL, URL + "2"], NextToken="next<&>"),
    "DeleteQueue": None,
    "GetQueueAttributes": s.GetQueueAttributesResult(
        Attributes={"QueueArn": ARN, "ApproximateNumberOfMessages": "7", "Policy": AWKWARD}
    ),
    "SetQueueAttributes": None,
    "PurgeQueue": None,
    "SendMessage": s.SendMessageResult(
        MD5OfMessageBody="0" * 32,
        MD5OfMessageAttributes="1" * 32,
        MD5OfMessageSystemAttributes="2" * 32,
        MessageId="5fea7756-0ea4-451a-a703-a558b933e274",
        SequenceNumber="18849496460467696128",
    ),
    "SendMessageBatch": s.SendMessageBatchResult(
        Successful=[s.SendMessageBatchResultEntry(Id="m1", MessageId="id-1", MD5OfMessageBody="0" * 32)],
        Failed=[
            s.BatchResultErrorEntry(Id="m2", SenderFault=True, Code="InvalidParameterValue", Message=AWKWARD),
            s.BatchResultErrorEntry(Id="m3", SenderFault=False, Code="InternalError"),
        ],
    ),
    "ReceiveMessage": s.ReceiveMessageResult(
        Messages=[
            s.Message(
                MessageId="id-1",
                ReceiptHandle="rh+/==",
                MD5OfBody="0" * 32,
                Body=AWKWARD,
                Attributes={"SentTimestamp": "1700000000000", "MessageGroupId": "g"},
                MD5OfMessageAttributes="1" * 32,
                MessageAttributes={
                    "text": _VALUE(DataType="String", StringValue=AWKWARD),
                    "blob": _VALUE(DataType="Binary", BinaryValue=b"\x00\xff"),
                },
            ),
            s.Message(MessageId="id-2", ReceiptHandle="rh2", MD5OfBody="3" * 32, Body="{}"),
        ]
    ),
    "DeleteMessage": None,
    "DeleteMessageBatch": s.DeleteMessageBatchResult(
        Successful=[s.DeleteMessageBatchResultEntry(Id="a")],
        Failed=[s.BatchResultErrorEntry(Id="b", SenderFault=True, Code="ReceiptHandleIsInvalid", Message="no")],
    ),
    "ChangeMessageVisibility": None,
    "ChangeMessageVisibilityBatch": s.ChangeMessageVisibilityBatchResult(
        Successful=[
            s.ChangeMessageVisibilityBatchResultEntry(Id="a"),
            s.ChangeMessageVisibilityBatchResultEntry(Id="b"),
        ],
        Failed=[],
    ),
    "TagQueue": None,
    "UntagQueue": None,
    "ListQueueTags": s.ListQueueTagsResult(Tags={"team": "pay & ship", "env": "<prod>"}),
    "ListDeadLetterSourceQueues": s.ListDeadLetterSourceQueuesResult(queueUrls=[URL], NextToken="n"),
    "StartMessageMoveTask": s.StartMessageMoveTaskResult(TaskHandle="handle=="),
    "ListMessageMoveTasks": s.ListMessageMoveTasksResult(
        Results=[
            s.ListMessageMoveTasksResultEntry(
                TaskHandle="h",
                Status="RUNNING",
                SourceArn=ARN,
                DestinationArn=ARN,
                MaxNumberOfMessagesPerSecond=50,
                ApproximateNumberOfMessagesMoved=2**40,
                ApproximateNumberOfMessagesToMove=2**40 + 1,
                StartedTimestamp=1700000000000,
            ),
            s.ListMessageMoveTasksResultEntry(Status="FAILED", FailureReason="AccessDenied"),
        ]
    ),
    "CancelMessageMoveTask": s.CancelMessageMoveTaskResult(ApproximateNumberOfMessagesMoved=0),
}
