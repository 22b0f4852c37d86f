"""Every route x every action a key can lack x a corpus of path manglings, over real sockets, in each
way the service can serve a request (tests/security/harness.py): the answer is a refusal and
nothing changes.

Why: the access check once matched paths with its own table while the router matched them with
FastAPI's patterns; the two disagreed about `.../purge%0A` (a regular expression's `$` accepts a
trailing newline), and a key scoped to `app-*:send` could purge any queue. Authorization now
happens on the very match that dispatches a request; this corpus is how we keep believing it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from app.access import ACTIONS, Action
from app.domain import DeadLetter, QueueAttributes, SendEntry
from tests.api.helpers import ACTIONS_BY_ROUTE
from tests.api.helpers import lacking as without
from tests.security.harness import MODES, Answer, Server, exchange, raw_request, serving

VICTIM = "victim"
SECRET = "secret-body-7f3a"
# An answer that refuses: parser (400), no key (401), no grant (403), no route (404), no method (405).
REFUSALS = {400, 401, 403, 404, 405}


@pytest_asyncio.fixture(params=MODES)
async def server(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[Server]:
    async with serving(db_url, request.param) as served:
        yield served


async def stage(server: Server) -> str:
    """`victim` (with the dead-letter queue `victim-dlq`) holding two messages, one of them in
    flight; `app-x` beside it. Returns the in-flight message's receipt handle."""
    queues, messages = server.app.state.queues, server.app.state.messages
    await queues.create("victim-dlq", QueueAttributes())
    await queues.create(VICTIM, QueueAttributes(dead_letter=DeadLetter("victim-dlq", 5)))
    await queues.create("app-x", QueueAttributes())
    await messages.send(VICTIM, [SendEntry(body={"s": SECRET}), SendEntry(body={"s": SECRET})])
    # Held for an hour: the corpus takes tens of seconds on a loaded machine, and a lease that
    # ran out meanwhile would change the snapshot and the in-flight count with no request.
    [held] = await messages.receive(VICTIM, max_messages=1, wait_seconds=0, visibility_timeout=3600, consumer_id="w")
    return str(held.receipt_handle)


def requests(handle: str, keys: list[str]) -> list[tuple[str, str, bytes | None, Action]]:
    """One request per /v1 route (method, path, body, action), each naming the victim's queues."""
    entry = f'{{"id": "e", "receipt_handle": "{handle}"}}'
    base = f"/v1/queues/{VICTIM}"
    found = [
        ("PUT", base, b"{}", "admin"),
        ("GET", "/v1/queues", None, "read"),
        ("GET", base, None, "read"),
        ("PATCH", base, b'{"visibility_timeout": 99}', "admin"),
        ("DELETE", base, None, "admin"),
        ("POST", f"{base}/purge", None, "admin"),
        ("POST", "/v1/queues/victim-dlq/redrive", None, "admin"),
        ("POST", f"{base}/messages", b'{"body": 1}', "send"),
        ("POST", f"{base}/messages/batch", b'{"entries": [{"id": "a", "body": 1}]}', "send"),
        ("POST", f"{base}/messages/receive", b'{"max_messages": 10, "wait_seconds": 0}', "receive"),
        ("POST", f"{base}/messages/ack", f'{{"entries": [{entry}]}}'.encode(), "ack"),
        ("POST", f"{base}/messages/nack", f'{{"entries": [{entry}]}}'.encode(), "ack"),
        ("POST", f"{base}/messages/visibility", b'{"entries": []}', "ack"),
        ("POST", f"{base}/messages/release", b'{"consumer_id": "w"}', "ack"),
        ("DELETE", f"{base}/messages/{handle}", None, "ack"),
        ("GET", f"{base}/messages", None, "read"),
        ("GET", f"{base}/throughput", None, "read"),
        ("GET", f"{base}/groups", None, "read"),
        ("GET", f"{base}/history", None, "read"),
        # The keys: no queue in the path, so admin on `*` (the corpus' keys lacking admin, or
        # holding it on `app-*` only, may not); ids of real keys, to revoke or to read.
        ("GET", "/v1/keys", None, "admin"),
        ("POST", "/v1/keys", b'{"name": "x", "grants": [{"queues": "*", "actions": ["read"]}]}', "admin"),
        ("DELETE", f"/v1/keys/{keys[0]}", None, "admin"),
    ]
    covered = {(m, p.replace("/victim-dlq", "/{name}").replace(f"/{VICTIM}", "/{name}")) for m, p, _, _ in found}
    covered = {(m, p.replace(handle, "{receipt_handle}").replace(keys[0], "{key_id}")) for m, p in covered}
    # GET /metrics has this corpus of its own (tests/security/test_attack_observability.py): there
    # a request without a key is refused 403, not 401 (from the metrics networks it needs none).
    assert covered == set(ACTIONS_BY_ROUTE) - {("GET", "/metrics")}, "a route of the API is missing from this corpus"
    return found


