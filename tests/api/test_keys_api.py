"""The keys over REST (`/v1/keys`: list, create, revoke; admin on `*`) and the `read` action: what a
key that may only look can do, and what it cannot."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from fastapi import FastAPI

from app.db.engine import Database
from app.main import create_app
from app.service.keys import KeyVerifier
from tests.api.helpers import assert_error, client_for, make_key, receive, send
from tests.conftest import admin_headers, settings_for
from tests.factories import api_queue
from tests.reads import every_row

T = TypeVar("T")
READ_ONLY = {"name": "on-call", "grants": [{"queues": "*", "actions": ["read"]}]}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def key_id(key: str) -> str:
    return key.split("_")[1]


async def key_rows(app: FastAPI) -> list[Any]:
    async def read(conn: Any) -> list[Any]:
        cur = await conn.execute("SELECT id, name, scopes, revoked_at FROM api_keys ORDER BY id")
        return list(await cur.fetchall())

    return list(await app.state.db.run(read))


async def test_an_admin_creates_lists_and_revokes_a_key(app: FastAPI, client: httpx.AsyncClient) -> None:
    made = await client.post("/v1/keys", json=READ_ONLY)
    assert made.status_code == 201, made.text
    body = made.json()
    assert set(body) == {"api_key", "key", "sqs_secret_access_key"}
    new = body["api_key"]
    assert new["name"] == "on-call" and new["grants"] == [{"queues": "*", "actions": ["read"]}]
    assert new["revoked_at"] is None and new["signs_sqs"] is True
    assert key_id(body["key"]) == new["key_id"] and len(body["sqs_secret_access_key"]) > 20
    reader = bearer(body["key"])
    # The key works at once, for what it was given.
    self_answer = await client.get("/v1/keys/self", headers=reader)
    assert self_answer.json() == {"key_id": new["key_id"], "grants": new["grants"]}
    assert (await client.get("/v1/queues", headers=reader)).status_code == 200

    listed = (await client.get("/v1/keys")).json()["keys"]
    [row] = [k for k in listed if k["key_id"] == new["key_id"]]
    assert row == new  # never the key, never the secret
    assert body["key"] not in (await client.get("/v1/keys")).text
    assert body["sqs_secret_access_key"] not in (await client.get("/v1/keys")).text

    revoked = await client.delete(f"/v1/keys/{new['key_id']}")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    # Refused at once by this process (no cache wait), and revoking again changes nothing.
    assert_error(await client.get("/v1/keys/self", headers=reader), 401, "unauthorized")
    again = await client.delete(f"/v1/keys/{new['key_id']}")
    assert again.status_code == 200 and again.json()["revoked_at"] == revoked.json()["revoked_at"]


async def test_keys_need_admin_on_every_queue(app: FastAPI, client: httpx.AsyncClient) -> None:
    victim = key_id(await make_key(app, "jobs:send"))
    before = await key_rows(app)
    for scopes in (["*:read"], ["*:send,receive,ack,read"], ["jobs-*:admin"], ["*?:admin"]):
        headers = bearer(await make_key(app, *scopes))
        before = await key_rows(app)
        assert_error(await client.get("/v1/keys", headers=headers), 403, "forbidden")
        assert_error(await client.post("/v1/keys", json=READ_ONLY, headers=headers), 403, "forbidden")
        assert_error(await client.delete(f"/v1/keys/{victim}", headers=headers), 403, "forbidden")
        assert await key_rows(app) == before, scopes
    async with client_for(app) as anonymous:
        assert_error(await anonymous.get("/v1/keys"), 401, "unauthorized")
    # Admin alone on `*` is enough (no send, receive or ack needed).
    admin_only = bearer(await make_key(app, "*:admin"))
    assert (await client.get("/v1/keys", headers=admin_only)).status_code == 200


async def test_a_key_makes_no_key_wider_than_itself(app: FastAPI, client: httpx.AsyncClient) -> None:
    admin_only = bearer(await make_key(app, "*:admin"))
    before = await key_rows(app)
    for grants in (
        [{"queues": "*", "actions": ["send"]}],  # admin on every queue is not send
        [{"queues": "jobs-*", "actions": ["admin", "receive"]}],
        [{"queues": "*", "actions": ["read"]}, {"queues": "x", "actions": ["ack"]}],  # one grant too wide
    ):
        answer = await client.post("/v1/keys", json={"name": "wider", "grants": grants}, headers=admin_only)
        error = assert_error(answer, 403, "grant_beyond_key")
        assert "cannot grant" in error["message"]
    assert await key_rows(app) == before
    # What it holds (admin implies read) it may give.
    for grants in ([{"queues": "*", "actions": ["read"]}], [{"queues": "jobs-*", "actions": ["admin"]}]):
        answer = await client.post("/v1/keys", json={"name": "narrower", "grants": grants}, headers=admin_only)
        assert answer.status_code == 201, answer.text
    # A key with every action on every queue may make any key.
    answer = await client.post("/v1/keys", json={"name": "all", "grants": [{"queues": "*", "actions": ["send"]}]})
    assert answer.status_code == 201


async def test_a_key_does_not_revoke_itself(app: FastAPI, client: httpx.AsyncClient) -> None:
    own = key_id(client.headers["authorization"].removeprefix("Bearer "))
    before = await key_rows(app)
    error = assert_error(await client.delete(f"/v1/keys/{own}"), 409, "key_revokes_itself")
    assert own in error["message"] and "pqs keys revoke" in error["message"]
    assert await key_rows(app) == before
    assert (await client.get("/v1/keys/self")).status_code == 200
    # Another key that administers everything may revoke it.
    other = bearer(await make_key(app, "*:admin"))
    assert (await client.delete(f"/v1/keys/{own}", headers=other)).status_code == 200
    assert_error(await client.get("/v1/keys/self"), 401)


async def test_a_revoke_is_refused_at_once_by_its_process_whatever_the_cache(db_url: str) -> None:
    """With verdicts kept for a minute (the most there is), the key revoked here is refused on its next request: the
    revoke drops it from this process' cache (others wait PQS_AUTH_CACHE_SECONDS)."""
    app = create_app(settings_for(db_url, auth_cache_seconds=60))
    async with app.router.lifespan_context(app), client_for(app, await admin_headers(app)) as client:
        made = (await client.post("/v1/keys", json=READ_ONLY)).json()
        reader = bearer(made["key"])
        assert (await client.get("/v1/keys/self", headers=reader)).status_code == 200  # now cached
        assert (await client.delete(f"/v1/keys/{made['api_key']['key_id']}")).status_code == 200
        assert_error(await client.get("/v1/keys/self", headers=reader), 401, "unauthorized")


