"""A hostile or careless client against the observability surfaces: GET /metrics (who may read
it, whether a client can grow its label sets), X-Request-Id and the JSON access log (what a client
can make it write), and the SQS JSON protocol's parser (jiter). Each probe: no 5xx, the error in
its API's shape, and a refusal changes nothing in the database.

By design, not probed as faults (docs/operations.md, "Metrics"): a client of PQS_METRICS_NETWORKS
(loopback by default) reads every metric, the per-queue gauges' queue names included, without a
key; and a proxy uvicorn trusts (`--forwarded-allow-ips`, 127.0.0.1 by default) names the client
with X-Forwarded-For, so any process on the host may claim an address of those networks.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
from collections.abc import AsyncIterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import httpx
import jiter
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from app.access import EVERYTHING
from app.api.operations import OPERATIONS
from app.bench.sigv4 import Signer
from app.db.sessions import on_connection
from app.domain import QueueAttributes
from app.sealing import ServerKey
from app.service.keys import create_key, create_signing_key, revoke_key
from app.sqs.actions import SQS_ACTIONS
from app.sqs.protocol import FORM_CONTENT_TYPE, JSON_CONTENT_TYPE
from tests.api.helpers import make_key, served
from tests.faults.service import pqs_serve
from tests.security.harness import MODES, Answer, create_app_for, exchange, raw_request, serving
from tests.security.test_route_manglings import MANGLINGS
from tests.sqs.harness import ACCOUNT, REGION, Credentials, SqsServer

REMOTE = ("203.0.113.9", 40000)
# Present in every exposition: what a refusal must never carry.
EXPOSED = b"pqs_requests_total"


# --- the app called as an ASGI server calls it ------------------------------------------------


async def asgi_call(
    app: FastAPI,
    method: str,
    path: str,
    *,
    headers: tuple[tuple[bytes, bytes], ...] = (),
    client: tuple[str, int] | None = REMOTE,
    query: bytes = b"",
    raw_path: bytes | None = None,
) -> Answer:
    """One request handed to the app as a server hands it: every field of the scope as given
    (the client's address, a path and a raw path that disagree, none normalized)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("utf-8", "surrogateescape") if raw_path is None else raw_path,
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"pqs.test"), *headers],
        "client": client,
        "server": ("127.0.0.1", 8000),
    }
    sent = False
    status, answer_headers, body = 0, {}, b""

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # the client stays until the answer is written
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, answer_headers, body
        if message["type"] == "http.response.start":
            status = message["status"]
            answer_headers = {k.decode().lower(): v.decode("latin-1") for k, v in message.get("headers", ())}
        elif message["type"] == "http.response.body":
            body += message.get("body", b"")

    await asyncio.wait_for(app(scope, receive, send), 30)
    return Answer(status, answer_headers, body)


def house_refusal(answer: Answer, allowed: set[int], label: str) -> None:
    """A refusal in `allowed`, with the house error body, showing no metric."""
    assert answer.status in allowed, (label, answer.status, answer.body[:300])
    assert EXPOSED not in answer.body, label
    assert answer.headers.get("content-type") == "application/json", (label, answer.headers)
    error = json.loads(answer.body)["error"]
    assert set(error) == {"code", "message"} and error["code"] and error["message"], (label, error)


@pytest.fixture
async def app(db_url: str) -> AsyncIterator[FastAPI]:
    application = create_app_for(db_url)
    async with application.router.lifespan_context(application):
        yield application


def bearer(key: str) -> tuple[bytes, bytes]:
    return b"authorization", f"Bearer {key}".encode()


# --- 1. who may read /metrics -------------------------------------------------------------------

# Headers that name another client: only uvicorn's proxy middleware reads X-Forwarded-For, and
# only from a proxy it trusts; none of these may make a remote client local.
FORGED = [
    (b"x-forwarded-for", b"127.0.0.1"),
    (b"x-forwarded-for", b"127.0.0.1, 127.0.0.1"),
    (b"x-forwarded-for", b"::1"),
    (b"forwarded", b"for=127.0.0.1"),
    (b"forwarded", b'for="[::1]";proto=http'),
    (b"x-real-ip", b"127.0.0.1"),
    (b"x-client-ip", b"127.0.0.1"),
    (b"true-client-ip", b"127.0.0.1"),
    (b"cf-connecting-ip", b"127.0.0.1"),
    (b"x-original-forwarded-for", b"127.0.0.1"),
    (b"x-forwarded-host", b"localhost"),
    (b"host", b"localhost"),
    (b"host", b"127.0.0.1"),
]
# Client addresses a server may put in the scope that are not loopback, or not addresses at all.
NOT_LOCAL = [
    ("203.0.113.9", 1),
    ("0.0.0.0", 1),
    ("::", 1),
    ("::ffff:203.0.113.9", 1),
    ("128.0.0.1", 1),
    ("localhost", 1),
    ("127.0.0.1.nip.io", 1),
    (" 127.0.0.1", 1),
    ("127.0.0.1 ", 1),
    ("127.0.0.1%lo", 1),
    ("127.1", 1),
    ("0x7f.0.0.1", 1),
    ("017700000001", 1),
    ("2130706433", 1),
    ("", 1),
    ("unix:/run/pqs.sock", 0),
]
# Loopback however written: local, as the default networks mean.
LOCAL = [("127.0.0.1", 1), ("127.255.0.9", 1), ("::1", 1), ("::ffff:127.0.0.1", 1), ("0:0:0:0:0:0:0:1", 1)]


