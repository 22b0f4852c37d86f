"""Generated request targets against a served app (tests/security/harness.py): paths assembled from
the API's own words, queue names and mangled pieces (encoded and raw control characters, dots,
doubled slashes, case, lookalikes, absolute forms), with methods and bodies, sent with keys that
may not touch the victim's queues. Whatever the path, the answer is never a 5xx, the victim's
messages are never read, its queues never listed, and nothing of it changes.

`PQS_PROPERTY_PROFILE=pqs-explore` runs a long random search (tests/property/profile.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.db.rows import Conn
from tests.api.helpers import ACTIONS_BY_ROUTE
from tests.property.profile import PROPERTY
from tests.security.harness import MODES, Threaded, exchange, raw_request
from tests.security.test_route_manglings import SECRET, stage

WORDS = [
    "v1", "V1", "queues", "Queues", "victim", "VICTIM", "victim-dlq", "app-x", "app-y", "messages",
    "batch", "receive", "ack", "nack", "visibility", "release", "purge", "redrive", "RECEIPT", "",
    "keys", "self", "KEYID",
    ".", "..", "%2e%2e", "%2E", "%76ictim", "v%D1%96ctim", "%EF%BD%96ictim", "app-%2A", "*",
]  # fmt: skip
DECORATIONS = [
    "", "", "", "%0A", "%0D", "%0D%0A", "%00", "%09", "%20", "%2F", "%2f..", "%5C", ";", ";x",
    "%25", "%250A", "%C0%AF", "%E2%80%8B", "\n", "\r", "\t", "\x00", " ", "#", "?a=%0A",
]  # fmt: skip
NAMES = ["victim", "victim", "victim-dlq", "app-x", "VICTIM", "app-x/../victim"]
CONTROLS = ["%0A", "%0D", "%0D%0A", "%00", "%09", "%0B", "%0C", "%1F", "%7F", "%0A%0A"]
SEPARATORS = ["/", "/", "/", "/", "//", "\\", "/./", "%2F"]
METHODS = [b"GET", b"PUT", b"PATCH", b"DELETE", b"POST", b"POST", b"POST", b"HEAD", b"OPTIONS", b"post"]
BODIES = [
    None,
    b"{}",
    b'{"body": 1}',
    b'{"max_messages": 10, "wait_seconds": 0, "visibility_timeout": 600}',
    b'{"entries": [{"id": "a", "body": 1}]}',
    b'{"entries": [{"id": "e", "receipt_handle": "RECEIPT"}]}',
    b'{"consumer_id": "w"}',
    b'{"visibility_timeout": 7, "dead_letter": null}',
    b'{"name": "k", "grants": [{"queues": "*", "actions": ["admin"]}]}',
]

segment = st.tuples(st.sampled_from(WORDS), st.sampled_from(DECORATIONS), st.booleans()).map(
    lambda t: t[1] + t[0] if t[2] else t[0] + t[1]
)


def _join(draw: st.DrawFn, words: list[str]) -> str:
    path = "".join(draw(st.sampled_from(SEPARATORS)) + word for word in words) or "/"
    prefix = draw(st.sampled_from(["", "", "", "http://127.0.0.1", "http://evil.example", "HTTP://127.0.0.1:1"]))
    return prefix + path


@st.composite
def requests(draw: st.DrawFn) -> tuple[bytes, str]:
    """A method and request target: half of them one of the API's routes bent here and there (a
    decorated segment, a separator, an absolute form), half assembled freely from its words."""
    if draw(st.booleans()):
        method, template = draw(st.sampled_from(sorted(ACTIONS_BY_ROUTE)))
        names = {"{name}": draw(st.sampled_from(NAMES)), "{receipt_handle}": "RECEIPT", "{key_id}": "KEYID"}
        words = [names.get(word, word) for word in template.strip("/").split("/")]
        # Where matchers disagree is mostly at the end of a path ($ before a newline), so half the
        # bends go there; control characters are half of what is put in.
        bent = draw(st.sets(st.integers(0, len(words) - 1), max_size=2))
        for index in bent | ({len(words) - 1} if draw(st.booleans()) else set()):
            decoration = draw(st.sampled_from(CONTROLS) | st.sampled_from(DECORATIONS))
            before = index in bent and draw(st.booleans())
            words[index] = decoration + words[index] if before else words[index] + decoration
        verb = method.encode() if draw(st.integers(0, 9)) else draw(st.sampled_from(METHODS))
        return verb, _join(draw, words)
    words = draw(st.lists(segment, min_size=0, max_size=6))
    if draw(st.booleans()):  # start like the API does
        words = ["v1", "queues", *words]
    return draw(st.sampled_from(METHODS)), _join(draw, words)


@pytest.fixture(params=MODES)
def served(request: pytest.FixtureRequest, db_url: str) -> Iterator[tuple[Threaded, str, dict[str, str]]]:
    with Threaded(db_url, request.param) as threaded:
        handle = threaded.run(stage(threaded.server))
        keys = {
            "elsewhere": threaded.run(threaded.server.key("app-*:*")),
            "sender": threaded.run(threaded.server.key("*:send")),
        }
        yield threaded, handle, keys


def guarded_state(threaded: Threaded) -> Any:
    """What no generated request may change: the victim's queues and every message staged in
    them, and their history (a `sender` key may add messages, never touch these); and the keys
    (neither key may make or revoke one)."""

    async def read(conn: Conn) -> Any:
        cur = await conn.execute(
            """SELECT (SELECT jsonb_agg(to_jsonb(q) ORDER BY q.name) FROM queues q WHERE q.name LIKE 'victim%%') AS q,
                      (SELECT jsonb_agg(to_jsonb(m) ORDER BY m.id) FROM messages m
                        WHERE m.id <= 2) AS m,
                      (SELECT count(*) FROM message_history) AS h,
                      (SELECT jsonb_agg(jsonb_build_array(k.id, k.revoked_at) ORDER BY k.id) FROM api_keys k) AS k"""
        )
        return await cur.fetchone()

    return threaded.run(threaded.server.app.state.db.run(read))


# One served app for all the examples, on purpose: what a request may leave behind (a queue, a
# message) is the next request's ground; the guarded state is compared around each request.
@settings(parent=PROPERTY, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    request=requests(),
    body=st.sampled_from(BODIES),
    who=st.sampled_from(["elsewhere", "sender", None]),
)
def test_no_generated_path_escapes_the_key(
    served: tuple[Threaded, str, dict[str, str]], request: tuple[bytes, str], body: bytes | None, who: str | None
) -> None:
    threaded, handle, keys = served
    method, target = request
    before = guarded_state(threaded)
    victim_key = keys["elsewhere"].split("_")[1]  # a real key id, to revoke if anything could
    encoded = target.replace("RECEIPT", handle).replace("KEYID", victim_key).encode("utf-8", "surrogatepass")
    data = raw_request(
        method, encoded, keys.get(who or ""), None if body is None else body.replace(b"RECEIPT", handle.encode())
    )
    answer = threaded.run(exchange(threaded.server.port, data))
    assert answer.status == 0 or answer.status < 500, (target, answer.status, answer.body[:300])
    assert SECRET.encode() not in answer.body, target
    if 200 <= answer.status < 300:
        assert b'"victim' not in answer.body, (target, answer.body[:300])
    if answer.status >= 400 and answer.body and answer.headers.get("content-type") == "application/json":
        assert set(answer.json()["error"]) == {"code", "message"}
    assert guarded_state(threaded) == before, (method, target, answer.status, answer.body[:300])
