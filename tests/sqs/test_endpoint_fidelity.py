"""boto3 against the served app: answers where PQS follows what SQS does rather than what its
model alone says (docs/sqs.md, "Fidelity")."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

FIFO = {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
ENDED = "Reason: Message does not exist or is not available for visibility timeout change."


def error_of(error: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    return str(error.value.response["Error"]["Code"]), str(error.value.response["Error"]["Message"])


def test_fifo_send_without_a_group_id_is_a_missing_parameter(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs.fifo", Attributes=FIFO)["QueueUrl"]
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="x")
    assert error_of(error) == ("MissingParameter", "The request must contain the parameter MessageGroupId.")
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}])
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in sent["Failed"]] == [("a", "MissingParameter", True)]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert got["ApproximateNumberOfMessages"] == "0"


def test_changing_the_visibility_of_an_ended_delivery(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(i)} for i in range(3)])
    acked, expired, held = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3, VisibilityTimeout=600)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=acked["ReceiptHandle"])
    # A timeout of 0 ends the delivery at once: its receipt has expired.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=expired["ReceiptHandle"], VisibilityTimeout=0)
    for ended in (acked, expired):
        handle = ended["ReceiptHandle"]
        with pytest.raises(ClientError) as error:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=60)
        assert error_of(error) == (
            "InvalidParameterValue",
            f"Value {handle} for parameter ReceiptHandle is invalid. {ENDED}",
        )
        assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    changed = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "acked", "ReceiptHandle": acked["ReceiptHandle"], "VisibilityTimeout": 60},
            {"Id": "held", "ReceiptHandle": held["ReceiptHandle"], "VisibilityTimeout": 60},
        ],
    )
    assert [e["Id"] for e in changed["Successful"]] == ["held"]
    assert [(e["Id"], e["Code"]) for e in changed["Failed"]] == [("acked", "ReceiptHandleIsInvalid")]


def test_a_retried_receive_attempt_answers_the_same_and_resets_the_timeout(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs.fifo", Attributes=FIFO)["QueueUrl"]
    for n in range(2):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{n}", MessageGroupId="g")
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, ReceiveRequestAttemptId="try-1")["Messages"]
    assert [m["Body"] for m in first] == ["m0", "m1"]
    # The retry answers the same messages under the same handles, hidden for the retry's own
    # timeout from now: 0 here, so they are receivable at once (not in 30 seconds).
    again = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, ReceiveRequestAttemptId="try-1", VisibilityTimeout=0
    )["Messages"]
    assert [(m["MessageId"], m["ReceiptHandle"]) for m in again] == [
        (m["MessageId"], m["ReceiptHandle"]) for m in first
    ]
    after = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"])
    assert [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in after["Messages"]] == [
        ("m0", "2"),
        ("m1", "2"),
    ]