async def test_no_header_and_no_odd_address_makes_a_remote_client_local(app: FastAPI) -> None:
    for header in FORGED:
        house_refusal(await asgi_call(app, "GET", "/metrics", headers=(header,)), {403}, repr(header))
    for client in NOT_LOCAL:
        house_refusal(await asgi_call(app, "GET", "/metrics", client=client), {403}, repr(client))
    house_refusal(await asgi_call(app, "GET", "/metrics", client=None), {403}, "no client (a unix socket)")
    for client in LOCAL:
        answer = await asgi_call(app, "GET", "/metrics", client=client)
        assert answer.status == 200 and EXPOSED in answer.body, client  # the probe can fail


async def test_only_a_key_with_read_on_every_queue_reads_metrics_from_elsewhere(app: FastAPI, db_url: str) -> None:
    admin = await make_key(app, "*:*")
    scopes = ("*:send,receive,ack", "a*:admin", "?*:admin", "[!-]*:admin", "a*:read", "*?:read", "[!-]*:read")
    lesser = [await make_key(app, scope) for scope in scopes]
    revoked = await make_key(app, "*:*")
    await on_connection(db_url, lambda conn: revoke_key(conn, revoked.split("_")[1]))
    for key in lesser:
        house_refusal(await asgi_call(app, "GET", "/metrics", headers=(bearer(key),)), {403}, key)
    for key in (revoked, admin[:-1], admin + "x", "pqs_000000000000_" + "A" * 43, "x" * 10_000):
        house_refusal(await asgi_call(app, "GET", "/metrics", headers=(bearer(key),)), {401}, key[:40])
    no_key = [
        (b"authorization", b"Basic " + admin.encode()),
        (b"authorization", admin.encode()),
        (b"authorization", b"Bearer"),
        (b"authorization", b"Bearer "),
        (b"authorization", b"AWS4-HMAC-SHA256 Credential=" + admin.encode()),
        (b"x-api-key", admin.encode()),
        (b"cookie", b"api_key=" + admin.encode()),
    ]
    for header in no_key:
        house_refusal(await asgi_call(app, "GET", "/metrics", headers=(header,)), {403}, repr(header)[:60])
    # The key in the query (a careless habit) is no key: it is not read there.
    for query in (f"api_key={admin}", f"access_token={admin}", f"key={admin}&Authorization=Bearer%20{admin}"):
        house_refusal(await asgi_call(app, "GET", "/metrics", query=query.encode()), {403}, query[:20])
    # Two Authorization headers: the first is the one read, whichever the second is.
    twice = (bearer(lesser[0]), bearer(admin))
    house_refusal(await asgi_call(app, "GET", "/metrics", headers=twice), {403}, "lesser, then admin")
    # A key with read on `*` reads it, and an admin key (admin implies read): the probes above
    # can fail.
    for key in (await make_key(app, "*:read"), await make_key(app, "*:send,read"), admin):
        answer = await asgi_call(app, "GET", "/metrics", headers=(bearer(key),))
        assert answer.status == 200 and EXPOSED in answer.body, key


async def test_queue_names_reach_only_those_who_may_read_every_queue(app: FastAPI) -> None:
    """The per-queue gauges name every queue: a key that may look at some queues only (read or
    admin there) is refused whole. (A client of PQS_METRICS_NETWORKS reads them without a key: by
    design, docs/operations.md.)"""
    await app.state.queues.create("tenant-b-payroll", QueueAttributes())
    await app.state.metrics.count_queues()  # the leader's round
    name = b"tenant-b-payroll"
    for scopes in ("tenant-a-*:*", "tenant-*:send,receive,ack", "tenant-b-payroll:admin", "tenant-*:read"):
        answer = await asgi_call(app, "GET", "/metrics", headers=(bearer(await make_key(app, scopes)),))
        house_refusal(answer, {403}, scopes)
        assert name not in answer.body, scopes
    house_refusal(answer := await asgi_call(app, "GET", "/metrics"), {403}, "no key")
    assert name not in answer.body
    readers = [(bearer(await make_key(app, scopes)),) for scopes in ("*:admin", "*:read")]
    for headers, client in ((readers[0], REMOTE), (readers[1], REMOTE), ((), LOCAL[0])):
        answer = await asgi_call(app, "GET", "/metrics", headers=headers, client=client)
        assert answer.status == 200 and b'pqs_queue_messages{queue="tenant-b-payroll"' in answer.body


