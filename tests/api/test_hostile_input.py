"""Hostile input gets a 4xx and changes nothing, through the hot lane and through FastAPI.

Every string a request can carry is found by walking the app's OpenAPI document (path and query
parameters, and request bodies recursively: properties, array items, the keys and values of
objects, and `any JSON` values), so a string field added later is covered without a new test.
Each is sent once with a NUL character and once with a lone surrogate, planted in an otherwise
valid request (the operation's base request below, which a control sends last and which must
succeed). PostgreSQL text and jsonb cannot hold NUL, and a lone surrogate has no UTF-8 form: the
answer must be a 4xx in the house error shape (or, for a batch, the entry in `failed`), never a
500, and every table of the database must be as it was.

Also: JSON nested 10,000 deep to every operation with a body, and errors quoting a
100,000-character input.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_from_bytes

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from app import openapi
from app.access import parse_grant
from app.db.engine import Database
from app.db.rows import Conn
from app.service.keys import create_key
from tests.api.helpers import assert_error, lenient_client

DOCUMENT = openapi.document()
METHODS = ("get", "put", "post", "patch", "delete")
BAD = {"nul": "\x00", "surrogate": "\ud800"}
Op = tuple[str, str]  # (method, path template)


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


KEY = _Marker("<key>")  # a key of the object here
VALUE = _Marker("<value>")  # the value of the object's first key
Step = str | int | _Marker


@dataclass(frozen=True)
class Spot:
    """Where a string goes in a request: a path or query parameter, or a place in the body."""

    where: str  # "path", "query" or "body"
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return f"{self.where}:{'.'.join(map(str, self.steps)) or '(whole)'}"


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    return _resolve(DOCUMENT["components"]["schemas"][ref.rsplit("/", 1)[-1]])


def _strings(schema: dict[str, Any], steps: tuple[Step, ...]) -> Iterator[tuple[Step, ...]]:
    """The places in a document of `schema` that hold a string (or can: any JSON value)."""
    schema = _resolve(schema)
    for option in schema.get("anyOf", ()):
        yield from _strings(option, steps)
    kind = schema.get("type")
    if kind == "string":
        yield steps
    elif kind == "array":
        yield from _strings(schema["items"], (*steps, 0))
    elif kind == "object" or "properties" in schema:
        for name, sub in schema.get("properties", {}).items():
            yield from _strings(sub, (*steps, name))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            yield (*steps, KEY)
            yield from _strings(extra, (*steps, VALUE))
    elif kind is None and "anyOf" not in schema:  # any JSON value: a string, or an object's key
        yield steps
        yield (*steps, KEY)


def spots(operation: dict[str, Any]) -> list[Spot]:
    """Every place of an operation's request that holds a string."""
    found = [
        Spot(param["in"], (param["name"],))
        for param in operation.get("parameters", ())
        if _resolve(param["schema"]).get("type") == "string"
    ]
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        found += [Spot("body", steps) for steps in _strings(body["schema"], ())]
    return list(dict.fromkeys(found))


