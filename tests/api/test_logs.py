"""PQS_LOG_FORMAT=json and X-Request-Id, against a real `pqs serve` (app/api/access_log.py,
app/api/request_id.py): every line of its output is one JSON object; each request's access line
names its id (the one echoed), operation, queue, status and duration, the same with the hot lane
on or off; a mangled X-Request-Id is replaced, never echoed or logged; no key reaches the log."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from pythonjsonlogger.json import JsonFormatter

from app.access import EVERYTHING, parse_grant
from app.api import access_log, request_id
from app.bench.sigv4 import Signer
from app.db.sessions import on_connection
from app.sealing import ServerKey
from app.service.keys import create_key, create_signing_key
from tests.faults.service import pqs_serve

SERVER_KEY = "q" * 43
REGION = "us-east-1"
MAX_BYTES = 4096
# What a made id looks like (app/api/request_id.py): UUID-shaped, lower-case hex.
MADE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
ACCESS_FIELDS = {"time", "level", "logger", "message", "request_id", "method", "path", "status", "duration"}
ACCESS_FIELDS |= {"operation", "queue"}

# X-Request-Id values a careless or hostile client sends: none is taken.
MANGLED = [
    b"",
    b"a" * 129,
    b"a" * 20_000,
    b'abc"def',
    b'"},"status":200,"x":{"',
    b"abc\\def",
    b"a b",
    b"caf\xc3\xa9",
    b"\xff\xfe",
    b"abc\x00def",
    b"abc\x01def",
    b"abc\x1bdef",
    b"abc\x7fdef",
    b"abc%0Adef",
    b"abc%00",
    b"abc\tdef",
    b"</RequestId>",
    b"a/b",
    b"a;b",
    b"a=b",
    b"${jndi:x}",
]
VALID = [b"a", b"A" * 128, b"req-1.2:3_x", b"0"]


def call(port: int, method: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> dict[str, Any]:
    """One request on its own connection, raw (so any header bytes go out as given), a body as
    JSON unless `headers` say otherwise: its status, headers (lower-case names) and body."""
    named = {name.lower() for name, _ in headers}
    head = [f"{method} {target} HTTP/1.1".encode(), b"Connection: close"]
    head += [] if b"host" in named else [b"Host: 127.0.0.1"]
    head += [name + b": " + value for name, value in headers]
    head += [] if b"content-type" in named or not body else [b"Content-Type: application/json"]
    head.append(b"Content-Length: %d" % len(body))
    chunks = []
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    status_line, _, rest = b"".join(chunks).partition(b"\r\n")
    raw_headers, _, content = rest.partition(b"\r\n\r\n")
    fields = {}
    for line in raw_headers.split(b"\r\n"):
        name, _, value = line.partition(b":")
        fields[name.strip().lower().decode()] = value.strip().decode("latin-1")
    return {"status": int(status_line.split(b" ")[1]), "headers": fields, "body": content}


def bearer(key: str) -> tuple[bytes, bytes]:
    return b"Authorization", f"Bearer {key}".encode()


def rid(value: str) -> tuple[bytes, bytes]:
    return b"X-Request-Id", value.encode()


def log_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of the service's output, each parsed as one JSON object (fails otherwise)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)  # one object a line, or the test fails here
        assert isinstance(record, dict), line
        assert {"time", "level", "logger", "message"} <= set(record), line
        lines.append(record)
    return lines


@pytest.mark.parametrize("fast_path", ["true", "false"])
async def test_json_logs_name_each_request_by_the_id_it_was_answered_with(
    db_url: str, tmp_path: Path, fast_path: str
) -> None:
    _, admin = await on_connection(db_url, lambda conn: create_key(conn, "admin", EVERYTHING))
    _, other = await on_connection(db_url, lambda conn: create_key(conn, "other", (parse_grant("other-*:*"),)))
    stored, _, secret = await on_connection(
        db_url, lambda conn: create_signing_key(conn, "sqs", EVERYTHING, ServerKey.from_text(SERVER_KEY))
    )
    secrets = [admin, other, admin.split("_", 2)[2], other.split("_", 2)[2], secret]
    log = tmp_path / "serve.log"
    env = {
        "PQS_DATA_DIR": str(tmp_path),
        "PQS_LOG_FORMAT": "json",
        "PQS_LOG_LEVEL": "info",
        "PQS_FAST_PATH": fast_path,
        "PQS_SQS_SERVER_KEY": SERVER_KEY,
        "PQS_MAX_REQUEST_BYTES": str(MAX_BYTES),
    }
    with pqs_serve(db_url, log, **env) as service:
        port = service.port
        signer = Signer(stored.key_id, secret, REGION, f"127.0.0.1:{port}")
        queue_url = f"http://127.0.0.1:{port}/000000000000/jobs"

        def sqs(action: str, document: dict[str, Any], *extra: tuple[bytes, bytes]) -> dict[str, Any]:
            body = json.dumps(document).encode()
            signed = [(k.encode(), v.encode()) for k, v in signer.headers(f"AmazonSQS.{action}", body)]
            return call(port, "POST", "/", [*signed, *extra], body)

        send = json.dumps({"body": {"n": 1}}).encode()
        # (request id sent, answer, (status, operation, queue) its access line must name)
        cases: list[tuple[str | None, dict[str, Any], tuple[int, str | None, str | None]]] = []

        def expect(sent: str | None, answer: dict[str, Any], status: int, operation: str | None, queue: str | None):
            assert answer["status"] == status, answer
            cases.append((sent, answer, (status, operation, queue)))

        expect("create-1", call(port, "PUT", "/v1/queues/jobs", [bearer(admin), rid("create-1")], b"{}"),
               201, "create_queue", "jobs")  # fmt: skip
        expect("send-1", call(port, "POST", "/v1/queues/jobs/messages", [bearer(admin), rid("send-1")], send),
               201, "send_message", "jobs")  # fmt: skip
        expect("recv-1", call(port, "POST", "/v1/queues/jobs/messages/receive", [bearer(admin), rid("recv-1")], b"{}"),
               200, "receive_messages", "jobs")  # fmt: skip
        expect(None, call(port, "POST", "/v1/queues/jobs/messages/batch", [bearer(admin)], b'{"entries": []}'),
               400, "send_message_batch", "jobs")  # fmt: skip
        # The key in the query (a careless habit) and in the header.
        expect("get-1", call(port, "GET", f"/v1/queues/jobs?api_key={admin}", [bearer(admin), rid("get-1")]),
               200, "get_queue", "jobs")  # fmt: skip
        expect("get-2", call(port, "GET", "/v1/queues/nope", [bearer(admin), rid("get-2")]),
               404, "get_queue", "nope")  # fmt: skip
        # Refused before FastAPI routes it (or by the lane, after its match): the same line.
        expect("nokey-1", call(port, "POST", f"/v1/queues/jobs/messages?api_key={admin}", [rid("nokey-1")], send),
               401, "send_message", "jobs")  # fmt: skip
        unknown = "pqs_0123456789ab_" + "x" * 43
        expect("nokey-2", call(port, "GET", "/v1/queues/jobs", [rid("nokey-2"), bearer(unknown)]),
               401, "get_queue", "jobs")  # fmt: skip
        expect("other-1", call(port, "POST", "/v1/queues/jobs/messages", [bearer(other), rid("other-1")], send),
               403, "send_message", "jobs")  # fmt: skip
        expect("other-2", call(port, "DELETE", "/v1/queues/jobs", [bearer(other), rid("other-2")]),
               403, "delete_queue", "jobs")  # fmt: skip
        # No route matches: no operation, and no path segment taken for a queue.
        expect("none-1", call(port, "GET", "/v1/queues/jobs/nothing", [bearer(admin), rid("none-1")]),
               404, None, None)  # fmt: skip
        expect("none-2", call(port, "GET", "/queues/jobs", [rid("none-2")]), 404, None, None)
        expect("none-3", call(port, "PUT", "/v1/queues/jobs/messages/ack", [bearer(admin), rid("none-3")], b"{}"),
               405, None, None)  # fmt: skip
        expect("none-4", call(port, "GET", "/v1/queues/jobs%0A", [bearer(admin), rid("none-4")]), 404, None, None)
        expect(None, call(port, "GET", "/healthz", []), 200, "healthz", None)

        # SQS: a hot action, one FastAPI serves, and a refusal; the answer's RequestId is the id.
        expect("sqs-1", sqs("SendMessage", {"QueueUrl": queue_url, "MessageBody": "x"}, rid("sqs-1")),
               200, "sqs", "jobs")  # fmt: skip
        expect("sqs-2", sqs("GetQueueUrl", {"QueueName": "jobs"}, rid("sqs-2")), 200, "sqs", "jobs")
        expect(None, sqs("ReceiveMessage", {"QueueUrl": queue_url}), 200, "sqs", "jobs")
        # A name no queue can have is not logged.
        too_long = queue_url + "x" * 100
        expect("sqs-3", sqs("SendMessage", {"QueueUrl": too_long, "MessageBody": "x"}, rid("sqs-3")), 400, "sqs", None)
        # Over the body cap: refused before the body is read, by the lane or by the middleware.
        large = b'{"body": "%s"}' % (b"x" * MAX_BYTES)
        expect("big-1", call(port, "POST", "/v1/queues/jobs/messages", [bearer(admin), rid("big-1")], large),
               413, "send_message", "jobs")  # fmt: skip
        expect("big-2", sqs("SendMessage", {"QueueUrl": queue_url, "MessageBody": "x" * MAX_BYTES}, rid("big-2")),
               413, "sqs", None)  # fmt: skip

        for value in VALID:
            answer = call(port, "GET", "/v1/queues/jobs", [bearer(admin), (b"X-Request-Id", value)])
            expect(value.decode(), answer, 200, "get_queue", "jobs")
        mangled = []
        for value in MANGLED:
            for target, body in (("/v1/queues/jobs/messages", send), ("/v1/queues/jobs", b"")):
                method = "POST" if body else "GET"
                answer = call(port, method, target, [bearer(admin), (b"X-Request-Id", value)], body)
                if answer["status"] == 400 and "x-request-id" not in answer["headers"]:
                    # uvicorn's parser refused the head (a byte HTTP forbids): the protocol's own
                    # answer, in the house shape, before any request began; nothing to echo.
                    assert json.loads(answer["body"])["error"]["code"] == "invalid_request", (value, answer)
                    continue
                mangled.append(value)
                status, operation = (201, "send_message") if body else (200, "get_queue")
                expect(None, answer, status, operation, "jobs")
        # Every value HTTP allows in a field (RFC 9110: no control byte but HTAB) reached the
        # service, to be replaced; the others may be refused by the parser first.
        allowed = {value for value in MANGLED if not re.search(rb"[\x00-\x08\x0a-\x1f\x7f]", value)}
        assert allowed <= set(mangled), allowed - set(mangled)

    lines = log_lines(log)
    access = {}
    for line in lines:
        if line["logger"] == "uvicorn.access":
            assert set(line) >= ACCESS_FIELDS, line
            assert line["request_id"] not in access, line  # an id names one request
            access[line["request_id"]] = line
    for sent, answer, (status, operation, queue) in cases:
        echoed = answer["headers"]["x-request-id"]
        if sent is None:
            assert MADE.fullmatch(echoed), (echoed, answer)
        else:
            assert echoed == sent
        line = access[echoed]
        assert (line["status"], line["operation"], line["queue"]) == (status, operation, queue), line
        assert line["level"] == "INFO" and isinstance(line["duration"], float) and line["duration"] >= 0, line
        assert "?" not in line["path"] and "?" not in line["message"], line
        if "x-amzn-requestid" in answer["headers"]:
            assert answer["headers"]["x-amzn-requestid"] == echoed
            assert line["sqs_action"] in {"SendMessage", "GetQueueUrl", "ReceiveMessage"}, line
    others = {
        line["path"] for made, line in access.items() if made not in {a["headers"]["x-request-id"] for _, a, _ in cases}
    }
    assert others <= {"/readyz"}, others  # the fixture's polls; nothing else was logged as a request
    text = log.read_text(encoding="utf-8")
    for secret_text in secrets:
        assert secret_text not in text, [line for line in text.splitlines() if secret_text in line]
    assert "PQS serving on" in text  # `pqs serve`'s own lines are JSON too


def test_json_mode_tells_the_first_start_admin_key_past_a_warning_level(db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with pqs_serve(db_url, log, PQS_DATA_DIR=str(tmp_path), PQS_LOG_FORMAT="json", PQS_LOG_LEVEL="warning"):
        pass
    key = (tmp_path / "admin.key").read_text().strip()
    [told] = [line for line in log_lines(log) if key in line["message"]]
    assert (told["level"], told["logger"]) == ("WARNING", "app.cli"), told


def test_an_incoming_id_is_taken_only_from_the_safe_charset() -> None:
    for value in VALID:
        assert request_id.accepted([(b"x-request-id", value)]) == value.decode()
    for value in MANGLED:
        assert request_id.accepted([(b"x-request-id", value)]) is None, value
    # The first of two is the one read (as every header here), and other headers are no id.
    assert request_id.accepted([(b"x-request-id", b"\x00"), (b"x-request-id", b"b")]) is None
    assert request_id.accepted([(b"x-correlation-id", b"a")]) is None


def test_made_ids_are_unique_and_uuid_shaped() -> None:
    made = [request_id.make() for _ in range(10_000)]
    assert len(set(made)) == len(made)
    assert all(MADE.fullmatch(value) for value in made)


def test_a_json_line_stays_one_line_whatever_a_path_or_id_holds() -> None:
    config = access_log.log_config("info")
    formatter = JsonFormatter(**{k: v for k, v in config["formatters"]["json"].items() if k != "()"})
    path = '/v1/queues/a"b\n{"status": 1}\u2028\x00'
    record = logging.LogRecord(
        access_log.ACCESS_LOGGER, logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:1", "GET", path + "?api_key=pqs_secret", "1.1", 200), None,
    )  # fmt: skip
    scope = {
        "headers": [(b"x-request-id", b'"\n')],
        "method": "GET",
        "path": path,
        "query_string": b"api_key=pqs_secret",
    }

    def log_it() -> str:
        request_id.begin(scope)
        assert access_log.WithoutQuery().filter(record) and access_log.RequestFields().filter(record)
        return formatter.format(record)

    line = contextvars.copy_context().run(log_it)  # CURRENT stays unset here
    [fields] = [json.loads(text) for text in line.splitlines()]
    assert "pqs_secret" not in line and fields["path"] == path, line
    assert fields["status"] == 200 and MADE.fullmatch(fields["request_id"]), line
    # Not routed: matched on the operation table, as FastAPI's router would match it.
    assert (fields["operation"], fields["queue"]) == ("get_queue", path.removeprefix("/v1/queues/")), line
    assert set(fields) >= ACCESS_FIELDS, fields
    assert request_id.CURRENT.get() is None
