"""boto3 and hand-signed requests against the served app: input that once reached the database or
the XML writer unchecked (a redrive count past SQS's limit, integers in other scripts, tags XML
cannot carry, lone surrogates in queue names) is refused with an SQS error, never a 500."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError

from tests.sqs.harness import ACCOUNT, REGION, Credentials, SqsServer


def code_of(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_a_redrive_count_past_sqs_limit_is_refused(sqs_server: SqsServer, sqs: Any, admin: Credentials) -> None:
    url = sqs.create_queue(QueueName="source")["QueueUrl"]
    sqs.create_queue(QueueName="dlq")
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:dlq"
    sqs.set_queue_attributes(
        QueueUrl=url, Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1000})}
    )
    before = sqs_server.snapshot()
    deep = "[" * 100_000 + "]" * 100_000
    policies = [
        *(json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": n}) for n in (1001, 5000, 99999999999, 0)),
        *(f'{{"deadLetterTargetArn": "{arn}", "maxReceiveCount": {n}}}' for n in ("1e300", "5.0", "true", "Infinity")),
        json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "99999999999999999999"}),
        json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "٣"}),
        deep,
    ]
    for policy in policies:
        with pytest.raises(ClientError) as error:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
        assert code_of(error) == "InvalidParameterValue", policy[:80]
    assert sqs_server.snapshot() == before
    # A count given as a string of digits is a count.
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "7"})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
    with sqs_server.rest(admin) as rest:
        answer = rest.get("/v1/queues/source")
        assert answer.status_code == 200, answer.text
        assert answer.json()["dead_letter"]["max_receive_count"] == 7, answer.text
        assert rest.get("/v1/queues").status_code == 200


def test_integer_attributes_are_ascii_digits(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    before = sqs_server.snapshot()
    for bad in ("--5", "²", "٣", "+5", "1_0", ""):
        with pytest.raises(ClientError) as error:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": bad})
        assert code_of(error) == "InvalidAttributeValue", bad
        with pytest.raises(ClientError) as error:
            sqs.create_queue(QueueName="other", Attributes={"VisibilityTimeout": bad})
        assert code_of(error) == "InvalidAttributeValue", bad
    assert sqs_server.snapshot() == before
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": " 45 "})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"] == {
        "VisibilityTimeout": "45"
    }


def test_tags_xml_cannot_carry_are_refused(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="tagged")["QueueUrl"]
    before = sqs_server.snapshot()
    for tags in ({"a\x01b": "v"}, {"k": "a\x01b"}, {"k": "\ufffe"}, {"\x1f": ""}):
        with pytest.raises(ClientError) as error:
            sqs.tag_queue(QueueUrl=url, Tags=tags)
        assert code_of(error) == "InvalidParameterValue", tags
        with pytest.raises(ClientError) as error:
            sqs.create_queue(QueueName="born-tagged", tags=tags)
        assert code_of(error) == "InvalidParameterValue", tags
    assert sqs_server.snapshot() == before
    # What XML can carry is kept: tab, newline, and characters past the BMP.
    sqs.tag_queue(QueueUrl=url, Tags={"k\t": "a\nb\U0001f600"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"k\t": "a\nb\U0001f600"}


def _json_call(server: SqsServer, credentials: Credentials, action: str, text: str) -> httpx.Response:
    """A JSON 1.0 request with `text` as its body as given (boto3 would not send a lone
    surrogate), signed as boto3 signs."""
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"}
    request = AWSRequest(method="POST", url=server.url + "/", data=text.encode(), headers=headers)
    SigV4Auth(BotoCredentials(credentials.key_id, credentials.secret), "sqs", REGION).add_auth(request)
    return httpx.post(server.url + "/", content=text.encode(), headers=dict(request.headers.items()))


def test_a_lone_surrogate_in_a_queue_name_is_refused(sqs_server: SqsServer, sqs: Any, admin: Credentials) -> None:
    sqs.create_queue(QueueName="dlq")
    prefix = f"{sqs_server.url}/{ACCOUNT}/"
    # A lone surrogate escaped in the JSON body is no text at all: the parser refuses the body.
    for action, text in [
        ("GetQueueUrl", '{"QueueName": "\\ud800"}'),
        ("GetQueueAttributes", f'{{"QueueUrl": "{prefix}\\ud800", "AttributeNames": ["All"]}}'),
        ("DeleteQueue", f'{{"QueueUrl": "{prefix}a\\udfff"}}'),
        ("SendMessage", f'{{"QueueUrl": "{prefix}\\ud800", "MessageBody": "x"}}'),
    ]:
        answer = _json_call(sqs_server, admin, action, text)
        assert answer.status_code == 400, (action, answer.text)
        assert answer.json()["__type"].endswith("InvalidParameterValue"), (action, answer.text)
    # Percent-encoded in a URL, it is a name no queue has.
    for action, text in [
        ("ListQueueTags", f'{{"QueueUrl": "{prefix}%ED%A0%80"}}'),
        ("GetQueueUrl", '{"QueueName": "no such name"}'),
    ]:
        answer = _json_call(sqs_server, admin, action, text)
        assert answer.status_code == 400, (action, answer.text)
        assert answer.json()["__type"].endswith("QueueDoesNotExist"), (action, answer.text)
    before = sqs_server.snapshot()
    url = json.dumps(prefix + "dlq")
    # The policy's own JSON escapes the surrogate: it appears once the policy is parsed.
    policy = f'{{"maxReceiveCount": 3, "deadLetterTargetArn": "arn:aws:sqs:{REGION}:{ACCOUNT}:\\ud800"}}'
    for action, text in (
        ("CreateQueue", '{"QueueName": "\\ud800"}'),
        ("CreateQueue", json.dumps({"QueueName": "src", "Attributes": {"RedrivePolicy": policy}})),
        ("TagQueue", f'{{"QueueUrl": {url}, "Tags": {{"\\ud800": "v"}}}}'),
    ):
        answer = _json_call(sqs_server, admin, action, text)
        assert answer.status_code == 400, (action, text, answer.text)
        assert answer.json()["__type"].endswith(("InvalidParameterValue", "QueueDoesNotExist")), answer.text
    assert sqs_server.snapshot() == before