def operations() -> dict[Op, dict[str, Any]]:
    return {
        (method, path): operation
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


@dataclass
class State:
    """What the base requests refer to: queues std (with dead-letter queue dlq), jobs.fifo and
    spare; in std one message visible and one in flight under `handle`, held by consumer w1."""

    handle: str = ""
    key_id: str = ""


@dataclass
class Base:
    """A valid request of an operation, given the State."""

    path: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None
    batch: bool = False  # answers {successful, failed} per entry


MESSAGE = {
    "body": {"task": "x"},
    "group_id": "g",
    "attributes": {"k": "v"},
    "attribute_types": {"n": {"data_type": "Number", "value": "1"}},
    "trace_header": "t",
}


def base_request(op: Op, state: State) -> Base:
    """The operation's base request: every string the schema has is present, with a valid value."""
    std, handle = {"name": "std"}, state.handle
    bases: dict[Op, Base] = {
        ("put", "/v1/queues/{name}"): Base(
            {"name": "fresh"},
            body={
                "deduplication_scope": "queue",
                "dead_letter": {"queue": "dlq", "max_receive_count": 3},
                "dead_letter_for": ["jobs"],
            },
        ),
        ("patch", "/v1/queues/{name}"): Base(
            std,
            body={
                "deduplication_scope": "group",
                "dead_letter": {"queue": "dlq", "max_receive_count": 4},
                "dead_letter_for": ["jobs"],
            },
        ),
        ("get", "/v1/queues"): Base(query={"prefix": "s", "after": "a"}),
        ("get", "/v1/queues/{name}"): Base(std),
        ("get", "/v1/queues/{name}/messages"): Base(std, query={"limit": "5"}),
        ("get", "/v1/queues/{name}/throughput"): Base(std, query={"minutes": "5"}),
        ("get", "/v1/queues/{name}/groups"): Base({"name": "jobs.fifo"}, query={"limit": "5"}),
        ("delete", "/v1/queues/{name}"): Base({"name": "spare"}),
        ("post", "/v1/queues/{name}/purge"): Base(std),
        ("post", "/v1/queues/{name}/redrive"): Base(
            {"name": "dlq"}, body={"group_id": "g", "source_queue": "std", "dry_run": True}
        ),
        ("get", "/v1/queues/{name}/history"): Base(std, query={"group_id": "g", "outcome": "acked", "limit": "5"}),
        ("post", "/v1/queues/{name}/messages"): Base({"name": "jobs.fifo"}, body={**MESSAGE, "dedup_id": "d1"}),
        ("post", "/v1/queues/{name}/messages/batch"): Base(
            {"name": "jobs.fifo"}, body={"entries": [{**MESSAGE, "id": "e1", "dedup_id": "d2"}]}, batch=True
        ),
        ("post", "/v1/queues/{name}/messages/receive"): Base(
            std, body={"max_messages": 1, "wait_seconds": 0, "attempt_id": "a1", "consumer_id": "w2"}
        ),
        ("post", "/v1/queues/{name}/messages/ack"): Base(
            std, body={"entries": [{"id": "e1", "receipt_handle": handle, "result": {"ok": 1}}]}, batch=True
        ),
        ("post", "/v1/queues/{name}/messages/nack"): Base(
            std, body={"entries": [{"id": "e1", "receipt_handle": handle, "error": {"why": "x"}}]}, batch=True
        ),
        ("post", "/v1/queues/{name}/messages/visibility"): Base(
            std, body={"entries": [{"id": "e1", "receipt_handle": handle, "visibility_timeout": 60}]}, batch=True
        ),
        ("post", "/v1/queues/{name}/messages/release"): Base(std, body={"consumer_id": "w1"}),
        ("delete", "/v1/queues/{name}/messages/{receipt_handle}"): Base({"name": "std", "receipt_handle": handle}),
        ("post", "/v1/keys"): Base(body={"name": "k", "grants": [{"queues": "std", "actions": ["read"]}]}),
        ("delete", "/v1/keys/{key_id}"): Base({"key_id": state.key_id}),
    }
    return bases[op]


TEXT_OPERATIONS = sorted(op for op, operation in operations().items() if spots(operation))
# Some of what the walk must find (the strings issue 18 found answered with a 500): a check of the walk.
KNOWN_SPOTS = {
    ("post", "/v1/queues/{name}/messages/receive"): {"body:attempt_id", "body:consumer_id"},
    ("post", "/v1/queues/{name}/messages/release"): {"body:consumer_id"},
    ("put", "/v1/queues/{name}"): {"path:name", "body:dead_letter.queue", "body:dead_letter_for.0"},
    ("patch", "/v1/queues/{name}"): {"body:dead_letter.queue", "body:dead_letter_for.0"},
    ("post", "/v1/queues/{name}/messages/batch"): {"body:entries.0.body.<key>", "body:entries.0.attributes.<value>"},
}


def planted(document: Any, steps: tuple[Step, ...], bad: str) -> Any:
    """`document` with `bad` added to the string at `steps` (to an object's first key, for KEY)."""
    if not steps:
        return document + bad if isinstance(document, str) else "x" + bad
    step, rest = steps[0], steps[1:]
    if step is KEY:
        assert isinstance(document, dict) and document, "the base request needs a non-empty object here"
        first = next(iter(document))
        return {(k + bad if k == first else k): v for k, v in document.items()}
    if step is VALUE:
        step = next(iter(document))
    if isinstance(step, int):
        assert isinstance(document, list) and document, "the base request needs a non-empty list here"
        step = 0
    else:
        assert isinstance(document, dict) and step in document, f"the base request lacks {step!r}"
    document[step] = planted(document[step], rest, bad)
    return document


def _escaped(text: str) -> str:
    # A lone surrogate goes as its (invalid) UTF-8 bytes, which is all a URL can carry.
    return quote_from_bytes(text.encode("utf-8", "surrogatepass"), safe="")


def http_request(op: Op, base: Base, spot: Spot | None = None, bad: str = "") -> tuple[str, str, bytes | None]:
    """(method, url, JSON body) of the base request, with `bad` planted at `spot`."""
    params, query, body = dict(base.path), dict(base.query), copy.deepcopy(base.body)
    if spot is not None and spot.where == "body":
        body = planted(body, spot.steps, bad)
    elif spot is not None:
        [name] = spot.steps
        target = params if spot.where == "path" else query
        target[name] = target.get(name, "") + bad
    method, path = op
    url = path.format(**{k: _escaped(v) for k, v in params.items()})
    if query:
        url += "?" + "&".join(f"{k}={_escaped(v)}" for k, v in query.items())
    return method.upper(), url, None if body is None else json.dumps(body).encode()


async def call(http: httpx.AsyncClient, method: str, url: str, content: bytes | None) -> httpx.Response:
    headers = {"content-type": "application/json"} if content is not None else {}
    return await http.request(method, url, content=content, headers=headers)


async def fingerprint(app: FastAPI) -> dict[str, str]:
    """A digest of every row of every table: equal fingerprints mean nothing changed."""

    async def read(conn: Conn) -> dict[str, str]:
        cur = await conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        tables = [row["tablename"] for row in await cur.fetchall()]
        digests = {}
        for table in tables:  # names from the catalog, not input
            cur = await conn.execute(
                f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS d FROM \"{table}\" t"
            )
            row = await cur.fetchone()
            assert row is not None
            digests[table] = row["d"]
        return digests

    db: Database = app.state.db
    return await db.run(read)


@pytest_asyncio.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with lenient_client(app) as client:
        yield client


async def arrange(http: httpx.AsyncClient) -> State:
    """The State the base requests refer to."""
    for name, attributes in [
        ("dlq", {}),
        ("std", {"dead_letter": {"queue": "dlq", "max_receive_count": 5}}),
        ("jobs.fifo", {"fifo": True}),
        ("spare", {}),
    ]:
        assert (await http.put(f"/v1/queues/{name}", json=attributes)).status_code == 201
    for n in range(2):
        assert (await http.post("/v1/queues/std/messages", json={"body": n})).status_code == 201
    got = await http.post("/v1/queues/std/messages/receive", json={"consumer_id": "w1"})
    [message] = got.json()["messages"]
    made = await http.post("/v1/keys", json={"name": "spare", "grants": [{"queues": "std", "actions": ["send"]}]})
    return State(handle=message["receipt_handle"], key_id=made.json()["api_key"]["key_id"])


@pytest.mark.parametrize("op", TEXT_OPERATIONS, ids=[f"{m}:{p}" for m, p in TEXT_OPERATIONS])
async def test_nul_and_lone_surrogates_in_every_string_are_refused(
    app: FastAPI, http: httpx.AsyncClient, op: Op
) -> None:
    state = await arrange(http)
    base = base_request(op, state)  # a KeyError: a new operation takes text; give it a base request
    found = spots(operations()[op])
    assert KNOWN_SPOTS.get(op, set()) <= {str(spot) for spot in found}
    for spot in found:
        for label, bad in BAD.items():
            before = await fingerprint(app)
            response = await call(http, *http_request(op, base, spot, bad))
            where = f"{op[0].upper()} {op[1]} with {label} at {spot}"
            assert response.status_code < 500, f"{where}: {response.text}"
            if response.status_code >= 400:
                assert_error(response, response.status_code)
            elif base.batch and spot.where == "body":
                answer = response.json()
                assert answer["successful"] == [] and answer["failed"], f"{where}: {answer}"
            else:
                # The URL of a GET carried the surrogate's bytes, which arrive as U+FFFD: text.
                assert label == "surrogate" and spot.where != "body" and op[0] == "get", f"{where}: {response.text}"
            assert await fingerprint(app) == before, f"{where} changed the database"
    control = await call(http, *http_request(op, base))
    assert control.is_success, control.text
    if base.batch:
        assert control.json()["failed"] == [], control.text


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


BODY_OPERATIONS = sorted(op for op, operation in operations().items() if "requestBody" in operation)


async def test_json_nested_10000_deep_is_a_400(app: FastAPI, http: httpx.AsyncClient) -> None:
    state = await arrange(http)
    assert len(BODY_OPERATIONS) >= 9  # the six hot routes, release, PUT and PATCH of a queue
    before = await fingerprint(app)
    for op in BODY_OPERATIONS:
        method, url, _ = http_request(op, base_request(op, state))
        for content in (nested(10_000), '{"body": ' + nested(10_000) + "}"):
            response = await call(http, method, url, content.encode())
            error = assert_error(response, 400, "invalid_request")
            assert "nested too deeply" in error["message"], (op, error)
    for depth in (1_000, 10_000):
        response = await call(http, "POST", "/v1/queues/std/messages", b'{"body": ' + nested(depth).encode() + b"}")
        assert_error(response, 400)
    assert await fingerprint(app) == before


async def asgi_request(app: FastAPI, method: str, path: str, key: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """A request straight to the ASGI app: httpx refuses URLs over 64 KiB, a server need not."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"pqs.test"),
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("pqs.test", 80),
        "extensions": {},
    }
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return pending.pop() if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(content)


LONG = "n" * 100_000
ECHO_BOUND = 300  # the message around a quote of at most 100 characters


def assert_bounded(status: int, payload: dict[str, Any], expected: int) -> str:
    assert status == expected, payload
    message: str = payload["error"]["message"]
    assert len(message) <= ECHO_BOUND, message[:400]
    return message


async def test_errors_quote_at_most_100_characters_of_input(app: FastAPI, http: httpx.AsyncClient) -> None:
    await arrange(http)
    admin = http.headers["Authorization"].removeprefix("Bearer ")
    db: Database = app.state.db
    _, other = await db.run(lambda conn: create_key(conn, "other queues", (parse_grant("other-*:*"),)))
    before = await fingerprint(app)
    cut = f"… ({len(LONG):,} characters)"
    body = json.dumps({"fifo": False}).encode()
    for path in (f"/v1/queues/{LONG}", f"/v1/queues/{LONG}/messages"):
        method = "PUT" if path.endswith(LONG) else "POST"
        status, payload = await asgi_request(app, method, path, admin, b'{"body": 1}' if method == "POST" else body)
        assert_bounded(status, payload, 400)
        status, payload = await asgi_request(app, method, path, other, body)
        assert cut in assert_bounded(status, payload, 403)
    quoting = [
        ("POST", "/v1/queues/std/messages", {"body": 1, "attributes": {LONG: "v"}}),
        ("POST", "/v1/queues/std/messages", {"body": 1, LONG: 1}),
        ("PUT", "/v1/queues/fresh", {LONG: 1}),
        ("POST", "/v1/queues/std/messages/receive", {LONG: 1}),
    ]
    for method, url, document in quoting:
        response = await http.request(method, url, json=document)
        assert cut in assert_bounded(response.status_code, response.json(), 400)
    response = await http.put("/v1/queues/fresh", json={"dead_letter": {"queue": LONG, "max_receive_count": 1}})
    assert_bounded(response.status_code, response.json(), 400)
    batch = {"entries": [{"id": "e1", "body": 1, "attributes": {LONG: "v"}}]}
    response = await http.post("/v1/queues/std/messages/batch", json=batch)
    [failure] = response.json()["failed"]
    assert len(failure["message"]) <= ECHO_BOUND and cut in failure["message"]
    assert await fingerprint(app) == before
