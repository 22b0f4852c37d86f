from __future__ import annotations

from typing import Any


def test_smoke(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    assert url.endswith("/000000000000/jobs")
    sent = sqs.send_message(QueueUrl=url, MessageBody="hello")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
    [message] = got["Messages"]
    assert message["Body"] == "hello" and message["MessageId"] == sent["MessageId"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
