"""What boto3's SQS client and the aws CLI really send verifies: a small HTTP server on loopback
captures each request as it arrives on the socket and hands it to the verifier."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from app.sqs.signature import SignatureError, verify_request
from tests.sqs.signing import KEY_ID, OTHER_SECRET, REGION, SECRET, SECRETS


@dataclass
class Verdict:
    target: str
    key_id: str | None
    code: str | None
    body: bytes


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        path, _, query = self.path.partition("?")
        target = self.headers.get("X-Amz-Target") or ""
        try:
            key_id = verify_request(
                method=self.command,
                raw_path=path,
                raw_query=query,
                headers=list(self.headers.items()),
                body=body,
                now=datetime.now(UTC),
                secret_for=SECRETS.get,
                region=REGION,
            )
        except SignatureError as error:
            self.server.verdicts.append(Verdict(target, None, error.code, body))
            self._answer(error.status, {"__type": error.code, "message": error.message}, error.code)
            return
        self.server.verdicts.append(Verdict(target, key_id, None, body))
        self._answer(200, self._result(target, body), None)

    do_GET = _serve
    do_POST = _serve

    def _result(self, target: str, body: bytes) -> dict[str, object]:
        base = f"http://{self.headers['Host']}"
        if target == "AmazonSQS.SendMessage":
            sent = json.loads(body)
            return {
                "MessageId": "5fea7756-0ea4-451a-a703-a558b933e274",
                "MD5OfMessageBody": hashlib.md5(sent["MessageBody"].encode()).hexdigest(),
            }
        if target == "AmazonSQS.ReceiveMessage":
            return {"Messages": []}
        return {"QueueUrl": f"{base}/000000000000/orders", "QueueUrls": [f"{base}/000000000000/orders"]}

    def _answer(self, status: int, document: dict[str, object], code: str | None) -> None:
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        if code is not None:
            self.send_header("x-amzn-query-error", f"{code};Sender")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.verdicts: list[Verdict] = []


@pytest.fixture
def server() -> Iterator[_Server]:
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _endpoint(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _client(server: _Server, secret: str = SECRET) -> object:
    return boto3.client(
        "sqs",
        endpoint_url=_endpoint(server),
        region_name=REGION,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=10),
    )


def test_what_boto3_sends_verifies(server: _Server) -> None:
    sqs = _client(server)
    url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]  # type: ignore[attr-defined]
    body = 'héllo wörld ✓ 😀 <&> "quotes" + spaces'
    sent = sqs.send_message(  # type: ignore[attr-defined]
        QueueUrl=url,
        MessageBody=body,
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "ünïcode"}},
        MessageGroupId="g/1",
    )
    assert sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)  # type: ignore[attr-defined]
    sqs.list_queues(QueueNamePrefix="ord")  # type: ignore[attr-defined]
    assert [(v.target, v.key_id, v.code) for v in server.verdicts] == [
        ("AmazonSQS.GetQueueUrl", KEY_ID, None),
        ("AmazonSQS.SendMessage", KEY_ID, None),
        ("AmazonSQS.ReceiveMessage", KEY_ID, None),
        ("AmazonSQS.ListQueues", KEY_ID, None),
    ]
    assert json.loads(server.verdicts[1].body)["MessageBody"] == body


def test_boto3_with_a_wrong_secret_is_refused_with_the_sqs_code(server: _Server) -> None:
    sqs = _client(server, secret=OTHER_SECRET)
    with pytest.raises(ClientError) as caught:
        sqs.get_queue_url(QueueName="orders")  # type: ignore[attr-defined]
    assert caught.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert [v.code for v in server.verdicts] == ["SignatureDoesNotMatch"]


def test_a_url_boto3_presigns_verifies_when_fetched(server: _Server) -> None:
    sqs = _client(server)
    url = sqs.generate_presigned_url("list_queues", Params={"QueueNamePrefix": "ord"}, ExpiresIn=60)  # type: ignore[attr-defined]
    assert urlsplit(url).netloc == urlsplit(_endpoint(server)).netloc
    # A JSON-protocol URL signs the method (POST, with an empty body) and the headers that carry
    # the action, so whoever fetches it sends them.
    assert "X-Amz-SignedHeaders=content-type%3Bhost%3Bx-amz-target%3Bx-amzn-query-mode" in url
    headers = {
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "AmazonSQS.ListQueues",
        "x-amzn-query-mode": "true",
    }
    with urllib.request.urlopen(urllib.request.Request(url, b"", headers, method="POST"), timeout=10) as response:
        assert response.status == 200
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, b"", method="POST"), timeout=10)
    assert refused.value.code == 403
    refused.value.close()
    assert [(v.key_id, v.code) for v in server.verdicts] == [(KEY_ID, None), (None, "SignatureDoesNotMatch")]


def _aws_cli() -> str | None:
    found = Path(sys.executable).with_name("aws")
    return str(found) if found.exists() else shutil.which("aws")


@pytest.mark.skipif(_aws_cli() is None, reason="the aws CLI (PyPI awscli, in the dev extra) is not installed")
def test_what_the_aws_cli_sends_verifies(server: _Server, tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
    }
    aws = _aws_cli()
    assert aws is not None
    done = subprocess.run(
        [aws, "sqs", "send-message", "--endpoint-url", _endpoint(server), "--queue-url",
         _endpoint(server) + "/000000000000/orders", "--message-body", "from the CLI ✓"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [(v.target, v.key_id, v.code) for v in server.verdicts] == [("AmazonSQS.SendMessage", KEY_ID, None)]
