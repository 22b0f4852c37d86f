"""A careless or hostile client against today's surfaces: REST peek (GET /v1/queues/{name}/messages),
the REST attribute `dead_letter_for`, the SQS move-task actions and SQS message attributes.
Each probe: no 5xx, the error in its API's shape, and a refusal changes nothing in the database."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.sqs.harness import ACCOUNT, REGION, Credentials, SqsServer


def arn(name: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:sqs:{REGION}:{account}:{name}"


Opener = Callable[[httpx.Client], httpx.Client]


@pytest.fixture
def opened() -> Iterator[Opener]:
    """Closes every REST client a test opens (an unclosed socket fails the test)."""
    clients: list[httpx.Client] = []

    def keep(client: httpx.Client) -> httpx.Client:
        clients.append(client)
        return client

    yield keep
    for client in clients:
        client.close()


def rest_refused(response: httpx.Response, status: int | None = None) -> dict[str, Any]:
    """A REST refusal: a 4xx (this one when given) in the house error shape."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    if status is not None:
        assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str)
    return dict(error)


def sqs_refused(server: SqsServer, call: Callable[[], Any]) -> tuple[str, int]:
    """An SQS refusal that changed nothing: its error code and HTTP status (a 4xx)."""
    before = server.snapshot()
    with pytest.raises(ClientError) as error:
        call()
    response = error.value.response
    status = int(response["ResponseMetadata"]["HTTPStatusCode"])
    assert 400 <= status < 500, response
    assert response["Error"]["Code"] and "Message" in response["Error"]
    assert server.snapshot() == before
    return str(response["Error"]["Code"]), status


# --- 1. REST peek ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=-1",
        "limit=10.5",
        "limit=1e3",
        "limit=" + "9" * 400,
        "limit=-" + "9" * 5000,
        "limit=NaN",
        "limit=",
        "limit=%00",
        "limit=1&limit=99999",
        "limit=%EF%BC%91",  # a fullwidth digit one
    ],
)
def test_peek_refuses_limits_it_does_not_take(
    sqs_server: SqsServer, opened: Opener, admin: Credentials, query: str
) -> None:
    rest = opened(sqs_server.rest(admin))
    assert rest.put("/v1/queues/peeked", json={}).status_code in (200, 201)
    rest.post("/v1/queues/peeked/messages", json={"body": {"n": 1}})
    before = sqs_server.snapshot()
    response = rest.get(f"/v1/queues/peeked/messages?{query}")
    if response.status_code == 200:  # a repeated parameter may take its first value
        assert query.startswith("limit=1&")
    else:
        rest_refused(response, 400)
    assert sqs_server.snapshot() == before


@pytest.mark.parametrize("name", ["a%00b", "a%0D%0Ab", "a%0Ab", "%20", "x" * 81, "..", "a%2Fb", "%C2%A0"])
def test_peek_refuses_names_no_queue_has(sqs_server: SqsServer, opened: Opener, admin: Credentials, name: str) -> None:
    before = sqs_server.snapshot()
    rest_refused(opened(sqs_server.rest(admin)).get(f"/v1/queues/{name}/messages"))
    assert sqs_server.snapshot() == before


@pytest.mark.parametrize("scopes", [("*:send,receive",), ("peeked:send,receive",), ("other*:admin",)])
def test_peek_needs_admin_on_the_queue(
    sqs_server: SqsServer, opened: Opener, admin: Credentials, scopes: tuple[str, ...]
) -> None:
    rest = opened(sqs_server.rest(admin))
    rest.put("/v1/queues/peeked", json={})
    rest.post("/v1/queues/peeked/messages", json={"body": {"n": 1}})
    before = sqs_server.snapshot()
    rest_refused(opened(sqs_server.rest(sqs_server.key(*scopes))).get("/v1/queues/peeked/messages"), 403)
    rest_refused(opened(sqs_server.rest(sqs_server.key(*scopes))).get("/v1/queues/absent/messages"), 403)
    assert sqs_server.snapshot() == before


