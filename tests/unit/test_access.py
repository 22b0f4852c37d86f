"""API keys and scopes without a database: key format, hashing, grants, glob matching, the action
each operation declares, and the loopback rule for running without access control."""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import itertools
import re
from typing import Any

import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute

from app import access
from app.access import ACTIONS, ANY_ACTION, EVERYTHING, Access, InvalidScope, grant, grants_from_json, parse_grant
from app.api.auth import GuardedRoute, bearer_key, needed_action
from app.api.operations import OPERATIONS
from app.config import Settings, is_loopback
from app.main import ROUTERS, create_app
from tests.api.helpers import ACTIONS_BY_ROUTE, KEY_ROUTES

# -- keys -----------------------------------------------------------------------------------------


def test_a_key_is_prefix_public_id_and_256_bit_secret() -> None:
    new = access.generate_key()
    match = re.fullmatch(r"pqs_([0-9a-f]{12})_([A-Za-z0-9_-]{43})", new.key)
    assert match is not None, new.key
    assert match[1] == new.key_id
    assert access.key_id_of(new.key) == new.key_id
    assert new.secret_hash == hashlib.sha256(new.key.encode()).digest()
    assert new.key not in new.secret_hash.hex()


def test_keys_come_from_the_given_randomness() -> None:
    draws = itertools.count()

    def fixed(n: int) -> bytes:
        return bytes([next(draws)] * n)

    first, second = access.generate_key(fixed), access.generate_key(fixed)
    assert first.key_id == "000000000000" and second.key_id == "020202020202"
    assert first.key != second.key
    assert len({access.generate_key().key for _ in range(200)}) == 200


@pytest.mark.parametrize(
    "text",
    [
        "",
        "pqs",
        "pqs__",
        "Bearer pqs_0123456789ab_" + "a" * 43,
        "pqs_0123456789AB_" + "a" * 43,  # ids are lower-case hex
        "pqs_0123456789ab_" + "a" * 42,
        "pqs_0123456789ab_" + "a" * 44,
        "pqs_0123456789ab_" + "a" * 42 + "=",
        "xyz_0123456789ab_" + "a" * 43,
    ],
)
def test_malformed_keys_have_no_key_id(text: str) -> None:
    assert access.key_id_of(text) is None


def test_hashes_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, Any]] = []
    original = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    digest = access.hash_key("pqs_x")
    assert access.same_hash(digest, access.hash_key("pqs_x"))
    assert not access.same_hash(digest, access.hash_key("pqs_y"))
    assert calls == [(digest, digest), (digest, access.hash_key("pqs_y"))]


# -- grants ---------------------------------------------------------------------------------------


def test_parse_grant() -> None:
    assert parse_grant("jobs-*:send,receive") == grant("jobs-*", ["receive", "send"])
    assert parse_grant("*:*") == EVERYTHING[0]
    assert parse_grant("a.fifo: ack , admin").actions == frozenset({"ack", "admin"})
    assert str(parse_grant("q[0-9]:admin,send")) == "q[0-9]:send,admin"


@pytest.mark.parametrize(
    "text", ["jobs", "jobs:", ":send", "jobs:write", "jobs/x:send", "a b:send", "*:send,nope", "x" * 201 + ":send"]
)
def test_bad_grants_are_refused(text: str) -> None:
    with pytest.raises(InvalidScope):
        parse_grant(text)


def test_grants_round_trip_through_their_json() -> None:
    grants = (parse_grant("jobs-*:send"), parse_grant("*:admin,ack"))
    document = access.grants_to_json(grants)
    assert document == [
        {"queues": "jobs-*", "actions": ["send"]},
        {"queues": "*", "actions": ["ack", "admin"]},
    ]
    assert grants_from_json(document) == grants


@pytest.mark.parametrize(
    "document",
    [None, [], {}, [{"queues": "*"}], [{"queues": "*", "actions": "send"}], [{"queues": "*", "actions": [], "x": 1}]],
)
def test_bad_scope_documents_are_refused(document: Any) -> None:
    with pytest.raises(InvalidScope):
        grants_from_json(document)


