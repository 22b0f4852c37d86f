"""Requests no SDK would send, answered as SQS answers them: a 4xx error in the request's
protocol, never a 500 (and an unexpected failure, when one happens, still in SQS's shape)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from app.api import routes_sqs
from tests.sqs.harness import SqsServer

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