# --- 2. REST dead_letter_for ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "orders",
        {"orders": 1},
        5,
        [5],
        [None],
        [["orders"]],
        [f"q{i}" for i in range(11)],
        ["ord\u0435rs"],  # a Cyrillic e
        ["orders\u200b"],
        ["a" * 81],
        ["a" * 100_000],
        [""],
        ["a b"],
        ["a\x00b"],
        ["orders.fifo\n"],
    ],
)
def test_dead_letter_for_refused_creates_nothing(
    sqs_server: SqsServer, opened: Opener, admin: Credentials, value: Any
) -> None:
    rest = opened(sqs_server.rest(admin))
    before = sqs_server.snapshot()
    rest_refused(rest.put("/v1/queues/the-dlq", json={"dead_letter_for": value}))
    assert sqs_server.snapshot() == before
    assert rest.get("/v1/queues/the-dlq").status_code == 404
    rest.put("/v1/queues/the-dlq", json={})
    before = sqs_server.snapshot()
    rest_refused(rest.patch("/v1/queues/the-dlq", json={"dead_letter_for": value}))
    assert sqs_server.snapshot() == before


def test_dead_letter_for_null_and_empty_and_duplicates(
    sqs_server: SqsServer, opened: Opener, admin: Credentials
) -> None:
    rest = opened(sqs_server.rest(admin))
    ten = ["NULL", "null", "orders", "orders"] + [f"q{i}" for i in range(7)]
    created = rest.put("/v1/queues/the-dlq", json={"dead_letter_for": ten})
    assert created.status_code < 500, created.text
    if created.status_code >= 400:
        rest_refused(created)
        created = rest.put("/v1/queues/the-dlq", json={"dead_letter_for": ["NULL", "orders", "orders"]})
    assert created.status_code in (200, 201), created.text
    assert "NULL" in created.json()["dead_letter_for"]
    # "NULL" is a name, not null: a queue named NULL may use it; "orders" may too.
    assert (
        rest.put("/v1/queues/NULL", json={"dead_letter": {"queue": "the-dlq", "max_receive_count": 1}}).status_code
        == 201
    )
    # [] allows no source: a new source is refused and not created.
    assert rest.patch("/v1/queues/the-dlq", json={"dead_letter_for": []}).status_code == 200
    before = sqs_server.snapshot()
    rest_refused(rest.put("/v1/queues/orders", json={"dead_letter": {"queue": "the-dlq", "max_receive_count": 1}}))
    assert sqs_server.snapshot() == before
    assert rest.get("/v1/queues/orders").status_code == 404
    # null allows every source again.
    patched = rest.patch("/v1/queues/the-dlq", json={"dead_letter_for": None})
    assert patched.status_code == 200 and patched.json()["dead_letter_for"] is None, patched.text
    assert (
        rest.put("/v1/queues/orders", json={"dead_letter": {"queue": "the-dlq", "max_receive_count": 1}}).status_code
        == 201
    )


def test_a_source_the_dlq_does_not_allow_is_not_created(
    sqs_server: SqsServer, opened: Opener, admin: Credentials
) -> None:
    rest = opened(sqs_server.rest(admin))
    assert rest.put("/v1/queues/the-dlq", json={"dead_letter_for": ["orders"]}).status_code == 201
    before = sqs_server.snapshot()
    for name in ("ord\u0435rs", "Orders", "orders-2", "NULL"):
        rest_refused(rest.put(f"/v1/queues/{name}", json={"dead_letter": {"queue": "the-dlq", "max_receive_count": 1}}))
    policy = json.dumps({"deadLetterTargetArn": arn("the-dlq"), "maxReceiveCount": 1})
    sqs = sqs_server.client(admin)
    sqs_refused(sqs_server, lambda: sqs.create_queue(QueueName="Orders", Attributes={"RedrivePolicy": policy}))
    assert sqs_server.snapshot() == before


# --- 3. SQS move tasks ------------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


