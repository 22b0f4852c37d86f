"""Access control over HTTP, through the hot lane and through FastAPI alone: 401 without a valid
key, 403 without the scope, and neither changes anything; what stays open; keys out of logs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from app.access import ACTIONS, Action
from app.db.engine import Database
from app.main import create_app
from app.service.keys import revoke_key
from tests.api.helpers import assert_error, client_for, lacking, make_key, receive, send, served
from tests.conftest import settings_for
from tests.factories import api_queue
from tests.reads import every_row

Call = tuple[str, str, Any, Action]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def snapshot(app: FastAPI) -> list[Any]:
    """Every row of every queue table of the app's database."""
    return await every_row(app.state.db)


def calls(queue: str, handle: str) -> list[Call]:
    """One request per /v1 route naming `queue` (a receipt of it: `handle`), with its action."""
    entry = {"id": "e", "receipt_handle": handle}
    base = f"/v1/queues/{queue}"
    return [
        ("PUT", f"{base}-new", {"fifo": False}, "admin"),
        ("GET", base, None, "read"),
        ("GET", f"{base}/messages", None, "read"),
        ("PATCH", base, {"visibility_timeout": 99}, "admin"),
        ("DELETE", base, None, "admin"),
        ("POST", f"{base}/purge", None, "admin"),
        ("POST", f"{base}/redrive", None, "admin"),
        ("POST", f"{base}/messages", {"body": {"n": 1}}, "send"),
        ("POST", f"{base}/messages/batch", {"entries": [{"id": "a", "body": 1}]}, "send"),
        ("POST", f"{base}/messages/receive", {"max_messages": 10, "wait_seconds": 0}, "receive"),
        ("POST", f"{base}/messages/ack", {"entries": [entry]}, "ack"),
        ("POST", f"{base}/messages/nack", {"entries": [entry]}, "ack"),
        ("POST", f"{base}/messages/visibility", {"entries": [{**entry, "visibility_timeout": 100}]}, "ack"),
        ("POST", f"{base}/messages/release", {"consumer_id": "w"}, "ack"),
        ("DELETE", f"{base}/messages/{handle}", None, "ack"),
    ]


async def call(http: httpx.AsyncClient, request: Call, headers: dict[str, str] | None = None) -> httpx.Response:
    method, path, body, _ = request
    return await http.request(method, path, json=body, headers=headers)


