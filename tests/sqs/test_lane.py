"""The hot lane serves the hot SQS actions (app/api/lane.py, `answer_sqs`) as FastAPI's route of
`POST /` answers them, over real sockets: the same status, headers and body (request ids, message
ids, receipt handles and the date aside), errors included (signatures, a refused scope, malformed
JSON), and the same 413 for a body over the cap, declared or chunked."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from fastapi import FastAPI

from app.access import parse_grant
from app.api.lane import HotLane
from app.bench import sqs_client
from app.bench.sigv4 import Signer
from app.main import create_app
from app.sealing import ServerKey
from app.service.keys import create_signing_key
from tests.api.helpers import lane_answers, port_of, served
from tests.api.test_lane import Response, exchange
from tests.conftest import settings_for

SERVER_KEY = "q" * 43
MAX_BYTES = 4096
REGION = "us-east-1"


@dataclass
class Sqs:
    app: FastAPI
    port: int
    answered: list[str]  # operationIds of the requests the lane served
    signers: dict[str, Signer]  # by what the key may do

    def call(self, action: str, body: bytes, who: str = "admin", **replace: str) -> bytes:
        """The raw request of `action`, signed by `who`'s key; `replace` swaps header values."""
        headers = self.signers[who].headers(f"AmazonSQS.{action}", body)
        headers = [(name, replace.get(name.replace("-", "_"), value)) for name, value in headers]
        lines = [f"{name}: {value}" for name, value in headers] + [f"Content-Length: {len(body)}"]
        return ("POST / HTTP/1.1\r\n" + "\r\n".join(lines) + "\r\n\r\n").encode() + body

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/000000000000/{name}"

    async def through_fastapi(self, *requests: bytes) -> list[Response]:
        """The same requests on a new connection with the lane off: uvicorn runs the ASGI app."""
        lane = self.app.lane  # type: ignore[attr-defined]
        self.app.lane = None  # type: ignore[attr-defined]  # read by each new connection
        try:
            return await exchange(self.port, *requests)
        finally:
            self.app.lane = lane  # type: ignore[attr-defined]


@pytest_asyncio.fixture
async def sqs(db_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Sqs]:
    app = create_app(settings_for(db_url, sqs_server_key=SERVER_KEY, max_request_bytes=MAX_BYTES))
    assert isinstance(app.lane, HotLane)  # type: ignore[attr-defined]
    answered = lane_answers(app, monkeypatch)
    async with served(app, lifespan="on") as server:
        port = port_of(server)
        signers = {}
        for who, scope in (("admin", "*:*"), ("sender", "jobs:send")):
            grants = (parse_grant(scope),)
            stored, _, secret = await app.state.db.run(
                lambda conn, g=grants, w=who: create_signing_key(conn, w, g, ServerKey.from_text(SERVER_KEY))
            )
            signers[who] = Signer(stored.key_id, secret, REGION, f"127.0.0.1:{port}")
        signers["stranger"] = Signer("0123456789ab", "not-a-secret", REGION, f"127.0.0.1:{port}")
        signers["forger"] = Signer(signers["admin"].key_id, "not-its-secret", REGION, f"127.0.0.1:{port}")
        yield Sqs(app, port, answered, signers)


def comparable(response: Response) -> tuple[int, list[tuple[str, str]], str]:
    """A response with what differs between two answers made equal: the date, the request id,
    message ids and receipt handles (their lengths kept in the content length)."""
    headers = [(k, "…" if k in ("x-amzn-requestid", "x-request-id") else v) for k, v in response.headers if k != "date"]
    body = re.sub(r'"(MessageId|ReceiptHandle|SequenceNumber)":"[^"]*"', r'"\1":"…"', response.body.decode())
    return response.status, headers, body