@pytest.mark.parametrize(
    "handle",
    [
        "",
        "not base64!",
        "éé",
        "\x00",
        b64(b"not json"),
        b64(b"\xff\xfe\x00"),
        b64(b"[]"),
        b64(b'"x"'),
        b64(b"null"),
        b64(b"1e999"),
        b64(b"{}"),
        b64(b'{"taskId": 5, "sourceArn": "x"}'),
        b64(b'{"taskId": {}, "sourceArn": "x"}'),
        b64(b'{"taskId": "not-a-uuid", "sourceArn": "x"}'),
        b64(json.dumps({"taskId": "00000000-0000-0000-0000-000000000000", "sourceArn": 5}).encode()),
        b64(json.dumps({"taskId": "00000000-0000-0000-0000-000000000000", "sourceArn": None}).encode()),
        b64(json.dumps({"taskId": "00000000-0000-0000-0000-000000000000", "sourceArn": "garbage"}).encode()),
        b64(json.dumps({"taskId": "00000000-0000-0000-0000-000000000000", "sourceArn": arn("dlq", "1" * 12)}).encode()),
        b64(json.dumps({"taskId": "00000000-0000-0000-0000-000000000000", "sourceArn": arn("dlq")}).encode()),
        b64(json.dumps({"taskId": "00000000-0000-0000-0000-000000000000", "sourceArn": arn("a\x00b")}).encode()),
        b64(b"[" * 100_000),
        b64(b'{"taskId": "1' + b"1" * 10_000 + b'", "sourceArn": "x"}'),
    ],
)
def test_cancel_refuses_bad_handles(sqs_server: SqsServer, sqs: Any, handle: str) -> None:
    sqs.create_queue(QueueName="dlq")
    sqs_refused(sqs_server, lambda: sqs.cancel_message_move_task(TaskHandle=handle))


@pytest.mark.parametrize(
    "source", ["", "garbage", "arn:aws:sqs", arn("dlq", "1" * 12), arn("absent"), arn("a\x00b"), arn("x" * 10_000)]
)
def test_move_actions_refuse_bad_source_arns(sqs_server: SqsServer, sqs: Any, source: str) -> None:
    sqs.create_queue(QueueName="dlq")
    sqs_refused(sqs_server, lambda: sqs.start_message_move_task(SourceArn=source))
    sqs_refused(sqs_server, lambda: sqs.list_message_move_tasks(SourceArn=source))
    sqs_refused(sqs_server, lambda: sqs.start_message_move_task(SourceArn=arn("dlq"), DestinationArn=source))


@pytest.mark.parametrize("rate", [0, -1, 501, 2**31, 2**63])
def test_start_refuses_rates_out_of_range(sqs_server: SqsServer, sqs: Any, rate: int) -> None:
    sqs.create_queue(QueueName="dlq")
    sqs_refused(
        sqs_server, lambda: sqs.start_message_move_task(SourceArn=arn("dlq"), MaxNumberOfMessagesPerSecond=rate)
    )


@pytest.mark.parametrize("limit", [0, 11, -1, 2**40])
def test_list_refuses_max_results_out_of_range(sqs_server: SqsServer, sqs: Any, limit: int) -> None:
    sqs.create_queue(QueueName="dlq")
    sqs_refused(sqs_server, lambda: sqs.list_message_move_tasks(SourceArn=arn("dlq"), MaxResults=limit))


@pytest.mark.parametrize(
    "params",
    [
        {"SourceArn": ["x"]},
        {"SourceArn": 5},
        {"SourceArn": None},
        {},
        {"SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": "10"},
        {"SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": 1.5},
        {"SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": True},
        {"SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": 1e999},
        {"SourceArn": arn("dlq"), "DestinationArn": {"a": 1}},
    ],
)
def test_start_with_json_of_wrong_types(sqs_server: SqsServer, admin: Credentials, params: dict[str, Any]) -> None:
    """The JSON protocol sent by hand: types boto3 would not send."""
    sqs_server.client(admin).create_queue(QueueName="dlq")
    before = sqs_server.snapshot()
    answer = post_json(sqs_server, admin, "StartMessageMoveTask", params)
    assert 400 <= answer.status_code < 500, answer.text
    assert "__type" in answer.json() or "code" in answer.json(), answer.text
    assert sqs_server.snapshot() == before