async def test_no_path_or_method_mangling_reaches_the_metrics_without_their_check(app: FastAPI) -> None:
    """Whatever path reaches the metrics' handler is checked there; the others are no route."""
    lesser = await make_key(app, "*:send,receive,ack")
    admin = await make_key(app, "*:*")
    # (method, path, raw path): the router reads `path`; the raw one is what the client wrote.
    mangled = [
        ("GET", "/metrics/", None),
        ("GET", "/Metrics", None),
        ("GET", "/METRICS", None),
        ("GET", "//metrics", None),
        ("GET", "/metrics/", b"/metrics%2F"),
        ("GET", "/metrics;x", None),
        ("GET", "/metrics\x00", b"/metrics%00"),
        ("GET", "/metrics\n", b"/metrics%0A"),
        ("GET", "/metrics\r\n", b"/metrics%0D%0A"),
        ("GET", "/metrics ", b"/metrics%20"),
        ("GET", "/v1/../metrics", None),
        ("GET", "/./metrics", None),
        ("GET", "/metrics/.", None),
        ("GET", "/metrics#x", None),
        ("GET", "/metrics\u200b", b"/metrics%E2%80%8B"),
        ("GET", "/metr\u0456cs", b"/metr%D1%96cs"),  # a Cyrillic i
        ("GET", "/metrics", b"/%6Detrics"),  # the same path, written otherwise: reaches the handler
        *((method, "/metrics", None) for method in ("HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE")),
        ("get", "/metrics", None),
        ("GET ", "/metrics", None),
    ]
    for method, path, raw in mangled:
        for headers in ((), (bearer(lesser),)):
            answer = await asgi_call(app, method, path, headers=headers, raw_path=raw)
            label = f"{method} {path!r} {headers and 'lesser key'}"
            house_refusal(answer, {401, 403, 404, 405}, label)
    answer = await asgi_call(app, "GET", "/metrics", headers=(bearer(admin),), raw_path=b"/%6Detrics", query=b"x")
    assert answer.status == 200 and EXPOSED in answer.body


@pytest.mark.parametrize("mode", MODES)
async def test_manglings_over_a_socket_never_answer_the_metrics_without_a_key(db_url: str, mode: str) -> None:
    """Every way of serving, each with its own HTTP parser, with the metrics open to keys only
    (PQS_METRICS_NETWORKS empty): the route-mangling corpus applied to GET /metrics."""
    async with serving(db_url, mode, metrics_networks="") as server:
        lesser = await server.key("*:send,receive,ack")
        admin = await server.key("*:*")
        plain = await exchange(server.port, raw_request(b"GET", b"/metrics"))
        house_refusal(plain, {403}, "as written")
        for label, mangle in MANGLINGS.items():
            method, target = mangle(b"GET", b"/metrics", server.port)
            for key in (None, lesser):
                answer = await exchange(server.port, raw_request(method, target, key))
                assert answer.status in {400, 401, 403, 404, 405}, (label, answer.status, answer.body[:200])
                assert EXPOSED not in answer.body, label
                if server.ours or answer.headers.get("content-type") == "application/json":
                    house_refusal(answer, {400, 401, 403, 404, 405}, label)
        answer = await exchange(server.port, raw_request(b"GET", b"/metrics?x", admin))
        assert answer.status == 200 and EXPOSED in answer.body


@pytest.mark.parametrize(
    ("trusted", "header", "status"),
    [
        # A proxy uvicorn does not trust names no client: the socket's address decides (loopback
        # here, outside the networks).
        ("192.0.2.1", "X-Forwarded-For: 10.0.0.1", 403),
        ("192.0.2.1", "X-Forwarded-For: 10.0.0.1, 10.0.0.2", 403),
        # The trusted proxy: the rightmost address it does not trust is the client, so what a
        # client put before the proxy's own entry is not read.
        ("127.0.0.1", "X-Forwarded-For: 10.0.0.1, 203.0.113.9", 403),
        ("127.0.0.1", "X-Forwarded-For: 10.0.0.1, 127.0.0.1, 203.0.113.9", 403),
        ("127.0.0.1", "X-Forwarded-For: unknown", 403),
        ("127.0.0.1", "X-Forwarded-For: 10.0.0.1:80", 200),
        ("127.0.0.1", "X-Forwarded-For: 203.0.113.9, 10.0.0.1", 200),
        # Other headers that name a client are not read, even from the trusted proxy.
        ("127.0.0.1", "Forwarded: for=10.0.0.1", 403),
        ("127.0.0.1", "X-Real-IP: 10.0.0.1", 403),
        ("127.0.0.1", "X-Forwarded-Host: 10.0.0.1", 403),
    ],
)
async def test_x_forwarded_for_is_read_only_from_a_trusted_proxy(
    db_url: str, trusted: str, header: str, status: int
) -> None:
    application = create_app_for(db_url, metrics_networks="10.0.0.0/8")
    async with served(application, lifespan="on", log_level="critical", forwarded_allow_ips=trusted) as server:
        port = server.servers[0].sockets[0].getsockname()[1]
        answer = await exchange(port, raw_request(b"GET", b"/metrics", extra=header.encode() + b"\r\n"))
        if status == 200:
            assert answer.status == 200 and EXPOSED in answer.body, answer
        else:
            house_refusal(answer, {status}, header)


