"""boto3 against the served app: the SQS message actions, FIFO rules, batches, and the same
messages seen through REST."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sqs.harness import Credentials, SqsServer


def code_of(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def bodies(sqs: Any, url: str, count: int = 10, **extra: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=count, **extra).get(
        "Messages", []
    )
    return messages


def test_send_receive_delete(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    text = "héllo\r\nwörld ✓"
    sent = sqs.send_message(QueueUrl=url, MessageBody=text)
    assert sent["MD5OfMessageBody"] == hashlib.md5(text.encode()).hexdigest()
    assert "SequenceNumber" not in sent
    [message] = bodies(sqs, url, AttributeNames=["All"])
    assert (message["Body"], message["MessageId"]) == (text, sent["MessageId"])
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    attributes = message["Attributes"]
    assert attributes["ApproximateReceiveCount"] == "1"
    assert abs(int(attributes["SentTimestamp"]) - time.time() * 1000) < 60_000
    assert int(attributes["ApproximateFirstReceiveTimestamp"]) >= int(attributes["SentTimestamp"])
    assert "MessageGroupId" not in attributes
    assert bodies(sqs, url) == [], "in flight"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (got["ApproximateNumberOfMessages"], got["ApproximateNumberOfMessagesNotVisible"]) == ("0", "0")


def test_receive_limits_and_visibility(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="limits")["QueueUrl"]
    for bad in ({"MaxNumberOfMessages": 11}, {"MaxNumberOfMessages": 0}, {"WaitTimeSeconds": 21}):
        with pytest.raises(ClientError) as error:
            sqs.receive_message(QueueUrl=url, **bad)
        assert code_of(error) == "InvalidParameterValue", bad
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": f"e{i}", "MessageBody": str(i)} for i in range(10)])
    first = bodies(sqs, url, 10, VisibilityTimeout=60)
    assert sorted(m["Body"] for m in first) == [str(i) for i in range(10)]
    # Visible again at once (timeout 0), then hidden again.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"], VisibilityTimeout=0)
    entries = [{"Id": f"v{i}", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0} for i, m in
               enumerate(first[1:3])]  # fmt: skip
    changed = sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
    assert sorted(e["Id"] for e in changed["Successful"]) == ["v0", "v1"] and not changed.get("Failed")
    again = bodies(sqs, url, 10)
    assert sorted(m["Body"] for m in again) == sorted(m["Body"] for m in first[:3])


def test_an_empty_long_poll_waits_its_time(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="poll")["QueueUrl"]
    started = time.monotonic()
    assert bodies(sqs, url, 1, WaitTimeSeconds=1) == []
    assert 0.8 < time.monotonic() - started < 10


def test_batches_report_partial_failures(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="groups.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sent = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "d1"},
            {"Id": "no-group", "MessageBody": "b", "MessageDeduplicationId": "d2"},
            {"Id": "no-dedup", "MessageBody": "c", "MessageGroupId": "g"},
        ],
    )
    assert [e["Id"] for e in sent["Successful"]] == ["ok"]
    assert len(sent["Successful"][0]["SequenceNumber"]) == 20
    failed = {e["Id"]: e for e in sent["Failed"]}
    assert set(failed) == {"no-group", "no-dedup"}
    assert all(e["SenderFault"] for e in failed.values())
    assert (failed["no-group"]["Code"], failed["no-dedup"]["Code"]) == ("MissingParameter", "InvalidParameterValue")
    [message] = bodies(sqs, url)
    deleted = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": "good", "ReceiptHandle": message["ReceiptHandle"]}, {"Id": "bad", "ReceiptHandle": "nope"}],
    )
    assert [e["Id"] for e in deleted["Successful"]] == ["good"]
    assert [(e["Id"], e["Code"]) for e in deleted["Failed"]] == [("bad", "ReceiptHandleIsInvalid")]
    for entries, code in (
        ([], "AWS.SimpleQueueService.EmptyBatchRequest"),
        (
            [{"Id": str(i), "ReceiptHandle": "x"} for i in range(11)],
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        ),
        ([{"Id": "same", "ReceiptHandle": "x"}] * 2, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"),
        ([{"Id": "not ok!", "ReceiptHandle": "x"}], "AWS.SimpleQueueService.InvalidBatchEntryId"),
    ):
        with pytest.raises(ClientError) as error:
            sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        assert code_of(error) == code


def test_receipt_handle_errors(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="handles")["QueueUrl"]
    for call in (
        lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle"),
        lambda: sqs.change_message_visibility(QueueUrl=url, ReceiptHandle="not-a-handle", VisibilityTimeout=5),
    ):
        with pytest.raises(ClientError) as error:
            call()
        assert code_of(error) == "ReceiptHandleIsInvalid"


def test_fifo_group_order_and_exclusivity(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="order.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    for i in range(4):
        for group in ("a", "b"):
            sqs.send_message(QueueUrl=url, MessageBody=f"{group}{i}", MessageGroupId=group,
                             MessageDeduplicationId=f"{group}-{i}")  # fmt: skip
    first = bodies(sqs, url, 10, AttributeNames=["MessageGroupId", "SequenceNumber", "MessageDeduplicationId"])
    assert [m["Body"] for m in first if m["Body"][0] == "a"] == ["a0", "a1", "a2", "a3"]
    assert [m["Body"] for m in first if m["Body"][0] == "b"] == ["b0", "b1", "b2", "b3"]
    assert {m["Attributes"]["MessageGroupId"] for m in first} == {"a", "b"}
    assert first[0]["Attributes"]["MessageDeduplicationId"] in {"a-0", "b-0"}
    # Both groups are in flight: nothing more until they are finished.
    assert bodies(sqs, url) == []
    sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in
                                                    enumerate(first)])  # fmt: skip
    assert bodies(sqs, url) == []


def test_a_fifo_message_made_visible_is_served_once_the_rest_of_its_receive_is_deleted(sqs: Any) -> None:
    """A worker's usual retry: ChangeMessageVisibility 0 on the message that failed, DeleteMessage
    on the others of its receive. The group is then free: the retry is served at once, not when
    the receive's visibility timeout (an hour here) runs out."""
    url = sqs.create_queue(QueueName="retry.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g", MessageDeduplicationId=str(i))
    got = bodies(sqs, url, VisibilityTimeout=3600)
    assert [m["Body"] for m in got] == ["m0", "m1", "m2"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"], VisibilityTimeout=0)
    assert bodies(sqs, url) == []  # m1 and m2 still hold the group
    sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in
                                                    enumerate(got[1:])])  # fmt: skip
    assert [m["Body"] for m in bodies(sqs, url)] == ["m0"]