def post_json(server: SqsServer, credentials: Credentials, action: str, params: dict[str, Any]) -> httpx.Response:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as AwsCredentials

    body = json.dumps(params).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"}
    request = AWSRequest("POST", server.url + "/", data=body, headers=headers)
    SigV4Auth(AwsCredentials(credentials.key_id, credentials.secret), "sqs", REGION).add_auth(request)
    return httpx.post(server.url + "/", content=body, headers=dict(request.headers.items()), timeout=30)


def test_move_scopes(sqs_server: SqsServer, sqs: Any) -> None:
    policy = json.dumps({"deadLetterTargetArn": arn("dlq"), "maxReceiveCount": 1})
    url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    sqs.create_queue(QueueName="source", Attributes={"RedrivePolicy": policy})
    sqs.send_message(QueueUrl=url, MessageBody="x")
    sender = sqs_server.client(sqs_server.key("dlq:send", "source:send"))
    assert sqs_refused(sqs_server, lambda: sender.start_message_move_task(SourceArn=arn("dlq")))[1] == 403
    assert sqs_refused(sqs_server, lambda: sender.list_message_move_tasks(SourceArn=arn("dlq")))[1] == 403
    handle = sqs.start_message_move_task(SourceArn=arn("dlq"), DestinationArn=arn("source"))["TaskHandle"]
    assert sqs_refused(sqs_server, lambda: sender.cancel_message_move_task(TaskHandle=handle))[1] == 403
    other = sqs_server.client(sqs_server.key("other*:admin"))
    assert sqs_refused(sqs_server, lambda: other.cancel_message_move_task(TaskHandle=handle))[1] == 403
    # admin on the DLQ, no send on the destination: refused, nothing started.
    no_send = sqs_server.client(sqs_server.key("dlq:admin"))
    sqs_refused(sqs_server, lambda: no_send.start_message_move_task(SourceArn=arn("dlq"), DestinationArn=arn("source")))
    # The handle re-pointed at another account's ARN.
    document = json.loads(base64.urlsafe_b64decode(handle))
    document["sourceArn"] = arn("dlq", "1" * 12)
    sqs_refused(sqs_server, lambda: sqs.cancel_message_move_task(TaskHandle=b64(json.dumps(document).encode())))


# --- 4. SQS message attributes -----------------------------------------------------------------------


def string(value: str) -> dict[str, Any]:
    return {"DataType": "String", "StringValue": value}


BAD_ATTRIBUTES: list[dict[str, Any]] = [
    {f"a{i}": string("x") for i in range(11)},
    {"a" * 257: string("x")},
    {"a" * 100_000: string("x")},
    {"n": {"DataType": "Number", "StringValue": "1e999"}},
    {"n": {"DataType": "Number", "StringValue": "NaN"}},
    {"n": {"DataType": "Number", "StringValue": "--1"}},
    {"n": {"DataType": "Number", "StringValue": "Infinity"}},
    {"n": {"DataType": "Number", "StringValue": "1" * 100}},
    {"n": {"DataType": "Number", "StringValue": "1e-999999999999"}},
    {"n": {"DataType": "Number", "StringValue": "1_000"}},
    {"n": {"DataType": "Number.", "StringValue": "1"}},
    {"n": {"DataType": "Number" + "x" * 300, "StringValue": "1"}},
    {"n": {"DataType": "", "StringValue": "1"}},
    {"n": {"DataType": "string", "StringValue": "1"}},
    {"s": {"DataType": "String", "StringListValues": ["a", "b"]}},
    {"s": {"DataType": "String", "StringValue": "a", "BinaryValue": b"x"}},
    {"s": {"DataType": "String"}},
    {"s": string("")},
    {"s": string("\x00")},
    {"s": string("\ufffe")},
    {"b": {"DataType": "Binary", "StringValue": "aGk="}},
    {"b": {"DataType": "Binary", "BinaryListValues": [b"x"]}},
    {"AWS.x": string("x")},
    {".x": string("x")},
    {"a..b": string("x")},
    {"a b": string("x")},
    {"": string("x")},
]