@pytest_asyncio.fixture
async def anonymous(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client without any key."""
    async with client_for(app) as http:
        yield http


@pytest_asyncio.fixture
async def handles(client: httpx.AsyncClient) -> dict[str, str]:
    """Queues `jobs-1` and `other`, each with a message in flight to consumer `w` (its receipt handle) and one
    visible; `jobs-1` has the dead-letter queue `jobs-dlq`."""
    await api_queue(client, name="jobs-dlq")
    await api_queue(client, name="jobs-1", dead_letter={"queue": "jobs-dlq", "max_receive_count": 5})
    await api_queue(client, name="other")
    found = {}
    for queue in ("jobs-1", "other"):
        await send(client, queue, {"n": 1})
        await send(client, queue, {"n": 2})
        [message] = await receive(client, queue, max_messages=1, consumer_id="w")
        found[queue] = message["receipt_handle"]
    return found


def assert_unauthorized(response: httpx.Response) -> None:
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


async def test_no_key_is_401_and_changes_nothing(
    app: FastAPI, anonymous: httpx.AsyncClient, handles: dict[str, str]
) -> None:
    before = await snapshot(app)
    for request in calls("jobs-1", handles["jobs-1"]):
        assert_unauthorized(await call(anonymous, request))
    assert_unauthorized(await anonymous.get("/v1/queues"))
    assert await snapshot(app) == before


async def test_unknown_wrong_malformed_and_revoked_keys_are_401_and_change_nothing(
    app: FastAPI, client: httpx.AsyncClient, handles: dict[str, str]
) -> None:
    admin_key = client.headers["authorization"].removeprefix("Bearer ")
    admin_id = admin_key.split("_")[1]
    revoked = await make_key(app, "*:*")
    db: Database = app.state.db
    await db.run(lambda conn: revoke_key(conn, revoked.split("_")[1]))
    bad = [
        bearer("pqs_0123456789ab_" + "A" * 43),  # well formed, no such key
        bearer(f"pqs_{admin_id}_" + "A" * 43),  # a real key id with another secret
        bearer(admin_key + "A"),
        bearer("garbage"),
        bearer(revoked),
        {"Authorization": "Basic " + admin_key},
        {"Authorization": "Bearer"},
        {"Authorization": admin_key},
    ]
    before = await snapshot(app)
    for headers in bad:
        for request in calls("jobs-1", handles["jobs-1"]):
            assert_unauthorized(await call(client, request, headers))
    assert await snapshot(app) == before
    assert (await client.get("/v1/queues/jobs-1", headers={"Authorization": "bearer " + admin_key})).status_code == 200


@pytest.mark.parametrize("missing", ACTIONS)
async def test_a_key_without_the_action_is_403_and_changes_nothing(
    app: FastAPI, client: httpx.AsyncClient, handles: dict[str, str], missing: Action
) -> None:
    others = lacking(missing)
    headers = bearer(await make_key(app, f"*:{others}"))
    before = await snapshot(app)
    refused = 0
    for request in calls("jobs-1", handles["jobs-1"]):
        if request[3] == missing:
            response = await call(client, request, headers)
            error = assert_error(response, 403, "forbidden")
            assert missing in error["message"] and "jobs-1" in error["message"]
            assert "www-authenticate" not in response.headers
            refused += 1
    if missing == "read":  # listing is a look at every queue
        assert_error(await client.get("/v1/queues", headers=headers), 403, "forbidden")
    assert refused >= 1
    assert await snapshot(app) == before


async def test_a_key_for_other_queues_is_403_and_changes_nothing(
    app: FastAPI, client: httpx.AsyncClient, handles: dict[str, str]
) -> None:
    headers = bearer(await make_key(app, "jobs-*:*"))
    before = await snapshot(app)
    for request in calls("other", handles["other"]):
        assert_error(await call(client, request, headers), 403, "forbidden")
    # Listing names every queue: a key limited to jobs-* may not list.
    assert_error(await client.get("/v1/queues", headers=headers), 403, "forbidden")
    assert await snapshot(app) == before
    assert (await client.get("/v1/queues/jobs-1", headers=headers)).status_code == 200


async def test_each_action_alone_allows_its_routes(
    app: FastAPI, client: httpx.AsyncClient, handles: dict[str, str]
) -> None:
    sender = bearer(await make_key(app, "jobs-*:send"))
    receiver = bearer(await make_key(app, "jobs-?:receive"))
    acker = bearer(await make_key(app, "jobs-1:ack"))
    admin = bearer(await make_key(app, "jobs-[0-9]:admin"))

    assert (await client.post("/v1/queues/jobs-1/messages", json={"body": 3}, headers=sender)).status_code == 201
    batch = {"entries": [{"id": "a", "body": 4}]}
    assert (await client.post("/v1/queues/jobs-1/messages/batch", json=batch, headers=sender)).status_code == 200
    got = await client.post("/v1/queues/jobs-1/messages/receive", json={"max_messages": 10}, headers=receiver)
    assert got.status_code == 200 and len(got.json()["messages"]) == 3
    handle = got.json()["messages"][0]["receipt_handle"]
    entries = {"entries": [{"id": "e", "receipt_handle": handle, "visibility_timeout": 60}]}
    assert (await client.post("/v1/queues/jobs-1/messages/visibility", json=entries, headers=acker)).status_code == 200
    assert (await client.delete(f"/v1/queues/jobs-1/messages/{handle}", headers=acker)).status_code == 204
    stats = await client.get("/v1/queues/jobs-1", headers=admin)
    assert stats.status_code == 200 and stats.json()["stats"]["in_flight"] == 3
    assert (await client.put("/v1/queues/jobs-2", json={}, headers=admin)).status_code == 201


async def test_a_dead_letter_queue_needs_admin_on_it_too(
    app: FastAPI, client: httpx.AsyncClient, handles: dict[str, str]
) -> None:
    headers = bearer(await make_key(app, "jobs-*:admin"))
    before = await snapshot(app)
    dead_letter = {"dead_letter": {"queue": "other", "max_receive_count": 2}}
    error = assert_error(await client.put("/v1/queues/jobs-2", json=dead_letter, headers=headers), 403, "forbidden")
    assert "other" in error["message"]
    assert_error(await client.patch("/v1/queues/jobs-1", json=dead_letter, headers=headers), 403, "forbidden")
    assert await snapshot(app) == before
    allowed = {"dead_letter": {"queue": "jobs-dlq", "max_receive_count": 2}}
    assert (await client.put("/v1/queues/jobs-2", json=allowed, headers=headers)).status_code == 201
    assert (await client.patch("/v1/queues/jobs-1", json=allowed, headers=headers)).status_code == 200


async def test_health_and_documentation_are_open(anonymous: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz", "/openapi.json", "/docs", "/redoc"):
        response = await anonymous.get(path)
        assert response.status_code == 200, (path, response.text)
    document = (await anonymous.get("/openapi.json")).json()
    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": document["components"]["securitySchemes"]["bearerAuth"]["description"],
    }


async def test_unknown_v1_paths_need_a_valid_key_then_fastapi_answers(
    app: FastAPI, anonymous: httpx.AsyncClient
) -> None:
    for path in ("/v1", "/v1/", "/v1/nothing", "/v1/queues/x/messages/receive"):
        assert_unauthorized(await anonymous.get(path))
    assert (await anonymous.head("/v1/queues/x")).status_code == 401
    # Any valid key will do for a path that is no route: there is nothing to grant.
    headers = bearer(await make_key(app, "nothing:send"))
    assert_error(await anonymous.get("/v1/nothing", headers=headers), 404, "not_found")
    assert_error(await anonymous.get("/v1/queues/x/messages/receive", headers=headers), 405, "method_not_allowed")
    assert (await anonymous.head("/v1/queues/x", headers=headers)).status_code == 405
    assert_error(await anonymous.get("/nothing"), 404, "not_found")


async def test_keys_never_reach_the_logs(
    app: FastAPI, client: httpx.AsyncClient, handles: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    admin_key = client.headers["authorization"].removeprefix("Bearer ")
    narrow = await make_key(app, "jobs-1:receive")
    unknown = "pqs_0123456789ab_" + "S" * 43
    for key in (admin_key, narrow, unknown, "not-a-key-SECRET"):
        for request in calls("jobs-1", handles["jobs-1"]):
            await call(client, request, bearer(key))
    text = caplog.text + "".join(str(r.args) for r in caplog.records)
    for key in (admin_key, narrow, unknown, "not-a-key-SECRET"):
        assert key not in text and key.split("_", 2)[-1] not in text


async def test_with_access_control_off_no_key_is_needed(db_url: str) -> None:
    application = create_app(settings_for(db_url, auth_enabled=False, host="localhost"))
    async with (
        application.router.lifespan_context(application),
        served(application),  # the hot lane, which authorizes without the Auth middleware
        client_for(application) as http,
    ):
        assert (await http.put("/v1/queues/open", json={})).status_code == 201
        assert (await http.post("/v1/queues/open/messages", json={"body": 1})).status_code == 201
        assert (await http.get("/v1/queues")).json()["queues"][0]["name"] == "open"