async def test_a_key_revoked_by_another_process_makes_and_revokes_no_key(db_url: str) -> None:
    """Another process may accept a revoked key for PQS_AUTH_CACHE_SECONDS (its cached verdict):
    for reads and messages that is the cache's price, but a key made meanwhile would outlive the
    revocation (a stolen key, revoked, mints its successor), and two admin keys revoking each other
    at once would leave none. The keys operations read the calling key again, in their transaction."""
    here, there = (create_app(settings_for(db_url, auth_cache_seconds=60)) for _ in range(2))
    async with here.router.lifespan_context(here), there.router.lifespan_context(there):
        admin_headers_here = await admin_headers(here)
        stolen = await make_key(here, "*:*")
        async with client_for(here, admin_headers_here) as admin, client_for(there, bearer(stolen)) as thief:
            assert (await thief.get("/v1/keys/self")).status_code == 200  # `there` keeps its verdict now
            assert (await admin.delete(f"/v1/keys/{key_id(stolen)}")).status_code == 200
            assert (await thief.get("/v1/keys/self")).status_code == 200  # the cache's price: reads
            before = await key_rows(here)
            assert_error(await thief.post("/v1/keys", json=READ_ONLY), 401, "unauthorized")
            own = key_id(admin_headers_here["Authorization"].removeprefix("Bearer "))
            assert_error(await thief.delete(f"/v1/keys/{own}"), 401, "unauthorized")
            assert_error(await thief.get("/v1/keys"), 401, "unauthorized")
            assert await key_rows(here) == before
            assert (await admin.get("/v1/keys/self")).status_code == 200


