"""Requests no SDK would send, answered as SQS answers them: a 4xx error in the request's
protocol, never a 500 (and an unexpected failure, when one happens, still in SQS's shape); and
a request whose action-choosing headers (X-Amz-Target, Content-Type) are not signed is refused."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials as BotoCredentials

from app.api import routes_sqs
from tests.sqs.harness import ACCOUNT, REGION, Credentials, SqsServer

PRESIGNED_WITH_A_CONTROL_DATE = (
    "/?Action=ListQueues&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a/b/c/d/e&X-Amz-Date=%01"
    "&X-Amz-Expires=5&X-Amz-SignedHeaders=host&X-Amz-Signature=00"
)
FORM = b"Action=ListQueues&Version=2012-11-05"
FORM_TYPE = (b"Content-Type", b"application/x-www-form-urlencoded")
JSON_HEADERS = [(b"Content-Type", b"application/x-amz-json-1.0"), (b"X-Amz-Target", b"AmazonSQS.ListQueues")]


def query_error(answer: httpx.Response) -> str:
    assert answer.headers["content-type"].startswith("text/xml"), answer.text
    assert answer.text.startswith('<?xml version="1.0"?><ErrorResponse'), answer.text
    return answer.text.split("<Code>", 1)[1].split("</Code>", 1)[0]


def test_a_presigned_url_with_a_control_character_date_is_refused(sqs_server: SqsServer) -> None:
    answer = httpx.get(sqs_server.url + PRESIGNED_WITH_A_CONTROL_DATE)
    assert answer.status_code == 400
    assert query_error(answer) == "IncompleteSignature"


@pytest.mark.parametrize("value", [b"\xff", b"AWS4-HMAC-SHA256 \xff\xfe", b"<&>" * 2000])
def test_an_authorization_header_of_any_bytes_is_refused(sqs_server: SqsServer, value: bytes) -> None:
    before = sqs_server.snapshot()
    query = httpx.post(sqs_server.url + "/", content=FORM, headers=[FORM_TYPE, (b"Authorization", value)])
    assert query.status_code == 400
    assert query_error(query) == "IncompleteSignature"
    as_json = httpx.post(sqs_server.url + "/", content=b"{}", headers=[*JSON_HEADERS, (b"Authorization", value)])
    assert as_json.status_code == 400
    assert json.loads(as_json.content)["__type"] == "com.amazonaws.sqs#IncompleteSignature"
    assert sqs_server.snapshot() == before


def test_an_unexpected_failure_is_an_sqs_internal_failure(sqs_server: SqsServer, monkeypatch: Any) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(routes_sqs, "parse_signed_request", broken)
    query = httpx.post(sqs_server.url + "/", content=FORM, headers=[FORM_TYPE])
    assert query.status_code == 500
    assert query_error(query) == "InternalFailure"
    as_json = httpx.post(sqs_server.url + "/", content=b"{}", headers=JSON_HEADERS)
    assert as_json.status_code == 500
    assert json.loads(as_json.content)["__type"] == "com.amazonaws.sqs#InternalFailure"


class _SignsOnly(SigV4Auth):
    """botocore's signer, signing only the headers named (as a careless client might)."""

    def __init__(self, credentials: BotoCredentials, names: set[str]) -> None:
        super().__init__(credentials, "sqs", REGION)
        self.names = names

    def headers_to_sign(self, request: AWSRequest) -> Any:
        every = super().headers_to_sign(request)
        kept = HTTPHeaders()
        for name, value in every.items():
            if name in self.names:
                kept[name] = value
        return kept


def _send(server: SqsServer, admin: Credentials, target: str, signs: set[str]) -> httpx.Response:
    body = json.dumps({"QueueUrl": f"{server.url}/{ACCOUNT}/jobs", "MessageBody": "once"})
    request = AWSRequest(
        method="POST",
        url=server.url + "/",
        data=body,
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"},
    )
    _SignsOnly(BotoCredentials(admin.key_id, admin.secret), signs).add_auth(request)
    headers = dict(request.headers.items())
    headers["X-Amz-Target"] = target  # what an attacker on the way may swap
    return httpx.post(server.url + "/", content=body, headers=headers)


def test_the_headers_that_choose_the_action_must_be_signed(sqs_server: SqsServer, sqs: Any, admin: Credentials) -> None:
    sqs.create_queue(QueueName="jobs")
    before = sqs_server.snapshot()
    for signs in ({"host", "x-amz-date"}, {"host", "x-amz-date", "content-type"}, {"host", "x-amz-target"}):
        for target in ("AmazonSQS.SendMessage", "AmazonSQS.ReceiveMessage"):
            answer = _send(sqs_server, admin, target, signs)
            assert answer.status_code == 400, answer.text
            assert json.loads(answer.content)["__type"] == "com.amazonaws.sqs#IncompleteSignature"
    assert sqs_server.snapshot() == before
    # The same hand-signing, with every header that matters signed, verifies.
    every = {"host", "x-amz-date", "content-type", "x-amz-target"}
    assert _send(sqs_server, admin, "AmazonSQS.SendMessage", every).status_code == 200
    swapped = _send(sqs_server, admin, "AmazonSQS.ReceiveMessage", every)
    assert swapped.status_code == 403 and "SignatureDoesNotMatch" in swapped.text