def test_fifo_deduplication(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="dedup.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    one = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="same")
    two = sqs.send_message(QueueUrl=url, MessageBody="y", MessageGroupId="g", MessageDeduplicationId="same")
    assert one["MessageId"] == two["MessageId"]
    content = sqs.create_queue(
        QueueName="content.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    first = sqs.send_message(QueueUrl=content, MessageBody="body", MessageGroupId="g")
    assert sqs.send_message(QueueUrl=content, MessageBody="body", MessageGroupId="g")["MessageId"] == first["MessageId"]
    assert (
        sqs.send_message(QueueUrl=content, MessageBody="other", MessageGroupId="g")["MessageId"] != first["MessageId"]
    )
    scoped = sqs.create_queue(
        QueueName="scoped.fifo", Attributes={"FifoQueue": "true", "DeduplicationScope": "messageGroup"}
    )["QueueUrl"]
    a = sqs.send_message(QueueUrl=scoped, MessageBody="1", MessageGroupId="a", MessageDeduplicationId="d")
    b = sqs.send_message(QueueUrl=scoped, MessageBody="2", MessageGroupId="b", MessageDeduplicationId="d")
    assert a["MessageId"] != b["MessageId"], "the same id in another group is another message"
    got = sqs.get_queue_attributes(QueueUrl=scoped, AttributeNames=["ApproximateNumberOfMessages"])
    assert got["Attributes"]["ApproximateNumberOfMessages"] == "2"


def test_bodies_sqs_refuses(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="typed")["QueueUrl"]
    before = sqs_server.snapshot()
    for body, code in (("", "MissingParameter"), ("bad \x01 char", "InvalidMessageContents")):
        with pytest.raises(ClientError) as error:
            sqs.send_message(QueueUrl=url, MessageBody=body)
        assert code_of(error) == code
    assert sqs_server.snapshot() == before


def test_sqs_and_rest_see_the_same_messages(sqs_server: SqsServer, sqs: Any, admin: Credentials) -> None:
    url = sqs.create_queue(QueueName="both")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody='{"not": "parsed"}')
    with sqs_server.rest(admin) as rest:
        got = rest.post("/v1/queues/both/messages/receive", json={"max_messages": 10})
        assert got.status_code == 200, got.text
        [message] = got.json()["messages"]
        assert message["body"] == '{"not": "parsed"}', "an SQS body is a JSON string to REST"
        acked = rest.post("/v1/queues/both/messages/ack",
                          json={"entries": [{"id": "1", "receipt_handle": message["receipt_handle"]}]})  # fmt: skip
        assert acked.json()["failed"] == []
        for body in ({"b": [1, 2.5, None], "a": "é"}, "plain text", 7):
            assert rest.post("/v1/queues/both/messages", json={"body": body}).status_code == 201
    received = bodies(sqs, url)
    assert sorted(m["Body"] for m in received) == sorted(['{"a":"é","b":[1,2.5,null]}', "plain text", "7"])
    for m in received:
        assert m["MD5OfBody"] == hashlib.md5(m["Body"].encode()).hexdigest()


def test_dead_letters_after_max_receive_count(sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = f'{{"deadLetterTargetArn": "{arn}", "maxReceiveCount": 2}}'
    url = sqs.create_queue(QueueName="flaky", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    for _ in range(2):
        [message] = bodies(sqs, url, VisibilityTimeout=0)
        assert message["Body"] == "poison"
    assert bodies(sqs, url) == []
    [dead] = bodies(sqs, dlq)
    assert dead["Body"] == "poison"


def test_a_dead_letter_names_its_source_only_to_a_key_that_may_know_it(sqs_server: SqsServer, sqs: Any) -> None:
    """DeadLetterQueueSourceArn names another queue than the one received from: a key with no
    right at all on that queue is not told it exists (as ListDeadLetterSourceQueues and
    ListMessageMoveTasks do not tell it), one that may do something there is."""
    dlq = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = f'{{"deadLetterTargetArn": "{arn}", "maxReceiveCount": 1}}'
    url = sqs.create_queue(QueueName="hidden-src", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    assert [m["Body"] for m in bodies(sqs, url, VisibilityTimeout=0)] == ["poison"]
    assert bodies(sqs, url) == []  # dead-lettered
    for scopes, named in ((("jobs-dlq:receive",), False), (("jobs-dlq:receive", "hidden-src:send"), True)):
        worker = sqs_server.client(sqs_server.key(*scopes))
        [dead] = bodies(worker, dlq, AttributeNames=["All"], VisibilityTimeout=0)
        assert dead["Body"] == "poison"
        source = dead["Attributes"].get("DeadLetterQueueSourceArn")
        assert source == (arn.replace("jobs-dlq", "hidden-src") if named else None), (scopes, dead["Attributes"])


def test_a_rest_body_sqs_cannot_carry_reaches_sqs_clients_replaced(
    sqs_server: SqsServer, sqs: Any, admin: Credentials
) -> None:
    """JSON carries U+0001 and U+FFFE, SQS and XML 1.0 do not: both protocols answer 200 with
    U+FFFD in their place, and the digest is over the text sent."""
    from urllib.parse import urlencode
    from xml.etree import ElementTree

    import httpx
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    from tests.sqs.harness import REGION

    url = sqs.create_queue(QueueName="controls", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    with sqs_server.rest(admin) as rest:
        assert rest.post("/v1/queues/controls/messages", json={"body": "a\u0001b\ufffec"}).status_code == 201
    [message] = bodies(sqs, url)
    assert message["Body"] == "a\ufffdb\ufffdc"
    assert message["MD5OfBody"] == hashlib.md5(message["Body"].encode()).hexdigest()
    # The query protocol answers in XML.
    form = urlencode({"Action": "ReceiveMessage", "QueueUrl": url, "Version": "2012-11-05"})
    request = AWSRequest(method="POST", url=sqs_server.url + "/", data=form,
                         headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})  # fmt: skip
    SigV4Auth(BotoCredentials(admin.key_id, admin.secret), "sqs", REGION).add_auth(request)
    answer = httpx.post(sqs_server.url + "/", content=form, headers=dict(request.headers.items()))
    assert answer.status_code == 200, answer.text
    found = ElementTree.fromstring(answer.content).iter("{http://queue.amazonaws.com/doc/2012-11-05/}Body")
    assert [element.text for element in found] == ["a\ufffdb\ufffdc"]
