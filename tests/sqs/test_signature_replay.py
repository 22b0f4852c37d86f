"""A signed request's parts replayed with changes, after the same client's valid request has put
its Authorization header on the signature's quick path (the parse of all but the Signature is
cached per header text, app/sqs/signature.py): each variant is refused with SQS's code over real
HTTP, and nothing changes in the database."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from app.bench.sigv4 import Signer, amz_date
from tests.sqs.harness import REGION, Credentials, SqsServer

Headers = dict[str, str]
TARGET = "AmazonSQS.SendMessage"


def _swap_last_digit(headers: Headers) -> None:
    value = headers["Authorization"]
    headers["Authorization"] = value[:-1] + ("0" if value[-1] != "0" else "1")


def _upper_signature(headers: Headers) -> None:
    head, _, signature = headers["Authorization"].rpartition("Signature=")
    headers["Authorization"] = f"{head}Signature={signature.upper()}"


def _other_key_id(other: str) -> Callable[[Headers], None]:
    def change(headers: Headers) -> None:
        head, _, rest = headers["Authorization"].partition("Credential=")
        headers["Authorization"] = f"{head}Credential={other}/{rest.partition('/')[2]}"

    return change


def _later_date(headers: Headers) -> None:
    stamp = headers["X-Amz-Date"]
    headers["X-Amz-Date"] = stamp[:-3] + f"{(int(stamp[-3:-1]) + 1) % 60:02d}Z"


def _other_target(headers: Headers) -> None:
    headers["X-Amz-Target"] = "AmazonSQS.PurgeQueue"


@pytest.mark.parametrize(
    "change",
    [_swap_last_digit, _upper_signature, _later_date, _other_target, "other key", "other body"],
    ids=["signature digit", "signature upper case", "date", "target", "key id", "body"],
)
def test_a_changed_replay_on_the_quick_path_is_refused_and_changes_nothing(
    sqs_server: SqsServer, sqs: Any, admin: Credentials, change: Any
) -> None:
    url = sqs.create_queue(QueueName="replayed")["QueueUrl"]
    signer = Signer(admin.key_id, admin.secret, REGION, urlsplit(sqs_server.url).netloc)
    body = json.dumps({"QueueUrl": url, "MessageBody": "first"}).encode()
    with httpx.Client(base_url=sqs_server.url, timeout=30) as client:

        def post(headers: Headers, content: bytes) -> httpx.Response:
            return client.post("/", content=content, headers=headers)

        # The valid request: its header head is now cached.
        headers = dict(signer.headers(TARGET, body, amz_date()))
        assert post(headers, body).status_code == 200
        before = sqs_server.snapshot()
        replay = dict(headers)
        content = body
        if change == "other key":
            _other_key_id(sqs_server.key("*:*").key_id)(replay)
        elif change == "other body":
            content = json.dumps({"QueueUrl": url, "MessageBody": "second"}).encode()
        else:
            change(replay)
        refused = post(replay, content)
        assert refused.status_code == 403, refused.text
        assert refused.json()["__type"].endswith("SignatureDoesNotMatch")
        assert refused.headers["x-amzn-query-error"] == "SignatureDoesNotMatch;Sender"
        assert sqs_server.snapshot() == before
        # The cached head still serves the client's next valid request.
        assert post(dict(signer.headers(TARGET, content, amz_date())), content).status_code == 200