# --- 2. no client grows the label sets ----------------------------------------------------------


def token(rng: random.Random) -> str:
    """A fresh name, valid wherever a queue name is (so each batch has the same outcomes)."""
    return "z" + "".join(rng.choices("abcdefghijklmnopqrstuvwxy0123456789", k=15))


def spray(server: SqsServer, admin: Credentials, rng: random.Random) -> list[str]:
    """Requests whose path, method, query, queue, SQS action and ids are fresh names: the names."""
    signer = Signer(admin.key_id, admin.secret, REGION, server.url.removeprefix("http://"))
    used = []
    with httpx.Client(base_url=server.url, timeout=30) as http:
        auth = {"Authorization": f"Bearer {admin.bearer}"}

        def signed(target: str, document: dict[str, Any]) -> httpx.Response:
            body = json.dumps(document).encode()
            return http.post("/", content=body, headers=signer.headers(f"AmazonSQS.{target}", body))

        for _ in range(3):
            t = [token(rng) for _ in range(20)]
            used += t
            queue_url = f"{server.url}/{ACCOUNT}/{t[0]}"
            answers = [
                http.get(f"/{t[1]}"),
                http.get(f"/v1/{t[2]}"),
                http.get(f"/v1/{t[2]}", headers=auth),
                http.get(f"/v1/queues/{t[3]}?{t[4]}={t[5]}", headers={**auth, "X-Request-Id": t[6]}),
                http.post(f"/v1/queues/{t[3]}/messages", json={"body": 1}, headers=auth),  # the lane
                http.post(f"/v1/queues/{t[3]}/messages/{t[7]}", json={}, headers=auth),
                http.request(t[8].upper(), "/v1/queues", headers=auth),
                http.request(t[8].upper(), f"/{t[9]}"),
                http.get(f"/metrics?{t[10]}"),
                http.post(
                    "/",
                    content=b"{}",
                    headers={"X-Amz-Target": f"AmazonSQS.{t[11]}", "Content-Type": JSON_CONTENT_TYPE},
                ),
                signed(t[12], {}),
                signed(f"{t[12]}.{t[13]}", {}),
                http.post("/", content=f"Action={t[14]}".encode(), headers={"Content-Type": FORM_CONTENT_TYPE}),
                http.get(f"/?Action={t[15]}&QueueName={t[16]}"),
                signed("SendMessage", {"QueueUrl": queue_url, "MessageBody": "x"}),  # the lane
                signed("GetQueueUrl", {"QueueName": t[17]}),
                signed("ReceiveMessage", {"QueueUrl": f"{server.url}/{t[18]}/{t[19]}"}),
            ]
            for answer in answers:
                assert answer.status_code < 500, (answer.request.url, answer.status_code, answer.text)
    return used


def series(server: SqsServer) -> tuple[str, set[tuple[str, ...]]]:
    """The exposition, and the label values of every request metric's series."""
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    found = set()
    for family in text_string_to_metric_families(text):
        if family.name in ("pqs_requests", "pqs_request_duration_seconds"):
            for sample in family.samples:
                labels = dict(sample.labels)
                labels.pop("le", None)
                found.add((family.name, *sorted(labels.items())))
    return text, found


@pytest.mark.parametrize("fast_path", [True, False], ids=["lane", "fastapi"])
def test_no_client_input_becomes_a_label_value(db_url: str, fast_path: bool) -> None:
    """Fresh paths, methods, queues, SQS actions and ids: every operation label is a row of the
    operation table, a route's name, an SQS action PQS serves or `unmatched`; every status an
    HTTP status; and a second batch of fresh names adds no series."""
    with SqsServer(db_url, fast_path=fast_path) as server:
        admin = server.key("*:*")
        rng = random.Random(20261128)
        before = server.snapshot()
        used = spray(server, admin, rng)
        text, first = series(server)
        used += spray(server, admin, rng)
        text_again, second = series(server)
        assert server.snapshot() == before
        allowed = {operation.operation_id for operation in OPERATIONS}
        allowed |= {getattr(route, "name", "") for route in server.app.routes}
        allowed |= {"unmatched"} | {f"sqs:{action}" for action in SQS_ACTIONS}
        statuses = {str(int(status)) for status in HTTPStatus}
        for _, *labels in second:
            for name, label in labels:
                assert label in (allowed if name == "operation" else statuses), (name, label)
        assert first == second, second - first
        for name in used:
            assert name not in text and name not in text_again, name


# --- 3. what a client can make the log say ---------------------------------------------------------