@pytest.mark.parametrize("attributes", BAD_ATTRIBUTES, ids=range(len(BAD_ATTRIBUTES)))
def test_send_refuses_bad_attributes(sqs_server: SqsServer, sqs: Any, attributes: dict[str, Any]) -> None:
    url = sqs.create_queue(QueueName="attrs")["QueueUrl"]
    sqs_refused(sqs_server, lambda: sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=attributes))


@pytest.mark.parametrize("value", ["not base64!", "aGk", "====", "\x00", "é"])
def test_send_refuses_binary_that_is_not_base64(sqs_server: SqsServer, admin: Credentials, value: str) -> None:
    """boto3 encodes bytes itself: the JSON protocol by hand sends what it would not."""
    url = sqs_server.client(admin).create_queue(QueueName="attrs")["QueueUrl"]
    before = sqs_server.snapshot()
    params = {
        "QueueUrl": url,
        "MessageBody": "x",
        "MessageAttributes": {"b": {"DataType": "Binary", "BinaryValue": value}},
    }
    answer = post_json(sqs_server, admin, "SendMessage", params)
    assert 400 <= answer.status_code < 500, answer.text
    assert "__type" in answer.json(), answer.text
    assert sqs_server.snapshot() == before


def test_a_batch_with_one_bad_entry_fails_only_it(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="attrs")["QueueUrl"]
    entries = [
        {"Id": "good", "MessageBody": "x", "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "12"}}},
        {"Id": "bad", "MessageBody": "y", "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "1e999"}}},
        {
            "Id": "list",
            "MessageBody": "z",
            "MessageAttributes": {"s": {"DataType": "String", "StringListValues": ["a"]}},
        },
        {"Id": "eleven", "MessageBody": "v", "MessageAttributes": {f"a{i}": string("x") for i in range(11)}},
        {"Id": "nul", "MessageBody": "u", "MessageAttributes": {"s": string("\x00")}},
        {"Id": "good2", "MessageBody": "w", "MessageAttributes": {"b": {"DataType": "Binary", "BinaryValue": b"\x00"}}},
    ]
    answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert sorted(e["Id"] for e in answer["Successful"]) == ["good", "good2"]
    assert sorted(e["Id"] for e in answer["Failed"]) == ["bad", "eleven", "list", "nul"]
    assert all(e["SenderFault"] for e in answer["Failed"])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert sorted(m["Body"] for m in got) == ["w", "x"]


@pytest.mark.parametrize(
    "names",
    [["*"], [".*"], ["a.*.*"], ["a.*"], [""], ["All", "*"], ["\x00"], ["a" * 10_000], [f"n{i}" for i in range(1000)]],
)
def test_receive_with_odd_attribute_name_filters(sqs_server: SqsServer, sqs: Any, names: list[str]) -> None:
    url = sqs.create_queue(QueueName="attrs")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes={"a.b": string("1"), "n3": string("2")})
    try:
        got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=names, VisibilityTimeout=0)
    except ClientError as error:
        status = int(error.response["ResponseMetadata"]["HTTPStatusCode"])
        assert 400 <= status < 500, error.response
        return
    for message in got.get("Messages", []):
        assert set(message.get("MessageAttributes", {})) <= {"a.b", "n3"}


# --- the query protocol (form bodies), with values no SDK would send ---------------------------------


def post_form(server: SqsServer, credentials: Credentials, fields: dict[str, str]) -> httpx.Response:
    from urllib.parse import urlencode

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as AwsCredentials

    body = urlencode({"Version": "2012-11-05", **fields}).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    request = AWSRequest("POST", server.url + "/", data=body, headers=headers)
    SigV4Auth(AwsCredentials(credentials.key_id, credentials.secret), "sqs", REGION).add_auth(request)
    return httpx.post(server.url + "/", content=body, headers=dict(request.headers.items()), timeout=30)