Mangle = Callable[[bytes, bytes, int], tuple[bytes, bytes]]


def _suffix(text: bytes) -> Mangle:
    return lambda method, target, _: (method, target + text)


def _name(text: bytes) -> Mangle:
    """Replace the first queue-name segment (`/victim...`) with `text`."""

    def mangle(method: bytes, target: bytes, _: int) -> tuple[bytes, bytes]:
        head, sep, tail = target.partition(b"/v1/queues/")
        if not sep:
            return method, target + text
        name, slash, rest = tail.partition(b"/")
        return method, head + sep + text.replace(b"NAME", name) + slash + rest

    return mangle


def _prefix(old: bytes, new: bytes) -> Mangle:
    return lambda method, target, _: (method, target.replace(old, new, 1))


def _last_upper(method: bytes, target: bytes, _: int) -> tuple[bytes, bytes]:
    head, _, last = target.rpartition(b"/")
    return method, head + b"/" + last.upper()


MANGLINGS: dict[str, Mangle] = {
    # Encoded control characters and separators after the path.
    **{f"suffix {s.decode()}": _suffix(s) for s in [b"%0A", b"%0D", b"%0D%0A", b"%09", b"%00", b"%0B", b"%7F"]},
    **{f"suffix {s.decode()}": _suffix(s) for s in [b"%20", b"%2F", b"%2F..", b"%2e", b"%250A", b"%C0%AF"]},
    **{f"suffix {s.decode()}": _suffix(s) for s in [b"/", b"//", b"/.", b"/..", b"/%2e%2e", b";", b";x=1", b"%3B"]},
    **{f"suffix {s.decode()}": _suffix(s) for s in [b"\\", b"%5C", b"%E2%81%84", b"%EF%BC%8F", b"#x", b"?q=%0A"]},
    # Raw bytes in the request target.
    **{f"raw {s!r}": _suffix(s) for s in [b"\n", b"\r", b"\t", b"\x00", b"\x0b", b"\x7f", b"\r\n"]},
    # The queue name segment.
    **{
        f"name {s.decode()}": _name(s)
        for s in [
            b"NAME%0A",
            b"NAME%00",
            b"NAME%0D%0A",
            b"NAME%20",
            b"%20NAME",
            b"NAME/",
            b"NAME%2F",
            b"app-x%2F..%2FNAME",
            b"app-x/../NAME",
            b"./NAME",
            b"%2e/NAME",
            b"VICTIM",
            b"vict%69m",
            b"v%D1%96ctim",  # Cyrillic i
            b"%EF%BD%96ictim",  # fullwidth v
            b"victim%E2%80%8B",  # zero-width space
            b"app-%2A",
            b"app-x%0A",
            b"app-x/%2e%2e/NAME",
            b"app-x%5C..%5CNAME",
        ]
    },
    # Slashes and case in the fixed part.
    "leading //": _prefix(b"/v1/", b"//v1/"),
    "v1//queues": _prefix(b"/v1/", b"/v1//"),
    "/./v1": _prefix(b"/v1/", b"/./v1/"),
    "/v1/x/../queues": _prefix(b"/v1/", b"/v1/x/../"),
    "V1": _prefix(b"/v1/", b"/V1/"),
    "QUEUES": _prefix(b"/queues", b"/QUEUES"),
    "%76%31": _prefix(b"/v1/", b"/%76%31/"),
    "queues%2F": _prefix(b"/queues/", b"/queues%2F"),
    "KEYS": _prefix(b"/keys", b"/KEYS"),
    "keys%2F": _prefix(b"/keys/", b"/keys%2F"),
    "keys/self/..": _prefix(b"/keys", b"/keys/self/.."),
    "last segment upper": _last_upper,
    # Absolute-form request targets (RFC 9112 3.2.2), pointing here and elsewhere.
    "absolute here": lambda m, t, port: (m, b"http://127.0.0.1:%d" % port + t),
    "absolute elsewhere": lambda m, t, _: (m, b"http://evil.example" + t),
    "absolute upper scheme": lambda m, t, port: (m, b"HTTP://127.0.0.1:%d" % port + t + b"%0A"),
    "absolute, no path": lambda m, t, _: (m, b"http://127.0.0.1" + t.replace(b"/v1", b"v1", 1)),
    # The method.
    "method lowercase": lambda m, t, _: (m.lower(), t),
    "method padded": lambda m, t, _: (m + b" ", t),
    # Tunnelled as POST (PUT for a POST) with the real verb in X-HTTP-Method-Override, which
    # must not be honoured: no route takes these verbs at these paths. (GET would be a real
    # request now: a look at the messages, which a key with admin may take.)
    "method override header": lambda m, t, _: (b"PUT" if m == b"POST" else b"POST", t),
}