async def test_the_lane_answers_the_hot_actions_as_the_route_does(sqs: Sqs) -> None:
    [made] = await exchange(sqs.port, sqs.call("CreateQueue", b'{"QueueName":"jobs"}'))
    assert made.status == 200
    assert sqs.answered == []  # CreateQueue is not hot: FastAPI served it
    url = sqs.url("jobs")
    body = '{"task":"x"}'
    cases = [
        sqs.call("SendMessage", sqs_client.send_message_bytes(url, body)),
        sqs.call("SendMessage", sqs_client.send_message_bytes(url, body), who="sender"),
        # The second entry names a group on a standard queue: it fails alone.
        sqs.call("SendMessageBatch", sqs_client.send_batch_bytes(url, body, 2, group_id="g")),
        sqs.call("SendMessageBatch", sqs_client.send_batch_bytes(url, "", 1)),
        sqs.call("ReceiveMessage", sqs_client.receive_bytes(url, 0, 0)),
        sqs.call("DeleteMessage", json.dumps({"QueueUrl": url, "ReceiptHandle": "bad"}).encode()),
        sqs.call("DeleteMessageBatch", sqs_client.delete_batch_bytes(url, ["bad", "worse"])),
        sqs.call("ChangeMessageVisibility", json.dumps({"QueueUrl": url, "ReceiptHandle": "x"}).encode()),
        sqs.call("ChangeMessageVisibilityBatch", json.dumps({"QueueUrl": url, "Entries": []}).encode()),
        sqs.call("SendMessage", sqs_client.send_message_bytes(sqs.url("nope"), body)),
        sqs.call("SendMessage", sqs_client.send_message_bytes("http://x/111111111111/jobs", body)),
        sqs.call("SendMessage", b'{"QueueUrl": "' + url.encode() + b'", "MessageBody": '),  # malformed JSON
        sqs.call("SendMessage", b"[1, 2]"),
        sqs.call("DeleteMessageBatch", b'{"QueueUrl": 1, "Entries": []}'),
        sqs.call("SendMessage", b'{"MessageBody": "no url"}'),
        sqs.call("ReceiveMessage", sqs_client.receive_bytes(url, 1, 0), who="sender"),  # a refused scope
        sqs.call("SendMessage", sqs_client.send_message_bytes(url, body), who="forger"),
        sqs.call("SendMessage", sqs_client.send_message_bytes(url, body), who="stranger"),
        sqs.call("SendMessage", sqs_client.send_message_bytes(url, body), X_Amz_Date="20200101T000000Z"),
        sqs.call("SendMessage", sqs_client.send_message_bytes(url, body), Authorization="AWS4-HMAC-SHA256 x"),
    ]
    by_lane = await exchange(sqs.port, *cases)
    assert sqs.answered == ["sqs"] * len(cases)
    by_route = await sqs.through_fastapi(*cases)
    assert sqs.answered == ["sqs"] * len(cases)  # the lane took none of those
    for lane_answer, route_answer in zip(by_lane, by_route, strict=True):
        assert comparable(lane_answer) == comparable(route_answer)
    codes = [a.header("x-amzn-query-error") for a in by_lane]
    assert [a.status for a in by_lane] == [200] * 4 + [400, 404, 200] + [400] * 8 + [403] * 4 + [400]
    assert codes == [None] * 4 + [
        "InvalidParameterValue;Sender",  # MaxNumberOfMessages 0
        "ReceiptHandleIsInvalid;Sender",
        None,  # both entries failed alone
        "MissingParameter;Sender",  # VisibilityTimeout
        "AWS.SimpleQueueService.EmptyBatchRequest;Sender",
        "AWS.SimpleQueueService.NonExistentQueue;Sender",
        "AWS.SimpleQueueService.NonExistentQueue;Sender",  # another account's
        "InvalidParameterValue;Sender",  # malformed JSON
        "InvalidParameterValue;Sender",  # not an object
        "InvalidParameterValue;Sender",  # a member of the wrong type
        "MissingParameter;Sender",  # QueueUrl
        "AccessDenied;Sender",
        "SignatureDoesNotMatch;Sender",
        "InvalidClientTokenId;Sender",
        "SignatureDoesNotMatch;Sender",  # signed long ago
        "IncompleteSignature;Sender",
    ]
    failed = json.loads(by_lane[6].body)["Failed"]
    assert [f["Code"] for f in failed] == ["ReceiptHandleIsInvalid"] * 2


async def test_a_worker_round_trip_through_the_lane(sqs: Sqs) -> None:
    await exchange(sqs.port, sqs.call("CreateQueue", b'{"QueueName":"jobs.fifo","Attributes":{"FifoQueue":"true"}}'))
    url = sqs.url("jobs.fifo")
    sent, got = await exchange(
        sqs.port,
        sqs.call("SendMessageBatch", sqs_client.send_batch_bytes(url, "é\r\n", 3, group_id="g", dedup_prefix="d")),
        sqs.call("ReceiveMessage", sqs_client.receive_bytes(url, 10, 0)),
    )
    assert json.loads(sent.body)["Failed"] == []
    messages = json.loads(got.body)["Messages"]
    assert [m["Body"] for m in messages] == ["é\r\n"] * 3
    [deleted] = await exchange(
        sqs.port,
        sqs.call("DeleteMessageBatch", sqs_client.delete_batch_bytes(url, [m["ReceiptHandle"] for m in messages])),
    )
    assert json.loads(deleted.body) == {"Successful": [{"Id": "0"}, {"Id": "1"}, {"Id": "2"}], "Failed": []}
    assert sqs.answered == ["sqs"] * 3


async def test_a_body_over_the_cap_is_413_as_on_the_route(sqs: Sqs) -> None:
    big = sqs_client.send_message_bytes(sqs.url("jobs"), "x" * MAX_BYTES)
    declared = sqs.call("SendMessage", big)
    # The same request, its body chunked: no length declared, the cap is met while reading.
    head, _, _ = declared.partition(b"\r\n\r\n")
    head = head.replace(b"Content-Length: %d" % len(big), b"Transfer-Encoding: chunked")
    chunked = head + b"\r\n\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big)
    for request in (declared, chunked):
        [by_lane] = await exchange(sqs.port, request)
        [by_route] = await sqs.through_fastapi(request)
        assert by_lane.status == 413
        assert comparable(by_lane) == comparable(by_route)
        assert json.loads(by_lane.body)["error"]["code"] == "request_too_large"
    assert sqs.answered == ["sqs", "sqs"]
