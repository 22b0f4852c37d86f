"""boto3 against the served app: message attributes (typed, with their MD5s), the system
attributes SenderId, AWSTraceHeader and DeadLetterQueueSourceArn, and the same attributes seen
through REST. The digests are computed by app.sqs.checksums, which is checked against digests
recorded from SQS itself (tests/sqs/test_checksums.py), not by botocore."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlencode
from xml.etree import ElementTree

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError

from app.sqs.checksums import AttributeValue, md5_of_attributes
from tests.reads import QUEUE_TABLES
from tests.sqs.harness import REGION, Credentials, SqsServer

GIF = b"GIF89a\x00\x01\xff\xfe"
ATTRIBUTES: dict[str, dict[str, Any]] = {
    "city": {"DataType": "String", "StringValue": "Zürich ✓"},
    "count": {"DataType": "Number", "StringValue": "-12.50"},
    "width": {"DataType": "Number.int", "StringValue": "640"},
    "picture": {"DataType": "Binary.gif", "BinaryValue": GIF},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    "doc": {"DataType": "String.json", "StringValue": '{"a": 1}'},
    "trace.id": {"DataType": "String", "StringValue": "t-1"},
}
TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def traced(value: str) -> dict[str, Any]:
    """MessageSystemAttributes with this AWSTraceHeader."""
    return {"AWSTraceHeader": {"DataType": "String", "StringValue": value}}


def digest(attributes: dict[str, dict[str, Any]]) -> str | None:
    """MD5OfMessageAttributes as SQS computes it (app.sqs.checksums)."""
    return md5_of_attributes(
        {
            name: AttributeValue(value["DataType"], value.get("BinaryValue", value.get("StringValue")))
            for name, value in attributes.items()
        }
    )


def code_of(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def receive(sqs: Any, url: str, **extra: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, **extra).get("Messages", [])
    return found


def test_attributes_round_trip_with_their_digests(sqs: Any, admin: Credentials) -> None:
    url = sqs.create_queue(QueueName="typed", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody="hello",
        MessageAttributes=ATTRIBUTES,
        MessageSystemAttributes=traced(TRACE),
    )
    assert sent["MD5OfMessageAttributes"] == digest(ATTRIBUTES)
    assert sent["MD5OfMessageSystemAttributes"] == digest(traced(TRACE))
    [message] = receive(sqs, url, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
    assert message["MessageAttributes"] == ATTRIBUTES
    assert message["MD5OfMessageAttributes"] == digest(ATTRIBUTES)
    assert message["Attributes"]["SenderId"] == admin.key_id
    assert message["Attributes"]["AWSTraceHeader"] == TRACE
    assert "DeadLetterQueueSourceArn" not in message["Attributes"]
    # Only what is asked for: by name, by prefix, `.*`; none without MessageAttributeNames.
    for names, expected in (
        (["count", "nope"], {"count"}),
        (["trace.*"], {"trace.id"}),
        ([".*"], set(ATTRIBUTES)),
        (["city", "picture"], {"city", "picture"}),
    ):
        [message] = receive(sqs, url, MessageAttributeNames=names)
        chosen = {name: ATTRIBUTES[name] for name in expected}
        assert message["MessageAttributes"] == chosen, names
        assert message["MD5OfMessageAttributes"] == digest(chosen), "over the attributes returned"
    [message] = receive(sqs, url, MessageAttributeNames=["nope"])
    assert "MessageAttributes" not in message and "MD5OfMessageAttributes" not in message
    [message] = receive(sqs, url, AttributeNames=["SenderId", "AWSTraceHeader"])
    assert message["Attributes"] == {"SenderId": admin.key_id, "AWSTraceHeader": TRACE}
    assert "MessageAttributes" not in message


def test_a_message_without_attributes_answers_none(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="x")
    assert "MD5OfMessageAttributes" not in sent and "MD5OfMessageSystemAttributes" not in sent
    [message] = receive(sqs, url, MessageAttributeNames=["All"], AttributeNames=["All"])
    assert "MessageAttributes" not in message and "AWSTraceHeader" not in message["Attributes"]


def test_batch_entries_carry_their_own_attributes(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="batch")["QueueUrl"]
    entries = [
        {"Id": "a", "MessageBody": "a", "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "1"}}},
        {"Id": "b", "MessageBody": "b"},
        {"Id": "bad", "MessageBody": "c", "MessageAttributes": {"AWS.x": {"DataType": "String", "StringValue": "v"}}},
    ]
    answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    by_id = {entry["Id"]: entry for entry in answer["Successful"]}
    assert by_id["a"]["MD5OfMessageAttributes"] == digest(entries[0]["MessageAttributes"])
    assert "MD5OfMessageAttributes" not in by_id["b"]
    assert [(f["Id"], f["Code"]) for f in answer["Failed"]] == [("bad", "InvalidParameterValue")]
    got = {m["Body"]: m.get("MessageAttributes") for m in receive(sqs, url, MessageAttributeNames=["All"])}
    assert got == {"a": entries[0]["MessageAttributes"], "b": None}


@pytest.mark.parametrize(
    ("attributes", "code"),
    [
        ({f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)}, "InvalidParameterValue"),
        ({"AWS.trace": {"DataType": "String", "StringValue": "v"}}, "InvalidParameterValue"),
        ({"amazon.x": {"DataType": "String", "StringValue": "v"}}, "InvalidParameterValue"),
        ({".a": {"DataType": "String", "StringValue": "v"}}, "InvalidParameterValue"),
        ({"a.": {"DataType": "String", "StringValue": "v"}}, "InvalidParameterValue"),
        ({"a..b": {"DataType": "String", "StringValue": "v"}}, "InvalidParameterValue"),
        ({"a b": {"DataType": "String", "StringValue": "v"}}, "InvalidParameterValue"),
        ({"x" * 257: {"DataType": "String", "StringValue": "v"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "Text", "StringValue": "v"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "string", "StringValue": "v"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "Number." + "x" * 250, "StringValue": "1"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "String", "StringValue": ""}}, "InvalidParameterValue"),
        ({"a": {"DataType": "Binary", "StringValue": "v"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "String", "BinaryValue": b"v"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "Number", "StringValue": "ten"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "Number", "StringValue": "1e127"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "Number", "StringValue": "1e-129"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "Number", "StringValue": "1" * 39}}, "InvalidParameterValue"),
        ({"a": {"DataType": "Number", "StringValue": "NaN"}}, "InvalidParameterValue"),
        ({"a": {"DataType": "String", "StringListValues": ["v"]}}, "InvalidParameterValue"),
        ({"a": {"DataType": "String", "StringValue": "bad \x01"}}, "InvalidMessageContents"),
        ({"a": {"DataType": "String.x", "StringValue": "bad \ufffe"}}, "InvalidMessageContents"),
    ],
)
def test_attributes_sqs_refuses(sqs_server: SqsServer, sqs: Any, attributes: dict[str, Any], code: str) -> None:
    url = sqs.create_queue(QueueName="strict")["QueueUrl"]
    before = sqs_server.snapshot()
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=attributes)
    assert code_of(error) == code
    assert sqs_server.snapshot() == before


def test_numbers_at_the_edges_of_the_range_are_kept_as_sent(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="numbers")["QueueUrl"]
    values = {"big": "1E126", "small": "-1e-128", "zero": "0.000", "wide": "1" * 38}
    attributes = {name: {"DataType": "Number", "StringValue": value} for name, value in values.items()}
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=attributes)
    [message] = receive(sqs, url, MessageAttributeNames=["All"])
    assert message["MessageAttributes"] == attributes


def test_system_attributes_other_than_the_trace_header_are_refused(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="system")["QueueUrl"]
    for system in (
        {"SenderId": {"DataType": "String", "StringValue": "me"}},
        {"AWSTraceHeader": {"DataType": "Number", "StringValue": "1"}},
        traced(""),
    ):
        with pytest.raises(ClientError) as error:
            sqs.send_message(QueueUrl=url, MessageBody="x", MessageSystemAttributes=system)
        assert code_of(error) == "InvalidParameterValue", system


def test_attributes_count_towards_the_message_size(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="sized", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    # The body is stored as a JSON string (2 bytes of quotes); name + data type + value: 1 + 6 + n.
    body = "b" * 100
    room = 1024 - (len(body) + 2) - len("n") - len("Binary")
    sqs.send_message(
        QueueUrl=url, MessageBody=body, MessageAttributes={"n": {"DataType": "Binary", "BinaryValue": b"x" * room}}
    )
    with pytest.raises(ClientError) as error:
        sqs.send_message(
            QueueUrl=url,
            MessageBody=body,
            MessageAttributes={"n": {"DataType": "Binary", "BinaryValue": b"x" * (room + 1)}},
        )
    assert code_of(error) == "InvalidParameterValue"


def test_fifo_messages_carry_their_attributes(sqs: Any, admin: Credentials) -> None:
    url = sqs.create_queue(QueueName="typed.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    for i in range(3):
        attributes = {
            "i": {"DataType": "Number.int", "StringValue": str(i)},
            "raw": {"DataType": "Binary", "BinaryValue": bytes([i])},
        }
        sqs.send_message(
            QueueUrl=url,
            MessageBody=str(i),
            MessageGroupId="g",
            MessageDeduplicationId=str(i),
            MessageAttributes=attributes,
            MessageSystemAttributes=traced(f"t{i}"),
        )
    got = receive(sqs, url, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
    assert [m["MessageAttributes"]["i"]["StringValue"] for m in got] == ["0", "1", "2"]
    assert [m["MessageAttributes"]["raw"]["BinaryValue"] for m in got] == [b"\x00", b"\x01", b"\x02"]
    assert [m["Attributes"]["AWSTraceHeader"] for m in got] == ["t0", "t1", "t2"]
    assert {m["Attributes"]["SenderId"] for m in got} == {admin.key_id}
    assert all(m["MD5OfMessageAttributes"] == digest(m["MessageAttributes"]) for m in got)


def test_dead_letters_keep_attributes_and_name_their_source(
    sqs_server: SqsServer, sqs: Any, admin: Credentials
) -> None:
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": 1}}'
    url = sqs.create_queue(QueueName="flaky", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    source_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    attributes = {"n": {"DataType": "Number", "StringValue": "7"}, "s": {"DataType": "String", "StringValue": "v"}}
    sqs.send_message(
        QueueUrl=url, MessageBody="poison", MessageAttributes=attributes, MessageSystemAttributes=traced("t")
    )
    [first] = receive(sqs, url, VisibilityTimeout=0, AttributeNames=["All"])
    assert "DeadLetterQueueSourceArn" not in first["Attributes"]
    assert receive(sqs, url) == []
    [dead] = receive(sqs, dlq, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
    assert dead["MessageAttributes"] == attributes
    assert dead["Attributes"]["DeadLetterQueueSourceArn"] == source_arn
    assert (dead["Attributes"]["SenderId"], dead["Attributes"]["AWSTraceHeader"]) == (admin.key_id, "t")
    history = sqs_server.snapshot()[QUEUE_TABLES.index("message_history")]
    assert [(row["outcome"], row["sender_id"]) for row in history] == [("dead_lettered", admin.key_id)]
    # FIFO: dead letters leave through pqs_fifo_receive.
    fifo_dlq = sqs.create_queue(QueueName="dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    fifo_dlq_arn = sqs.get_queue_attributes(QueueUrl=fifo_dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = f'{{"deadLetterTargetArn": "{fifo_dlq_arn}", "maxReceiveCount": 1}}'
    fifo = sqs.create_queue(
        QueueName="flaky.fifo", Attributes={"FifoQueue": "true", "RedrivePolicy": policy, "VisibilityTimeout": "0"}
    )["QueueUrl"]
    sqs.send_message(
        QueueUrl=fifo, MessageBody="p", MessageGroupId="g", MessageDeduplicationId="d", MessageAttributes=attributes
    )
    assert len(receive(sqs, fifo)) == 1
    assert receive(sqs, fifo) == []
    [dead] = receive(sqs, fifo_dlq, MessageAttributeNames=["All"], AttributeNames=["DeadLetterQueueSourceArn"])
    assert dead["MessageAttributes"] == attributes
    assert dead["Attributes"] == {"DeadLetterQueueSourceArn": fifo_dlq_arn.replace("dlq.fifo", "flaky.fifo")}


def test_sqs_and_rest_see_each_others_attributes(sqs_server: SqsServer, sqs: Any, admin: Credentials) -> None:
    url = sqs.create_queue(QueueName="both", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    sqs.send_message(
        QueueUrl=url, MessageBody="from sqs", MessageAttributes=ATTRIBUTES, MessageSystemAttributes=traced(TRACE)
    )
    with sqs_server.rest(admin) as rest:
        got = rest.post("/v1/queues/both/messages/receive", json={"max_messages": 10})
        assert got.status_code == 200, got.text
        [message] = got.json()["messages"]
        assert message["attributes"] == {"city": "Zürich ✓", "trace.id": "t-1"}, "String attributes"
        assert message["attribute_types"] == {
            "count": {"data_type": "Number", "value": "-12.50"},
            "width": {"data_type": "Number.int", "value": "640"},
            "picture": {"data_type": "Binary.gif", "value": base64.b64encode(GIF).decode()},
            "blob": {"data_type": "Binary", "value": "AAE="},
            "doc": {"data_type": "String.json", "value": '{"a": 1}'},
        }
        assert (message["sender_id"], message["trace_header"]) == (admin.key_id, TRACE)
        acked = rest.post(
            "/v1/queues/both/messages/ack", json={"entries": [{"id": "1", "receipt_handle": message["receipt_handle"]}]}
        )
        assert acked.json()["failed"] == []
        sent = rest.post(
            "/v1/queues/both/messages",
            json={
                "body": "from rest",
                "attributes": {"plain": "a\u0001b"},
                "trace_header": "Root=1",
                "attribute_types": {
                    "n": {"data_type": "Number.float", "value": "2.5"},
                    "b": {"data_type": "Binary.png", "value": "iVBO"},
                },
            },
        )
        assert sent.status_code == 201, sent.text
        before = sqs_server.snapshot()
        for wrong in (
            {"attributes": {"n": "1"}, "attribute_types": {"n": {"data_type": "Number", "value": "1"}}},
            {"attribute_types": {"s": {"data_type": "String", "value": "a String goes in attributes"}}},
            {"attribute_types": {"b": {"data_type": "Binary", "value": "not base64!"}}},
            {"attribute_types": {"n": {"data_type": "Number", "value": "1e200"}}},
            {"attribute_types": {f"n{i}": {"data_type": "Number", "value": "1"} for i in range(11)}},
        ):
            refused = rest.post("/v1/queues/both/messages", json={"body": "x", **wrong})
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["code"] == "invalid_message", refused.text
        assert sqs_server.snapshot() == before
    [message] = receive(sqs, url, MessageAttributeNames=["All"], AttributeNames=["All"])
    expected = {
        "plain": {"DataType": "String", "StringValue": "a\ufffdb"},
        "n": {"DataType": "Number.float", "StringValue": "2.5"},
        "b": {"DataType": "Binary.png", "BinaryValue": base64.b64decode("iVBO")},
    }
    assert message["MessageAttributes"] == expected
    assert message["MD5OfMessageAttributes"] == digest(expected)
    assert message["Attributes"]["AWSTraceHeader"] == "Root=1"
    assert "SenderId" not in message["Attributes"], "REST sends record no sender"


def test_the_query_protocol_carries_attributes(sqs_server: SqsServer, sqs: Any, admin: Credentials) -> None:
    url = sqs.create_queue(QueueName="query")["QueueUrl"]

    def call(**params: str) -> ElementTree.Element:
        form = urlencode({**params, "QueueUrl": url, "Version": "2012-11-05"})
        request = AWSRequest(
            method="POST",
            url=sqs_server.url + "/",
            data=form,
            headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
        )
        SigV4Auth(BotoCredentials(admin.key_id, admin.secret), "sqs", REGION).add_auth(request)
        answer = httpx.post(sqs_server.url + "/", content=form, headers=dict(request.headers.items()))
        assert answer.status_code == 200, answer.text
        return ElementTree.fromstring(answer.content)

    sent = call(
        Action="SendMessage",
        MessageBody="q",
        **{
            "MessageAttribute.1.Name": "n",
            "MessageAttribute.1.Value.DataType": "Number.int",
            "MessageAttribute.1.Value.StringValue": "5",
            "MessageAttribute.2.Name": "b",
            "MessageAttribute.2.Value.DataType": "Binary",
            "MessageAttribute.2.Value.BinaryValue": base64.b64encode(b"\x00\xff").decode(),
        },
    )
    ns = "{http://queue.amazonaws.com/doc/2012-11-05/}"
    expected = {
        "n": {"DataType": "Number.int", "StringValue": "5"},
        "b": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
    }
    assert sent.findtext(f".//{ns}MD5OfMessageAttributes") == digest(expected)
    got = call(Action="ReceiveMessage", **{"MessageAttributeName.1": "All"})
    found = {}
    for element in got.iter(f"{ns}MessageAttribute"):
        name = element.findtext(f"{ns}Name")
        value = element.find(f"{ns}Value")
        assert name is not None and value is not None
        data_type = value.findtext(f"{ns}DataType")
        binary = value.findtext(f"{ns}BinaryValue")
        found[name] = {
            "DataType": data_type,
            **(
                {"BinaryValue": base64.b64decode(binary)}
                if binary
                else {"StringValue": value.findtext(f"{ns}StringValue")}
            ),
        }
    assert found == expected
    assert got.findtext(f".//{ns}MD5OfMessageAttributes") == digest(expected)