def check(answer: Answer, allowed: set[int], label: str, ours: bool) -> None:
    """A refusal in `allowed` with the house error body (uvicorn's own protocols answer what they
    cannot parse in plain text: only `pqs serve`'s must use the house shape for those too)."""
    assert answer.status in allowed, (label, answer.status, answer.body[:200])
    assert SECRET.encode() not in answer.body, label
    if ours or answer.headers.get("content-type") == "application/json":
        assert answer.headers.get("content-type") == "application/json", (label, answer.body[:200])
        error = answer.json()["error"]
        assert set(error) == {"code", "message"} and error["code"] and error["message"], label


async def test_no_mangling_reaches_an_action_the_key_lacks(server: Server) -> None:
    handle = await stage(server)
    admin = await server.key("*:*")
    # Each action missing in turn (with those that imply it), on every queue; and every action, on
    # other queues only.
    lacking = {a: await server.key("*:" + without(a)) for a in ACTIONS}
    elsewhere = await server.key("app-*:*")
    victim_key = await server.key("app-x:send")  # the key the corpus tries to revoke
    before = await server.snapshot()
    keys_before = await server.key_rows()
    sent = 0
    corpus = requests(handle, [victim_key.split("_")[1]])
    for method, path, body, action in corpus:
        for key in (lacking[action], elsewhere, None):
            # The request as written: 403 (401 without a key), so the corpus reaches the route.
            plain = await exchange(server.port, raw_request(method.encode(), path.encode(), key, body))
            check(plain, {403} if key else {401}, f"{method} {path}", server.ours)
            for label, mangle in MANGLINGS.items():
                verb, target = mangle(method.encode(), path.encode(), server.port)
                extra = b"X-HTTP-Method-Override: " + method.encode() + b"\r\n" if "override" in label else b""
                answer = await exchange(server.port, raw_request(verb, target, key, body, extra))
                allowed = REFUSALS - ({403} if key is None else set())
                check(answer, allowed, f"{method} {path} [{label}]", server.ours)
                sent += 1
    assert await server.snapshot() == before, "a refused request changed something"
    assert await server.key_rows() == keys_before, "a refused request made or revoked a key"
    assert sent == len(corpus) * 3 * len(MANGLINGS)
    # The same requests with a key that has the action do reach the queues (the test can fail).
    got = await exchange(server.port, raw_request(b"GET", b"/v1/queues/victim", admin))
    assert got.status == 200 and got.json()["stats"]["in_flight"] == 1
    purged = await exchange(server.port, raw_request(b"POST", b"/v1/queues/victim/purge", admin))
    assert purged.status == 200 and purged.json() == {"count": 2}
    listed = await exchange(server.port, raw_request(b"GET", b"/v1/keys", admin))
    assert listed.status == 200 and victim_key.split("_")[1] in {k["key_id"] for k in listed.json()["keys"]}


def test_the_corpus_covers_what_the_issue_lists() -> None:
    labels = " ".join(MANGLINGS)
    for needed in ["%0A", "%0D", "%09", "%00", "raw b'\\n'", "raw b'\\r'", "raw b'\\t'", "raw b'\\x00'", "%2F"]:
        assert needed in labels, needed
    for needed in ["..", "//", "suffix /", "V1", "QUEUES", "upper", "absolute", "%D1%96", "%EF%BD%96", "%E2%80%8B"]:
        assert needed in labels, needed


async def test_manglings_of_the_open_and_self_routes_answer_only_what_they_serve(server: Server) -> None:
    """The routes any caller (the dashboard's files) or any valid key (`/v1/keys/self`) may take:
    a mangled path answers a refusal, or exactly what the plain path answers (never another file,
    never another key), and changes nothing."""
    await stage(server)
    reader = await server.key("app-x:read")
    before, keys_before = await server.snapshot(), await server.key_rows()
    sent = 0
    for path, key in (("/ui", None), ("/ui/app.js", None), ("/ui/style.css", None), ("/v1/keys/self", reader)):
        plain = await exchange(server.port, raw_request(b"GET", path.encode(), key))
        assert plain.status == 200, path
        for label, mangle in MANGLINGS.items():
            verb, target = mangle(b"GET", path.encode(), server.port)
            extra = b"X-HTTP-Method-Override: GET\r\n" if "override" in label else b""
            answer = await exchange(server.port, raw_request(verb, target, key, None, extra))
            if answer.status == 200:
                assert answer.body == plain.body, (path, label)
            else:
                check(answer, REFUSALS, f"GET {path} [{label}]", server.ours and path.startswith("/v1"))
            sent += 1
    assert sent == 4 * len(MANGLINGS)
    assert await server.snapshot() == before and await server.key_rows() == keys_before