FORMS: list[dict[str, str]] = [
    {"Action": "StartMessageMoveTask", "SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": "abc"},
    {"Action": "StartMessageMoveTask", "SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": "1.5"},
    {"Action": "StartMessageMoveTask", "SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": "9" * 400},
    {"Action": "StartMessageMoveTask", "SourceArn": arn("dlq"), "MaxNumberOfMessagesPerSecond": ""},
    {"Action": "ListMessageMoveTasks", "SourceArn": arn("dlq"), "MaxResults": "1e3"},
    {"Action": "ListMessageMoveTasks", "SourceArn": arn("dlq"), "MaxResults": "-" + "9" * 5000},
    {"Action": "ListMessageMoveTasks", "SourceArn.1": arn("dlq")},
    {"Action": "CancelMessageMoveTask", "TaskHandle": "%%%"},
    {"Action": "CancelMessageMoveTask"},
    {
        "Action": "SendMessage",
        "QueueUrl": "QURL",
        "MessageBody": "x",
        "MessageAttribute.1.Name": "n",
        "MessageAttribute.1.Value.DataType": "Number",
        "MessageAttribute.1.Value.StringValue": "1e999",
    },
    {
        "Action": "SendMessage",
        "QueueUrl": "QURL",
        "MessageBody": "x",
        "MessageAttribute.1.Name": "b",
        "MessageAttribute.1.Value.DataType": "Binary",
        "MessageAttribute.1.Value.BinaryValue": "not base64!",
    },
    {
        "Action": "SendMessage",
        "QueueUrl": "QURL",
        "MessageBody": "x",
        "MessageAttribute.1.Name": "s",
        "MessageAttribute.1.Value.DataType": "String",
        "MessageAttribute.1.Value.StringListValue.1": "a",
    },
    {
        "Action": "SendMessage",
        "QueueUrl": "QURL",
        "MessageBody": "x",
        "MessageAttribute.99999999999999999999.Name": "s",
        "MessageAttribute.99999999999999999999.Value.DataType": "String",
        "MessageAttribute.99999999999999999999.Value.StringValue": "a",
    },
    {
        "Action": "SendMessage",
        "QueueUrl": "QURL",
        "MessageBody": "x",
        "MessageAttribute.1.Value.DataType": "String",
        "MessageAttribute.1.Value.StringValue": "a",
    },
]


@pytest.mark.parametrize("fields", FORMS, ids=range(len(FORMS)))
def test_query_protocol_refusals(sqs_server: SqsServer, admin: Credentials, fields: dict[str, str]) -> None:
    url = sqs_server.client(admin).create_queue(QueueName="dlq")["QueueUrl"]
    fields = {k: url if v == "QURL" else v for k, v in fields.items()}
    before = sqs_server.snapshot()
    answer = post_form(sqs_server, admin, fields)
    assert 400 <= answer.status_code < 500, answer.text
    assert b"<Code>" in answer.content, answer.text
    assert sqs_server.snapshot() == before