async def test_two_keys_revoking_each_other_at_once_leave_one(app: FastAPI) -> None:
    # Each request is authenticated before either revoke commits: without reading its own key
    # again, in the order both take, each revoked the other and no key administering `*` was left.
    for _ in range(5):
        first, second = await make_key(app, "*:admin"), await make_key(app, "*:admin")
        async with client_for(app, bearer(first)) as one, client_for(app, bearer(second)) as other:
            answers = await asyncio.gather(
                one.delete(f"/v1/keys/{key_id(second)}"), other.delete(f"/v1/keys/{key_id(first)}")
            )
            assert sorted(a.status_code for a in answers) == [200, 401], [a.text for a in answers]
            for answer in answers:
                if answer.status_code == 401:
                    assert_error(answer, 401, "unauthorized")
            alive = [c for c in (one, other) if (await c.get("/v1/keys/self")).status_code == 200]
            assert len(alive) == 1


class LateAnswers:
    """The database as the key verifier meets it, each answer held until `release` is set: a
    lookup still under way (a slow network) while something else happens."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.answered = asyncio.Event()
        self.release = asyncio.Event()

    async def run_single(self, work: Callable[[Any], Awaitable[T]]) -> T:
        answer = await self.db.run_single(work)
        self.answered.set()
        await self.release.wait()
        return answer


async def test_a_lookup_under_way_does_not_trust_a_key_revoked_meanwhile(db_url: str) -> None:
    """A cache miss reads the key, valid; the key is revoked here before that answer arrives. The
    revoke's `forget` came first, so the late verdict was kept: the revoked key was trusted by this
    process for another PQS_AUTH_CACHE_SECONDS, against "refused at once by its process"."""
    app = create_app(settings_for(db_url, auth_cache_seconds=60))
    async with app.router.lifespan_context(app), client_for(app, await admin_headers(app)) as admin:
        key = await make_key(app, "*:read")
        verifier: KeyVerifier = app.state.keys
        late = LateAnswers(verifier.db)
        verifier.db = late  # type: ignore[assignment]
        lookup = asyncio.create_task(verifier.verify(key))
        await late.answered.wait()  # read as valid, its answer held back
        verifier.db = late.db
        assert (await admin.delete(f"/v1/keys/{key_id(key)}")).status_code == 200
        late.release.set()
        assert await lookup is not None  # the request it was for began before the revoke
        async with client_for(app, bearer(key)) as revoked:
            assert_error(await revoked.get("/v1/keys/self"), 401, "unauthorized")


async def test_an_unusable_server_key_is_a_503_that_makes_no_key(db_url: str, tmp_path: Path) -> None:
    unsafe = tmp_path / "sqs-server.key"
    unsafe.write_text("q" * 43)
    unsafe.chmod(0o644)  # readable by others: refused (app/sealing.py)
    app = create_app(settings_for(db_url, sqs_server_key=None, data_dir=tmp_path))
    async with app.router.lifespan_context(app), client_for(app, await admin_headers(app)) as client:
        before = await key_rows(app)
        error = assert_error(await client.post("/v1/keys", json=READ_ONLY), 503)
        assert str(tmp_path) not in error["message"]
        assert await key_rows(app) == before


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "grants": []},
        {"name": "", "grants": READ_ONLY["grants"]},
        {"name": "x\u0000", "grants": READ_ONLY["grants"]},
        # A name is shown in `pqs keys list` (a line a key) and on the dashboard: a CR, an escape
        # sequence or a right-to-left override would show the reader a line of the maker's choosing.
        {"name": "x\rfe0123456789\trevoked", "grants": READ_ONLY["grants"]},
        {"name": "x\n", "grants": READ_ONLY["grants"]},
        {"name": "\x1b[2K\x1b[1Gok", "grants": READ_ONLY["grants"]},
        {"name": "ops \u202egnp.exe", "grants": READ_ONLY["grants"]},
        {"name": "a\u2028b", "grants": READ_ONLY["grants"]},
        {"name": "x", "grants": [{"queues": "jobs/..", "actions": ["read"]}]},
        {"name": "x", "grants": [{"queues": "*", "actions": ["root"]}]},
        {"name": "x", "grants": [{"queues": "*", "actions": []}]},
        {"name": "x", "grants": [{"queues": "*", "actions": ["read"], "extra": 1}]},
        {"grants": READ_ONLY["grants"]},
    ],
)
async def test_a_bad_key_request_is_400(app: FastAPI, client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    before = await key_rows(app)
    assert_error(await client.post("/v1/keys", json=body), 400)
    assert await key_rows(app) == before


@pytest.mark.parametrize("bad", ["0123456789ab", "self", "ABCDEF012345", "0123456789ab%00", "%0A0123456789ab"])
async def test_revoking_no_such_key_is_404(app: FastAPI, client: httpx.AsyncClient, bad: str) -> None:
    before = await key_rows(app)
    assert_error(await client.delete(f"/v1/keys/{bad}"), 404)
    assert await key_rows(app) == before


# -- read: looking without changing ---------------------------------------------------------------


async def test_a_read_key_looks_and_changes_nothing(app: FastAPI, client: httpx.AsyncClient) -> None:
    await api_queue(client, name="jobs-dlq")
    await api_queue(client, name="jobs", dead_letter={"queue": "jobs-dlq", "max_receive_count": 1})
    await send(client, "jobs", {"n": 1})
    await send(client, "jobs-dlq", {"n": 2})
    reader = bearer(await make_key(app, "*:read"))
    assert (await client.get("/v1/queues", headers=reader)).json()["queues"][0]["name"] == "jobs"
    got = await client.get("/v1/queues/jobs", headers=reader)
    assert got.status_code == 200 and got.json()["stats"]["visible"] == 1
    peeked = await client.get("/v1/queues/jobs/messages", headers=reader)
    assert peeked.status_code == 200 and len(peeked.json()["messages"]) == 1
    before = await every_row(app.state.db)
    handle = "x" * 40
    for method, path, body in [
        ("POST", "/v1/queues/jobs/purge", None),
        ("POST", "/v1/queues/jobs-dlq/redrive", None),
        ("PATCH", "/v1/queues/jobs", {"visibility_timeout": 99}),
        ("PUT", "/v1/queues/new", {}),
        ("DELETE", "/v1/queues/jobs", None),
        ("POST", "/v1/queues/jobs/messages", {"body": 1}),
        ("POST", "/v1/queues/jobs/messages/batch", {"entries": [{"id": "a", "body": 1}]}),
        ("POST", "/v1/queues/jobs/messages/receive", {"wait_seconds": 0}),
        ("POST", "/v1/queues/jobs/messages/ack", {"entries": [{"id": "a", "receipt_handle": handle}]}),
        ("DELETE", f"/v1/queues/jobs/messages/{handle}", None),
        ("GET", "/v1/keys", None),
        ("POST", "/v1/keys", READ_ONLY),
    ]:
        answer = await client.request(method, path, json=body, headers=reader)
        assert_error(answer, 403, "forbidden")
    assert await every_row(app.state.db) == before
    # A read on some queues lists none (listing names every queue) and sees only those.
    jobs_reader = bearer(await make_key(app, "jobs:read"))
    assert_error(await client.get("/v1/queues", headers=jobs_reader), 403, "forbidden")
    assert_error(await client.get("/v1/queues/jobs-dlq", headers=jobs_reader), 403, "forbidden")
    assert (await client.get("/v1/queues/jobs/messages", headers=jobs_reader)).status_code == 200
    # Admin still reads (it implies read), and receiving is untouched by a peek.
    assert (await client.get("/v1/queues/jobs/messages")).status_code == 200
    assert [m["body"] for m in await receive(client, "jobs")] == [{"n": 1}]