SERVER_KEY = "q" * 43
Header = tuple[bytes, bytes]
# A request id as accepted (app/api/request_id.py).
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
HOSTILE_IDS = [
    b"",
    b"a" * 129,
    b"a" * 8_000,
    b'"},"level":"ERROR","x":{"',
    b"\\u0000",
    b"caf\xc3\xa9",
    b"\xe2\x80\xa8",
    b"\xed\xa0\x80",
    b"\xff",
    b"a\tb",
    b"a\x00b",
    b"a\x1b[31mb",
    b"<x/>",
    b"${jndi:ldap://x}",
]


def raw_call(port: int, method: bytes, target: bytes, headers: list[Header], body: bytes = b"") -> Answer:
    """One request on its own connection, every byte as given."""
    head = [method + b" " + target + b" HTTP/1.1", b"Connection: close"]
    head += [] if any(name.lower() == b"host" for name, _ in headers) else [b"Host: 127.0.0.1"]
    head += [name + b": " + value for name, value in headers]
    head.append(b"Content-Length: %d" % len(body))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw:
        return Answer(0, {}, b"")
    status_line, _, rest = raw.partition(b"\r\n")
    raw_headers, _, content = rest.partition(b"\r\n\r\n")
    fields = {}
    for line in raw_headers.split(b"\r\n"):
        name, _, value = line.partition(b":")
        fields[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return Answer(int(status_line.split(b" ")[1]), fields, content)


def test_no_client_input_breaks_a_json_log_line_or_puts_a_key_in_it(db_url: str, tmp_path: Path) -> None:
    _, admin = asyncio.run(on_connection(db_url, lambda conn: create_key(conn, "admin", EVERYTHING)))
    stored, bearer_key, secret = asyncio.run(
        on_connection(db_url, lambda conn: create_signing_key(conn, "sqs", EVERYTHING, ServerKey.from_text(SERVER_KEY)))
    )
    log = tmp_path / "serve.log"
    env = {"PQS_DATA_DIR": str(tmp_path), "PQS_LOG_FORMAT": "json", "PQS_LOG_LEVEL": "info"}
    with pqs_serve(db_url, log, PQS_SQS_SERVER_KEY=SERVER_KEY, **env) as service:
        port = service.port
        host = f"127.0.0.1:{port}"
        signer = Signer(stored.key_id, secret, REGION, host)
        auth = (b"Authorization", f"Bearer {admin}".encode())
        answers: list[tuple[str, Answer]] = []

        def call(label: str, method: bytes, target: bytes, headers: list[Header], body: bytes = b"") -> None:
            answer = raw_call(port, method, target, headers, body)
            assert answer.status < 500, (label, answer.status, answer.body[:300])
            answers.append((label, answer))

        def sqs(label: str, target: str, body: bytes, *extra: tuple[bytes, bytes]) -> None:
            signed = [(k.encode(), v.encode()) for k, v in signer.headers(target, body)]
            call(label, b"POST", b"/", [*signed, *extra], body)

        call("queue", b"PUT", b"/v1/queues/jobs", [auth, (b"Content-Type", b"application/json")], b"{}")
        # Hostile ids: one each, then many at once (the first is the one read).
        for value in HOSTILE_IDS:
            call(f"id {value[:20]!r}", b"GET", b"/v1/queues/jobs", [auth, (b"X-Request-Id", value)])
        many = [(b"X-Request-Id", b"first")] + [(b"X-Request-Id", b"n%d" % i) for i in range(200)]
        call("many ids", b"GET", b"/v1/queues/jobs", [auth, *many])
        call("many, mangled first", b"GET", b"/v1/queues/jobs", [auth, (b"X-Request-Id", b"a b"), *many])
        # Paths that quote, break lines, or are no UTF-8.
        for target in (
            b'/v1/queues/a"b',
            b"/v1/queues/a%22%7D%2C%22status%22%3A200%7D",
            b"/v1/queues/a%0A%7B%22level%22%3A%22ERROR%22%7D",
            b"/v1/queues/a%0D%0Ab",
            b"/v1/queues/%E2%80%A8",
            b"/v1/queues/%FF%FE",
            b"/v1/queues/%ED%A0%80",
            b"/v1/queues/%C0%AF",
            b"/v1/queues/a%00b",
            b"/v1/queues/" + b"%5C" * 2000,
            b"/%1B%5B31m",
            b"/v1/queues/jobs?x=%0A%22&y=%FF",
        ):
            call(f"path {target[:40]!r}", b"GET", target, [auth])
        # A hostile user agent, referer and other headers nobody logs.
        call("agent", b"GET", b"/healthz", [(b"User-Agent", b'"}\\\xff\xc3\xa9\t'), (b"Referer", b"\x1b[2J")])
        # SQS: hostile actions and queue names, in both protocols.
        for name in ('a"b', "a\nb", "\u2028", "\ud800", "x" * 80, "é" * 50):
            document = json.dumps({"QueueName": name}).encode()
            sqs(f"sqs name {name[:10]!r}", "AmazonSQS.CreateQueue", document)
            document = json.dumps({"QueueUrl": f"http://{host}/000000000000/{name}", "MessageBody": "x"}).encode()
            sqs(f"sqs url {name[:10]!r}", "AmazonSQS.SendMessage", document)
        for target in ('AmazonSQS."}', "AmazonSQS.\u00e9", "AmazonSQS." + "A" * 5000, 'x"y'):
            sqs(f"sqs target {target[:20]!r}", target, b"{}")
        form = (b"Content-Type", b"application/x-www-form-urlencoded")
        credentials = BotoCredentials(stored.key_id, secret)
        for body in (
            b"Action=%0A%22%7D",
            b"Action=CreateQueue&QueueName=%FF%0A",
            b"Action=GetQueueUrl&QueueName=%ED%A0%80",
            b"Action=GetQueueUrl&QueueName=a%22%7D%0A%7B",
            b"Action=SendMessage&MessageBody=x&QueueUrl=http%3A%2F%2Fh%2F000000000000%2F%ED%A0%80",
        ):
            request = AWSRequest("POST", f"http://{host}/", data=body, headers={"Content-Type": FORM_CONTENT_TYPE})
            SigV4Auth(credentials, "sqs", REGION).add_auth(request)
            signed_form = [(b"Host", host.encode()), *((k.encode(), v.encode()) for k, v in request.headers.items())]
            call(f"form {body!r}", b"POST", b"/", signed_form, body)
        # Keys where a careless client puts them: the query, a presigned URL, a path segment, a
        # queue URL, the header of an SQS request.
        presigned = (
            f"/?Action=ListQueues&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={stored.key_id}%2F20261128"
            f"%2F{REGION}%2Fsqs%2Faws4_request&X-Amz-Date=20261128T000000Z&X-Amz-Expires=300"
            f"&X-Amz-SignedHeaders=host&X-Amz-Signature={'ab' * 32}&X-Amz-Security-Token={secret}"
        )
        call("presigned", b"GET", presigned.encode(), [])
        for target in (f"/v1/queues/jobs?api_key={admin}", f"/metrics?api_key={admin}", f"/?AWSSecretKey={secret}"):
            call(f"query {target[:20]}", b"GET", target.encode(), [auth])
        call("key as a queue", b"GET", f"/v1/queues/{admin}".encode(), [auth])
        call("key as a path", b"GET", f"/{admin}/v1/queues".encode(), [])
        call("key percent-encoded", b"GET", f"/v1/queues/%70{admin[1:]}".encode(), [auth])
        call("key as a segment", b"POST", f"/v1/queues/jobs/messages/{admin}".encode(), [auth])
        sqs("key as a queue url", "AmazonSQS.GetQueueAttributes",
            json.dumps({"QueueUrl": f"http://{host}/000000000000/{bearer_key}"}).encode())  # fmt: skip
        call("bearer on sqs", b"POST", b"/", [auth, form], b"Action=ListQueues")
        call("key as a request id", b"GET", b"/v1/queues/jobs", [auth, (b"X-Request-Id", admin.encode())])
        call("key in a request id", b"GET", b"/healthz", [(b"X-Request-Id", f"id:{bearer_key}.1".encode())])

    text = log.read_text(encoding="utf-8")
    for secret_text in (admin, admin.split("_", 2)[2], bearer_key, bearer_key.split("_", 2)[2], secret, "ab" * 32):
        assert secret_text not in text, [line for line in text.splitlines() if secret_text in line][:3]
    echoed = set()
    for label, answer in answers:
        if "x-request-id" in answer.headers:
            assert REQUEST_ID.fullmatch(answer.headers["x-request-id"]), (label, answer.headers)
            assert "pqs_" not in answer.headers["x-request-id"], (label, answer.headers)  # no key echoed
            echoed.add(answer.headers["x-request-id"])
    assert {"first"} <= echoed and not {"n0", "n1", "a b"} & echoed
    access = 0
    for line in text.splitlines():
        # One object a line, by a strict parser (no lone surrogate, no NaN, no key twice).
        record = jiter.from_json(line.encode(), allow_inf_nan=False, catch_duplicate_keys=True)
        assert isinstance(record, dict) and {"time", "level", "logger", "message"} <= set(record), line
        assert record["level"] in ("INFO", "WARNING"), line  # no error, no traceback
        if record["logger"] == "uvicorn.access":
            access += 1
            assert REQUEST_ID.fullmatch(record["request_id"]), line
            assert "?" not in record["path"] and "?" not in record["message"], line
    assert access >= len([answer for _, answer in answers if "x-request-id" in answer.headers])


def test_uvicorns_own_lines_hold_no_key_either(db_url: str, tmp_path: Path) -> None:
    """The default (text) format: the same filter on uvicorn's access logger."""
    _, admin = asyncio.run(on_connection(db_url, lambda conn: create_key(conn, "admin", EVERYTHING)))
    log = tmp_path / "serve.log"
    with pqs_serve(db_url, log, PQS_DATA_DIR=str(tmp_path), PQS_LOG_LEVEL="info", PQS_FAST_PATH="true") as service:
        auth = (b"Authorization", f"Bearer {admin}".encode())
        for method, target in (
            (b"GET", f"/v1/queues/{admin}"),
            (b"POST", f"/v1/queues/{admin}/messages"),  # the hot lane's match
            (b"GET", f"/{admin}/v1/queues?api_key={admin}"),
            (b"GET", f"/v1/queues?api_key={admin}"),
        ):
            assert raw_call(service.port, method, target.encode(), [auth], b"{}").status < 500, target
    text = log.read_text(encoding="utf-8")
    key_id, secret_part = admin.split("_", 2)[1:]
    assert secret_part not in text, [line for line in text.splitlines() if secret_part in line]
    assert text.count(f"pqs_{key_id}_[redacted]") == 3, text[-2000:]


# --- 4. the SQS JSON protocol's parser ------------------------------------------------------------

URL = "http://127.0.0.1/000000000000/held"
U = json.dumps(URL).encode()
DEEP = 5_000


def _bodies() -> list[tuple[str, str, bytes]]:
    """(label, action, raw body): bodies jiter refuses (or decodes into a request that is
    refused), for actions the hot lane serves and actions FastAPI serves."""
    send = b'"QueueUrl": ' + U + b', "MessageBody": "x"'
    big_key = b'"' + b"k" * 100_000 + b'"'
    found = [
        # A key given twice, at every depth, however it is written.
        ("dup top", "SendMessage", b'{"QueueUrl": ' + U + b", " + send + b"}"),
        ("dup escaped", "SendMessage", b'{"\\u0051ueueUrl": "x", ' + send + b"}"),
        ("dup body", "SendMessage", b"{" + send + b', "MessageBody": "y"}'),
        ("dup unknown", "SendMessage", b"{" + send + b', "X": {"a": 1, "a": 1}}'),
        ("dup in list", "SendMessage", b"{" + send + b', "X": [[{"a": 1, "a": 2}]]}'),
        ("dup attribute", "SendMessage", b"{" + send + b', "MessageAttributes": {"a": {"DataType": "String",'
         b' "StringValue": "1", "StringValue": "2"}}}'),
        ("dup attribute name", "SendMessage", b"{" + send + b', "MessageAttributes": {"a": {"DataType": "String",'
         b' "StringValue": "1"}, "a": {"DataType": "String", "StringValue": "2"}}}'),
        ("dup entry", "SendMessageBatch",
         b'{"QueueUrl": ' + U + b', "Entries": [{"Id": "a", "Id": "b", "MessageBody": "x"}]}'),
        ("dup attribute map", "CreateQueue",
         b'{"QueueName": "n", "Attributes": {"DelaySeconds": "1", "DelaySeconds": "2"}}'),
        ("dup tag", "TagQueue", b'{"QueueUrl": ' + U + b', "Tags": {"a": "1", "a": "2"}}'),
        ("dup long key", "SendMessage", b"{" + send + b", " + big_key + b": 1, " + big_key + b": 2}"),
        ("dup unicode key", "SendMessage", b"{" + send + ', "\u2028\u00e9": 1, "\u2028\u00e9": 2}'.encode()),
        ("dup after nul", "SendMessage", b"{" + send + b', "a\\u0000": 1, "a\\u0000": 2}'),
        # Numbers no integer member takes.
        ("4300 digits", "SendMessage", b"{" + send + b', "DelaySeconds": ' + b"9" * 4300 + b"}"),
        ("-4300 digits", "ReceiveMessage", b'{"QueueUrl": ' + U + b', "WaitTimeSeconds": -' + b"9" * 4300 + b"}"),
        ("5000 digits", "SendMessage", b"{" + send + b', "DelaySeconds": ' + b"9" * 5000 + b"}"),
        ("huge unknown", "SendMessage", b"{" + send + b', "X": ' + b"9" * 50_000 + b"}"),
        ("1e400", "SendMessage", b"{" + send + b', "DelaySeconds": 1e400}'),
        ("-1e400", "SendMessage", b"{" + send + b', "DelaySeconds": -1e400}'),
        ("1e-400", "SendMessage", b"{" + send + b', "DelaySeconds": 1e-400}'),
        ("2**63", "ReceiveMessage", b'{"QueueUrl": ' + U + b', "WaitTimeSeconds": 9223372036854775808}'),
        ("-2**31-1", "ReceiveMessage", b'{"QueueUrl": ' + U + b', "WaitTimeSeconds": -2147483649}'),
        ("1.0", "ReceiveMessage", b'{"QueueUrl": ' + U + b', "MaxNumberOfMessages": 1.0}'),
        ("NaN", "SendMessage", b"{" + send + b', "DelaySeconds": NaN}'),
        ("Infinity", "SendMessage", b"{" + send + b', "DelaySeconds": -Infinity}'),
        ("true", "ReceiveMessage", b'{"QueueUrl": ' + U + b', "MaxNumberOfMessages": true}'),
        # Deep nesting, in a member and in one no action reads.
        ("deep lists", "SendMessage", b"[" * DEEP + b"]" * DEEP),
        ("deep objects", "SendMessage", b"{" + send + b', "X": ' + b'{"a": ' * DEEP + b"1" + b"}" * DEEP + b"}"),
        ("deep entries", "SendMessageBatch", b'{"QueueUrl": ' + U + b', "Entries": ' + b"[" * 300 + b"]" * 300 + b"}"),
        # Bytes that are no UTF-8, a BOM, UTF-16.
        ("0xff", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\xff"}'),
        ("0xff key", "SendMessage", b"{" + send + b', "\xff": 1}'),
        ("cut sequence", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\xe2\x82"}'),
        ("overlong", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\xc0\xaf"}'),
        ("utf-8 surrogate", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\xed\xa0\x80"}'),
        ("past U+10FFFF", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\xf4\x90\x80\x80"}'),
        ("BOM", "SendMessage", b"\xef\xbb\xbf{" + send + b"}"),
        ("UTF-16", "SendMessage", ("{" + send.decode() + "}").encode("utf-16")),
        # Something after the object.
        ("trailing word", "SendMessage", b"{" + send + b"} x"),
        ("trailing object", "SendMessage", b"{" + send + b"}{}"),
        ("trailing NUL", "SendMessage", b"{" + send + b"}\x00"),
        ("trailing comma", "SendMessage", b"{" + send + b",}"),
        ("two objects", "SendMessageBatch", b'{"QueueUrl": ' + U + b'}\n{"Entries": []}'),
        # Long strings where the action refuses them.
        ("long url", "SendMessage", b'{"QueueUrl": "' + b"u" * 1_000_000 + b'", "MessageBody": "x"}'),
        ("long body", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "' + b"b" * 1_100_000 + b'"}'),
        ("long name", "CreateQueue", b'{"QueueName": "' + b"n" * 500_000 + b'"}'),
        ("long escapes", "CreateQueue", b'{"QueueName": "' + b"\\u0000" * 100_000 + b'"}'),
        # Lone surrogates, escaped.
        ("lone high", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\\ud800"}'),
        ("lone low", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\\udc00"}'),
        ("reversed pair", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\\udc00\\ud800"}'),
        ("high then text", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\\ud800\\u0041"}'),
        ("cut escape", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "\\ud8"}'),
        ("surrogate key", "SendMessage", b"{" + send + b', "\\udfff": 1}'),
        ("surrogate tag", "TagQueue", b'{"QueueUrl": ' + U + b', "Tags": {"\\ud800": "v"}}'),
        # Not an object; raw control characters.
        ("list", "SendMessageBatch", b"[]"),
        ("string", "CreateQueue", b'"x"'),
        ("null", "CreateQueue", b"null"),
        ("raw NUL", "SendMessage", b'{"QueueUrl": ' + U + b', "MessageBody": "a\x00b"}'),
        ("raw LF", "CreateQueue", b'{"QueueName": "a\nb"}'),
        ("NUL body", "CreateQueue", b"\x00"),
        ("form feed", "CreateQueue", b"\x0c{}"),
    ]  # fmt: skip
    return found


BODIES = _bodies()


@pytest.mark.parametrize("fast_path", [True, False], ids=["lane", "fastapi"])
def test_the_json_parser_refuses_as_sqs_refuses(db_url: str, fast_path: bool) -> None:
    with SqsServer(db_url, fast_path=fast_path, max_request_bytes=2 * 1024 * 1024) as server:
        admin = server.key("*:*")
        host = server.url.removeprefix("http://")
        signer = Signer(admin.key_id, admin.secret, REGION, host)
        url = f"{server.url}/{ACCOUNT}/held"
        with httpx.Client(base_url=server.url, timeout=60) as http:
            created = http.put("/v1/queues/held", json={}, headers={"Authorization": f"Bearer {admin.bearer}"})
            assert created.status_code == 201
            before = server.snapshot()
            for label, action, body in BODIES:
                body = body.replace(URL.encode(), url.encode())
                answer = http.post("/", content=body, headers=signer.headers(f"AmazonSQS.{action}", body))
                assert 400 <= answer.status_code < 500, (label, answer.status_code, answer.text[:300])
                assert answer.headers["content-type"] == JSON_CONTENT_TYPE, label
                assert answer.headers["x-amzn-query-error"].endswith(";Sender"), label
                error = json.loads(answer.content)
                assert set(error) == {"__type", "message"}, (label, error)
                assert error["__type"].startswith("com.amazonaws.sqs#"), (label, error)
                # Whatever the body held, the message quotes it printable and bounded: at most 100
                # characters of it, each escaped to at most 10 (`\\U0010ffff`).
                assert len(error["message"]) < 1_200 and error["message"].isprintable(), (label, error["message"][:400])
            assert server.snapshot() == before
            # The same body, well formed, is taken (the probes can fail).
            body = b'{"QueueUrl": ' + json.dumps(url).encode() + b', "MessageBody": "x"}'
            answer = http.post("/", content=body, headers=signer.headers("AmazonSQS.SendMessage", body))
            assert answer.status_code == 200, answer.text