def test_moves_on_queues_in_odd_states(sqs_server: SqsServer, sqs: Any) -> None:
    """A move from a queue that is no dead-letter queue, a second move while one runs, a cancel of
    a finished task: refusals, each changing nothing."""
    sqs.create_queue(QueueName="plain")
    sqs.create_queue(QueueName="plain.fifo", Attributes={"FifoQueue": "true"})
    sqs_refused(sqs_server, lambda: sqs.start_message_move_task(SourceArn=arn("plain")))
    sqs_refused(sqs_server, lambda: sqs.start_message_move_task(SourceArn=arn("plain.fifo")))
    sqs_refused(
        sqs_server, lambda: sqs.start_message_move_task(SourceArn=arn("plain"), DestinationArn=arn("plain.fifo"))
    )
    sqs_refused(sqs_server, lambda: sqs.start_message_move_task(SourceArn=arn("plain"), DestinationArn=arn("plain")))
    url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    policy = json.dumps({"deadLetterTargetArn": arn("dlq"), "maxReceiveCount": 1})
    sqs.set_queue_attributes(
        QueueUrl=sqs.get_queue_url(QueueName="plain")["QueueUrl"], Attributes={"RedrivePolicy": policy}
    )
    sqs.send_message(QueueUrl=url, MessageBody="x")
    handle = sqs.start_message_move_task(SourceArn=arn("dlq"), DestinationArn=arn("plain"))["TaskHandle"]
    sqs_refused(sqs_server, lambda: sqs.start_message_move_task(SourceArn=arn("dlq"), DestinationArn=arn("plain")))
    sqs.cancel_message_move_task(TaskHandle=handle)
    sqs_refused(sqs_server, lambda: sqs.cancel_message_move_task(TaskHandle=handle))
    sqs.set_queue_attributes(
        QueueUrl=sqs.get_queue_url(QueueName="plain")["QueueUrl"], Attributes={"RedrivePolicy": ""}
    )
    sqs.delete_queue(QueueUrl=url)
    sqs_refused(sqs_server, lambda: sqs.cancel_message_move_task(TaskHandle=handle))
    sqs_refused(sqs_server, lambda: sqs.list_message_move_tasks(SourceArn=arn("dlq")))


def test_peek_of_every_kind_of_queue(sqs_server: SqsServer, opened: Opener, admin: Credentials, sqs: Any) -> None:
    """Peek at the largest limit, of a FIFO queue with typed attributes and a delayed message."""
    url = sqs.create_queue(QueueName="p.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})[
        "QueueUrl"
    ]
    binary = {
        "b": {"DataType": "Binary.x", "BinaryValue": b"\x00\xff"},
        "n": {"DataType": "Number", "StringValue": "-0"},
    }
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId=f"g{i % 2}", MessageAttributes=binary)
    rest = opened(sqs_server.rest(admin))
    before = sqs_server.snapshot()
    answer = rest.get("/v1/queues/p.fifo/messages?limit=100")
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["messages"]) == 3
    rest_refused(rest.get("/v1/queues/p.fifo/messages?limit=101"), 400)
    assert sqs_server.snapshot() == before


ALLOW_POLICIES: list[Any] = [
    "null",
    "[]",
    '"byQueue"',
    {"redrivePermission": ["byQueue"]},
    {"redrivePermission": {"byQueue": 1}},
    {"redrivePermission": None},
    {"redrivePermission": "byQueue"},
    {"redrivePermission": "byQueue", "sourceQueueArns": []},
    {"redrivePermission": "byQueue", "sourceQueueArns": arn("a")},
    {"redrivePermission": "byQueue", "sourceQueueArns": [arn(f"q{i}") for i in range(11)]},
    {"redrivePermission": "byQueue", "sourceQueueArns": [5]},
    {"redrivePermission": "byQueue", "sourceQueueArns": [None]},
    {"redrivePermission": "byQueue", "sourceQueueArns": ["garbage"]},
    {"redrivePermission": "byQueue", "sourceQueueArns": [arn("a", "1" * 12)]},
    {"redrivePermission": "byQueue", "sourceQueueArns": [arn("a\x00b")]},
    {"redrivePermission": "byQueue", "sourceQueueArns": [arn("x" * 100_000)]},
    {"redrivePermission": "denyAll", "sourceQueueArns": [arn("a")]},
    "[" * 100_000,
    '{"redrivePermission": NaN}',
]


@pytest.mark.parametrize("policy", ALLOW_POLICIES, ids=range(len(ALLOW_POLICIES)))
def test_redrive_allow_policy_refused_creates_nothing(sqs_server: SqsServer, sqs: Any, policy: Any) -> None:
    """RedriveAllowPolicy is the SQS face of dead_letter_for."""
    value = policy if isinstance(policy, str) else json.dumps(policy)
    sqs_refused(sqs_server, lambda: sqs.create_queue(QueueName="the-dlq", Attributes={"RedriveAllowPolicy": value}))
    url = sqs.create_queue(QueueName="the-dlq")["QueueUrl"]
    sqs_refused(sqs_server, lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedriveAllowPolicy": value}))