# -- matching -------------------------------------------------------------------------------------

PATTERNS = ["*", "jobs-*", "jobs-?", "*.fifo", "q[0-9]", "q[!0-9]*", "exact", "Jobs-*", "**", "[a-c]*-dlq*"]
NAMES = ["jobs-1", "jobs-12", "Jobs-1", "a.fifo", "q7", "qx", "q", "exact", "exactly", "b-dlq", "b-dlq.fifo", ""]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_matching_is_fnmatchcase(pattern: str) -> None:
    for action in ACTIONS:
        key = Access("k", (grant(pattern, [action]),))
        for name in NAMES:
            if not name:
                continue
            expected = fnmatch.fnmatchcase(name, pattern)
            assert key.allows(action, name) is expected, (pattern, name)
            assert key.allows(ANY_ACTION, name) is expected, (pattern, name)
            for other in set(ACTIONS) - access.expanded((action,)):
                assert not key.allows(other, name), (pattern, name, other)
            for implied in access.expanded((action,)):
                assert key.allows(implied, name) is expected, (pattern, name, implied)


def test_admin_implies_read_and_read_implies_nothing() -> None:
    admin = Access("k", (parse_grant("*:admin"),))
    reader = Access("k", (parse_grant("*:read"),))
    assert admin.allows("read", "jobs") and admin.allows("read", None)
    assert reader.allows("read", "jobs") and reader.allows("read", None)
    for action in ("send", "receive", "ack", "admin"):
        assert not reader.allows(action, "jobs") and not reader.allows(action, None), action
    assert access.expanded(("admin",)) == {"read", "admin"} and access.expanded(("read",)) == {"read"}
    # Stored as written: an admin grant is not rewritten to name read (the implication is the rule).
    assert parse_grant("*:admin").to_json() == {"queues": "*", "actions": ["admin"]}
    assert parse_grant("*:*").to_json()["actions"] == ["send", "receive", "ack", "read", "admin"]


COVERS = [
    # (maker's scopes, wanted grant, covered)
    (["*:*"], "anything-*:send,admin", True),
    (["*:admin"], "*:read", True),  # admin implies read
    (["*:admin"], "jobs-*:admin", True),
    (["*:admin"], "*:send", False),  # admin on every queue is not send on any
    (["*:read"], "*:admin", False),  # and read is not admin: wanting admin wants read too
    (["*:admin", "*:send"], "*:admin,send", True),  # actions from two grants
    (["jobs-*:send"], "jobs-*:send", True),  # the same pattern
    (["jobs-*:send"], "jobs-1:send", True),  # a name it matches
    (["jobs-*:send"], "jobs-1?:send", False),  # another glob: not proved narrower, refused
    (["jobs-*:send"], "*:send", False),
    (["jobs-*:send"], "other:send", False),
    (["jobs-1:admin"], "jobs-1:read", True),
]


@pytest.mark.parametrize(("scopes", "wanted", "covered"), COVERS)
def test_a_key_covers_only_grants_it_holds(scopes: list[str], wanted: str, covered: bool) -> None:
    maker = Access("k", tuple(parse_grant(s) for s in scopes))
    assert maker.covers(parse_grant(wanted)) is covered
    if covered:  # never wider than what it allows, name by name
        for name in NAMES:
            for action in access.expanded(parse_grant(wanted).actions):
                if name and fnmatch.fnmatchcase(name, parse_grant(wanted).queues):
                    assert maker.allows(action, name), (name, action)


def test_actions_and_patterns_combine_per_grant() -> None:
    key = Access("k", (parse_grant("jobs-*:send"), parse_grant("results:receive,ack")))
    assert key.allows("send", "jobs-1")
    assert not key.allows("receive", "jobs-1")
    assert key.allows("receive", "results") and key.allows("ack", "results")
    assert not key.allows("send", "results")
    assert not key.allows("admin", "jobs-1")


