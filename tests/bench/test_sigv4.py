"""The bench's own SigV4 signer (app/bench/sigv4.py) signs as botocore's SigV4Auth does, and the
service's verifier (app/sqs/signature.py) accepts what it signs and refuses it altered."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from app.bench import sqs_client
from app.bench.sigv4 import Signer, amz_date
from app.sqs.signature import SignatureError, check_signature, parse_signed_request

KEY_ID = "0123456789ab"
SECRET = "zV6rN0l2Rj3Yc9wWqK1mT5uH8pXsA4dE7fGiJoLbQ_c"
HOST = "127.0.0.1:8123"
URL = f"http://{HOST}/000000000000/bench-q"
STAMP = "20261128T113005Z"
SIGNED_AT = datetime(2026, 11, 28, 11, 30, 5, tzinfo=UTC)
BODIES = {
    "ReceiveMessage": sqs_client.receive_bytes(URL, 10, 1),
    "SendMessageBatch": sqs_client.send_batch_bytes(URL, '{"task":"bench","pad":"é\\n"}', 10, "g", "d"),
    "DeleteMessageBatch": sqs_client.delete_batch_bytes(URL, ["AAAA-_", "BBBB"]),
    "SendMessage": sqs_client.send_message_bytes(URL, "plain"),
}


def _botocore(action: str, body: bytes, region: str) -> tuple[str, str]:
    """botocore's Authorization header for the request, and the X-Amz-Date it signed it at."""
    request = AWSRequest(
        method="POST",
        url=f"http://{HOST}/",
        data=body,
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"},
    )
    SigV4Auth(Credentials(KEY_ID, SECRET), "sqs", region).add_auth(request)
    return str(request.headers["Authorization"]), str(request.headers["X-Amz-Date"])


@pytest.mark.parametrize("action", sorted(BODIES))
@pytest.mark.parametrize("region", ["us-east-1", "eu-west-3"])
def test_signature_equals_botocores(action: str, region: str) -> None:
    authorization, stamp = _botocore(action, BODIES[action], region)
    headers = dict(Signer(KEY_ID, SECRET, region, HOST).headers(f"AmazonSQS.{action}", BODIES[action], stamp))
    assert headers["Authorization"] == authorization
    assert headers["X-Amz-Date"] == stamp
    assert headers["Host"] == HOST


def _verify(headers: list[tuple[str, str]], body: bytes, secret: str = SECRET) -> str:
    wire = [(name.lower().encode(), value.encode()) for name, value in headers]
    wire.append((b"content-length", str(len(body)).encode()))
    signed = parse_signed_request(
        method="POST", raw_path=b"/", raw_query=b"", headers=wire, body=body, now=SIGNED_AT, region="us-east-1"
    )
    return check_signature(signed, secret)


@pytest.mark.parametrize("action", sorted(BODIES))
def test_the_service_verifies_it(action: str) -> None:
    body = BODIES[action]
    headers = Signer(KEY_ID, SECRET, "us-east-1", HOST).headers(f"AmazonSQS.{action}", body, STAMP)
    assert _verify(headers, body) == KEY_ID


def test_the_service_refuses_it_altered() -> None:
    signer = Signer(KEY_ID, SECRET, "us-east-1", HOST)
    body = BODIES["ReceiveMessage"]
    headers = signer.headers("AmazonSQS.ReceiveMessage", body, STAMP)
    with pytest.raises(SignatureError):
        _verify(headers, body + b" ")
    with pytest.raises(SignatureError):
        _verify(headers, body, secret=SECRET[:-1] + "d")
    swapped = [(n, "AmazonSQS.PurgeQueue" if n == "X-Amz-Target" else v) for n, v in headers]
    with pytest.raises(SignatureError):
        _verify(swapped, body)


def test_the_derived_key_follows_the_day() -> None:
    signer = Signer(KEY_ID, SECRET, "us-east-1", HOST)
    body = BODIES["SendMessage"]
    today = signer.headers("AmazonSQS.SendMessage", body, STAMP)
    tomorrow = dict(signer.headers("AmazonSQS.SendMessage", body, "20261129T000001Z"))
    assert dict(today)["Authorization"] != tomorrow["Authorization"]
    assert dict(signer.headers("AmazonSQS.SendMessage", body, STAMP))["Authorization"] == dict(today)["Authorization"]


def test_amz_date() -> None:
    assert amz_date(SIGNED_AT.timestamp()) == STAMP
