"""boto3 against the served app: the SQS queue actions, their attributes and their errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sqs.harness import ACCOUNT, REGION, Credentials, SqsServer


def code_of(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_create_get_url_list_delete(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    assert url == f"{sqs_server.url}/{ACCOUNT}/jobs"
    assert sqs.get_queue_url(QueueName="jobs")["QueueUrl"] == url
    assert sqs.list_queues()["QueueUrls"] == [url]
    sqs.delete_queue(QueueUrl=url)
    assert "QueueUrls" not in sqs.list_queues()
    with pytest.raises(ClientError) as error:
        sqs.get_queue_url(QueueName="jobs")
    assert code_of(error) == "AWS.SimpleQueueService.NonExistentQueue"
    assert error.value.response["Error"]["QueryErrorCode"] == "QueueDoesNotExist"


def test_create_is_idempotent_with_the_same_attributes(sqs: Any) -> None:
    attributes = {"VisibilityTimeout": "45", "DelaySeconds": "2"}
    first = sqs.create_queue(QueueName="same", Attributes=attributes)["QueueUrl"]
    assert sqs.create_queue(QueueName="same", Attributes=attributes)["QueueUrl"] == first
    with pytest.raises(ClientError) as error:
        sqs.create_queue(QueueName="same", Attributes={"VisibilityTimeout": "46", "DelaySeconds": "2"})
    assert code_of(error) == "QueueAlreadyExists"


def test_fifo_queues_are_named_dot_fifo(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="orders.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    assert url.endswith("/orders.fifo")
    # A .fifo name without FifoQueue, and FifoQueue on a name without .fifo: both refused.
    for name, attributes in (("other.fifo", {}), ("plain", {"FifoQueue": "true"})):
        with pytest.raises(ClientError) as error:
            sqs.create_queue(QueueName=name, Attributes=attributes)
        assert code_of(error) == "InvalidParameterValue"
    with pytest.raises(ClientError) as error:
        sqs.create_queue(QueueName="bad name")
    assert code_of(error) == "InvalidParameterValue"


def test_attributes_all_and_by_name(sqs: Any) -> None:
    url = sqs.create_queue(
        QueueName="attrs.fifo",
        Attributes={
            "FifoQueue": "true",
            "ContentBasedDeduplication": "true",
            "DeduplicationScope": "messageGroup",
            "VisibilityTimeout": "40",
            "MessageRetentionPeriod": "3600",
            "MaximumMessageSize": "2048",
            "ReceiveMessageWaitTimeSeconds": "3",
        },
    )["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="one", MessageGroupId="g")
    every = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert every["QueueArn"] == f"arn:aws:sqs:{REGION}:{ACCOUNT}:attrs.fifo"
    assert every["FifoQueue"] == "true" and every["ContentBasedDeduplication"] == "true"
    assert every["DeduplicationScope"] == "messageGroup"
    assert (every["VisibilityTimeout"], every["MessageRetentionPeriod"]) == ("40", "3600")
    assert (every["MaximumMessageSize"], every["ReceiveMessageWaitTimeSeconds"], every["DelaySeconds"]) == (
        "2048",
        "3",
        "0",
    )
    assert every["ApproximateNumberOfMessages"] == "1"
    assert every["ApproximateNumberOfMessagesNotVisible"] == "0"
    assert every["ApproximateNumberOfMessagesDelayed"] == "0"
    assert int(every["CreatedTimestamp"]) <= int(every["LastModifiedTimestamp"]) + 1
    some = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn", "VisibilityTimeout"])["Attributes"]
    assert set(some) == {"QueueArn", "VisibilityTimeout"}
    with pytest.raises(ClientError) as error:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["NoSuchAttribute"])
    assert code_of(error) == "InvalidAttributeName"


def test_set_attributes_and_redrive_policy(sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName="dead")["QueueUrl"]
    url = sqs.create_queue(QueueName="work")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "90", "RedrivePolicy": policy})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert got["VisibilityTimeout"] == "90"
    assert json.loads(got["RedrivePolicy"]) == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}
    for attributes, code in (
        ({"VisibilityTimeout": "99999"}, "InvalidAttributeValue"),
        ({"VisibilityTimeout": "soon"}, "InvalidAttributeValue"),
        ({"FifoQueue": "true"}, "InvalidAttributeValue"),
        ({"Policy": "{}"}, "InvalidAttributeName"),
    ):
        with pytest.raises(ClientError) as error:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
        assert code_of(error) == code, attributes
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"] == {
        "VisibilityTimeout": "90"
    }


def test_list_queues_prefix_and_pages(sqs: Any) -> None:
    names = [f"batch-{i}" for i in range(5)] + ["other"]
    for name in names:
        sqs.create_queue(QueueName=name)
    assert [u.rsplit("/", 1)[1] for u in sqs.list_queues(QueueNamePrefix="batch-")["QueueUrls"]] == names[:5]
    seen: list[str] = []
    token: dict[str, str] = {}
    for _ in range(10):
        page = sqs.list_queues(QueueNamePrefix="batch-", MaxResults=2, **token)
        seen += [u.rsplit("/", 1)[1] for u in page["QueueUrls"]]
        if "NextToken" not in page:
            break
        token = {"NextToken": page["NextToken"]}
    assert seen == names[:5]


def test_purge_and_errors_on_missing_queues(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="purged")["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)])
    sqs.purge_queue(QueueUrl=url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    missing = f"{sqs_server.url}/{ACCOUNT}/nowhere"
    for call in (
        lambda: sqs.purge_queue(QueueUrl=missing),
        lambda: sqs.delete_queue(QueueUrl=missing),
        lambda: sqs.send_message(QueueUrl=missing, MessageBody="x"),
        lambda: sqs.get_queue_attributes(QueueUrl=f"{sqs_server.url}/111111111111/purged"),
    ):
        with pytest.raises(ClientError) as error:
            call()
        assert code_of(error) == "AWS.SimpleQueueService.NonExistentQueue"


def test_redrive_allow_policy_decides_which_queues_may_use_a_dead_letter_queue(
    sqs_server: SqsServer, sqs: Any, admin: Credentials
) -> None:
    def arn(name: str) -> str:
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"

    def policy(dlq: str) -> dict[str, str]:
        return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn(dlq), "maxReceiveCount": 2})}

    allow = {"redrivePermission": "byQueue", "sourceQueueArns": [arn("orders"), arn("later")]}
    dlq = sqs.create_queue(QueueName="orders-dlq", Attributes={"RedriveAllowPolicy": json.dumps(allow)})["QueueUrl"]
    got = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["All"])["Attributes"]
    assert json.loads(got["RedriveAllowPolicy"]) == {
        "redrivePermission": "byQueue",
        "sourceQueueArns": [arn("later"), arn("orders")],
    }
    sqs.create_queue(QueueName="orders", Attributes=policy("orders-dlq"))
    with pytest.raises(ClientError) as error:
        sqs.create_queue(QueueName="billing", Attributes=policy("orders-dlq"))
    assert code_of(error) == "InvalidAttributeValue"
    with sqs_server.rest(admin) as rest:
        assert rest.get("/v1/queues/billing").status_code == 404
        assert rest.get("/v1/queues/orders-dlq").json()["dead_letter_for"] == ["later", "orders"]

    # denyAll: no queue may; allowAll: any queue may (and GetQueueAttributes shows none).
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": '{"redrivePermission":"denyAll"}'})
    got = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["RedriveAllowPolicy"])["Attributes"]
    assert json.loads(got["RedriveAllowPolicy"]) == {"redrivePermission": "denyAll"}
    with pytest.raises(ClientError):
        sqs.create_queue(QueueName="later", Attributes=policy("orders-dlq"))
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": '{"redrivePermission":"allowAll"}'})
    assert "RedriveAllowPolicy" not in sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["All"])["Attributes"]
    sqs.create_queue(QueueName="billing", Attributes=policy("orders-dlq"))

    before = sqs_server.snapshot()
    for bad in (
        "{",
        "[]",
        '{"redrivePermission":"maybe"}',
        '{"redrivePermission":"byQueue"}',
        '{"redrivePermission":"byQueue","sourceQueueArns":[]}',
        json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": [arn(f"q{i}") for i in range(11)]}),
        json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": [7]}),
        json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": ["orders"]}),
        json.dumps({"redrivePermission": "denyAll", "sourceQueueArns": [arn("orders")]}),
    ):
        with pytest.raises(ClientError) as error:
            sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": bad})
        assert code_of(error) == "InvalidParameterValue", bad
    assert sqs_server.snapshot() == before


def test_a_bad_redrive_policy_says_why_as_sqs_does(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="source")["QueueUrl"]
    with pytest.raises(ClientError) as error:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": "{}"})
    assert code_of(error) == "InvalidParameterValue"
    assert error.value.response["Error"]["Message"] == (
        "Value {} for parameter RedrivePolicy is invalid. Reason: Redrive policy does not contain mandatory"
        " attribute: deadLetterTargetArn."
    )