def test_listing_every_queue_needs_a_pattern_matching_every_name() -> None:
    assert Access("k", (parse_grant("*:admin"),)).allows("admin", None)
    assert Access("k", (parse_grant("**:admin"),)).allows("admin", None)
    assert not Access("k", (parse_grant("*:send,receive,ack"),)).allows("admin", None)
    assert not Access("k", (parse_grant("jobs-*:admin"),)).allows("admin", None)
    assert not Access("k", (parse_grant("*?:admin"),)).allows("admin", None)


# -- each operation's action, declared on its route ---------------------------------------------


def test_every_v1_operation_declares_the_action_the_issue_asks_for() -> None:
    """Each /v1 route the app includes is a GuardedRoute (authorizing on its own match) with its action;
    the hot operations, which the lane serves, carry the same actions. Outside /v1 only GET /metrics
    declares one, on a plain route: its handler applies it (its own rule)."""
    found = {}
    for route in (r for router in ROUTERS for r in router.routes):
        assert isinstance(route, APIRoute)
        if not route.path.startswith("/v1/"):
            assert not isinstance(route, GuardedRoute), route.path
            if not route.openapi_extra:
                continue
        else:
            assert isinstance(route, GuardedRoute), route.path
        for method in route.methods:
            found[(method, route.path)] = needed_action(route)
    assert found == ACTIONS_BY_ROUTE | KEY_ROUTES
    hot = {(op.method, op.path): op.action for op in OPERATIONS if op.hot}
    assert hot.items() <= ACTIONS_BY_ROUTE.items()


def test_a_route_without_a_declared_action_is_refused() -> None:
    router = APIRouter(route_class=GuardedRoute)

    async def endpoint() -> None: ...

    with pytest.raises(ValueError, match="declares its action"):
        router.add_api_route("/v1/queues/{name}/new", endpoint)
    with pytest.raises(ValueError, match="unknown action"):
        router.add_api_route("/v1/queues/{name}/new", endpoint, openapi_extra={"security": [{"bearerAuth": ["all"]}]})


def test_an_unguarded_v1_route_stops_the_app_from_being_made() -> None:
    settings = Settings(database_url="postgresql://unused/unused")
    router = ROUTERS[0]
    original = router.routes[:]
    router.add_api_route("/v1/unguarded", lambda: None)
    try:
        with pytest.raises(TypeError, match="must be a GuardedRoute"):
            create_app(settings)
    finally:
        router.routes[:] = original


def _scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"headers": list(headers)}


def test_bearer_key_is_read_from_the_authorization_header() -> None:
    assert bearer_key(_scope((b"authorization", b"Bearer pqs_k"))) == "pqs_k"
    assert bearer_key(_scope((b"host", b"x"), (b"authorization", b"bearer   pqs_k  "))) == "pqs_k"
    assert bearer_key(_scope()) is None
    assert bearer_key(_scope((b"authorization", b"Basic cXFxOnd3dw=="))) is None
    assert bearer_key(_scope((b"authorization", b"Bearer"))) is None
    assert bearer_key(_scope((b"authorization", b"Bearer "))) is None
    assert bearer_key(_scope((b"x-api-key", b"pqs_k"))) is None


# -- running without access control ---------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)
    Settings(auth_enabled=False, host=host).check_auth()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.com", "localhost.example.com", ""])
def test_auth_off_is_refused_off_loopback(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ValueError, match="PQS_AUTH_ENABLED=false is refused"):
        Settings(auth_enabled=False, host=host).check_auth()
    Settings(auth_enabled=True, host=host).check_auth()
    with pytest.raises(ValueError, match="refused"):
        create_app(Settings(database_url="postgresql://unused/unused", auth_enabled=False, host=host))


def test_the_api_key_setting_is_secret() -> None:
    settings = Settings(api_key="pqs_0123456789ab_" + "s" * 43)
    assert "sss" not in repr(settings) and "sss" not in str(settings.model_dump())
    assert Settings(api_key="").api_key is None
