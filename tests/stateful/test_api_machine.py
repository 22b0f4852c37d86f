"""A stateful random walk over every route of the API, failures included, on an app whose pool
has exactly one connection.

Proves: whatever the sequence of requests (queues created, re-created with other attributes,
changed, deleted while another queue dead-letters into them, purged, redriven; messages sent
alone and in batches, received, acked, nacked, hidden, released, deleted by receipt; missing
queues, stale and forged receipts, bodies no route accepts), no answer is a 5xx, every 4xx has
the house error body, and the queues the API reports are the ones the walk made. After every
step, app.db.prepared's record of the connection's prepared statements is exactly what the
session holds (pg_prepared_statements): every request shares that one connection, so a
statement a rolled-back request left behind, or dropped, meets every later one (issue 18).

Each example starts an app of its own (pool of one, the fast path on or off, the queue and key
caches off or at their default) on the test's database, with queue names of its own. Bounded
and derandomized in `make test`; PQS_PROPERTY_PROFILE=pqs-explore runs a long random search.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Collection
from contextlib import AsyncExitStack
from typing import Any, ClassVar

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from app.api.schemas import QueueAttributesIn
from app.db import prepared
from app.db.engine import Database
from app.main import create_app
from tests.api.helpers import assert_error, client_for, served
from tests.conftest import admin_key, settings_for
from tests.stateful import inputs

# Bounded and derandomized by default; a failure is reported as generated, not shrunk (shrinking
# a walk that starts an app per example takes minutes). PQS_PROPERTY_PROFILE=pqs-explore: a long
# random search, shrunk.
EXPLORE = os.environ.get("PQS_PROPERTY_PROFILE") == "pqs-explore"
RUN = (
    settings(max_examples=300, stateful_step_count=100, database=None, deadline=None)
    if EXPLORE
    else settings(
        max_examples=15,
        stateful_step_count=20,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
    )
)
ATTRIBUTES = tuple(QueueAttributesIn.model_fields)
DEFAULTS = QueueAttributesIn().model_dump()
_examples = itertools.count()


class ApiMachine(RuleBasedStateMachine):
    """The walk; `db_url`, `key` and `fast_path` are set by the test that runs it."""

    db_url: ClassVar[str]
    key: ClassVar[str]
    fast_path: ClassVar[bool]

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.stack = AsyncExitStack()
        self.prefix = f"x{next(_examples)}-"
        # What the API said about this example's queues: name -> attributes.
        self.queues: dict[str, dict[str, Any]] = {}
        self.receipts: list[tuple[str, str]] = []  # (queue, handle) of deliveries, fresh or stale
        self.keys: dict[str, bool] = {}  # key id -> revoked, of the keys this walk made

    # -- plumbing -------------------------------------------------------------------------------

    @initialize(cached=st.booleans(), data=st.data())
    def start(self, cached: bool, data: st.DataObject) -> None:
        """Start the app: one pooled connection; with `cached`, the queue and key caches at their
        defaults, otherwise off (every request reads its queue and key). Then create a queue of
        each kind and their dead-letter queues, send a few messages to the two and receive some,
        so the walk has queues, messages and receipts to work on from the start."""
        ttl = 1.0 if cached else 0.0
        overrides = {"queue_cache_seconds": ttl, "auth_cache_seconds": ttl}
        app = create_app(
            settings_for(self.db_url, fast_path=self.fast_path, pool_min_size=1, pool_max_size=1, **overrides)
        )
        self.db: Database = self.runner.run(self._enter(app))
        for short in ("dlq", "dlq.fifo", "a", "a.fifo"):
            body = data.draw(inputs.valid_queue_attributes(short, self.prefix), label=short)
            self.known(self.call("PUT", f"/v1/queues/{self.prefix}{short}", (201,), json=body))
        for short in ("a", "a.fifo"):
            fifo = {"group_id": "g1"} if short.endswith(".fifo") else {}
            entries = [{"id": f"e{i}", "body": i, "dedup_id": f"first-{i}", **fifo} for i in range(5)]
            self.call("POST", f"/v1/queues/{self.prefix}{short}/messages/batch", (200,), json={"entries": entries})
            self.take(self.prefix + short, {"max_messages": 3, "wait_seconds": 0})

    async def _enter(self, app: FastAPI) -> Database:
        await self.stack.enter_async_context(app.router.lifespan_context(app))
        if self.fast_path:  # served as `pqs serve` serves it: the hot lane answers the hot operations
            await self.stack.enter_async_context(served(app))
        headers = {"Authorization": f"Bearer {self.key}"}
        self.client = await self.stack.enter_async_context(client_for(app, headers, lenient=True))
        database: Database = app.state.db
        return database

    def teardown(self) -> None:
        try:
            self.runner.run(self.stack.aclose())
        finally:
            self.runner.close()

    def call(self, method: str, path: str, ok: Collection[int], **kwargs: Any) -> httpx.Response:
        """One request: never a 5xx; a 4xx in the house shape; any other status one of `ok`."""
        response = self.runner.run(self.client.request(method, path, **kwargs))
        status = response.status_code
        assert status < 500, f"{method} {path} {kwargs}: {status} {response.text}"
        if status >= 400:
            assert_error(response, status)
        else:
            assert status in ok, f"{method} {path} {kwargs}: {status} {response.text}"
        return response

    def name(self, data: st.DataObject) -> str:
        """A queue name of this example: mostly one the walk has."""
        names = st.sampled_from([self.prefix + short for short in inputs.NAMES])
        have = sorted(self.queues)
        return data.draw(inputs.mostly(st.sampled_from(have), names) if have else names, label="queue")

    def known(self, response: httpx.Response) -> None:
        """Remember the queue a response describes."""
        queue = response.json()
        self.queues[queue["name"]] = {k: queue[k] for k in ATTRIBUTES}

    def agrees(self, name: str, response: httpx.Response, *, strict: bool = False) -> None:
        """The answer agrees with the walk's queues (this process's queue cache forgets a queue it
        changes at once): never queue_not_found for a queue the walk has; for one it lacks, no
        success, and, `strict` (nothing else is wrong with the request), 404 queue_not_found."""
        status = response.status_code
        not_found = status == 404 and response.json()["error"]["code"] == "queue_not_found"
        if name in self.queues:
            assert not not_found, response.text
        else:
            assert status >= 400, response.text
            assert not_found or not strict, response.text

    @invariant()
    def record_is_the_sessions(self) -> None:
        """app.db.prepared's record of the one connection is what its session holds, nothing
        more (a statement dropped behind its back) and nothing less (psycopg's own)."""

        async def compare() -> None:
            async with self.db.connection() as conn:
                cursor = await conn.execute("SELECT name FROM pg_prepared_statements")
                on_server = {row["name"] for row in await cursor.fetchall()}
                assert prepared.recorded(conn) == on_server

        self.runner.run(compare())

    # -- queues ---------------------------------------------------------------------------------

    @rule(data=st.data())
    def put_queue(self, data: st.DataObject) -> None:
        name = self.name(data)
        body = data.draw(inputs.queue_attributes(name.removeprefix(self.prefix), self.prefix), label="attributes")
        response = self.call("PUT", f"/v1/queues/{name}", (200, 201), json=body)
        if response.status_code < 300:
            assert (response.status_code == 201) == (name not in self.queues), response.text
            self.known(response)
        elif response.status_code == 409:
            assert_error(response, 409, "queue_exists")
            assert {**DEFAULTS, **body} != self.queues[name]

    @precondition(lambda self: self.queues)
    @rule(data=st.data())
    def put_queue_again(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.queues)), label="queue")
        response = self.call("PUT", f"/v1/queues/{name}", (200,), json=self.queues[name])
        assert response.status_code == 200, response.text

    @rule(data=st.data())
    def get_queue(self, data: st.DataObject) -> None:
        name = self.name(data)
        response = self.call("GET", f"/v1/queues/{name}", (200,))
        self.agrees(name, response, strict=True)
        if response.status_code == 200:
            queue = response.json()
            assert {k: queue[k] for k in ATTRIBUTES} == self.queues[name]
            assert min(v for k, v in queue["stats"].items() if k != "oldest_age_seconds") >= 0

    @rule(limit=st.integers(1, 4))
    def list_queues(self, limit: int) -> None:
        names: list[str] = []
        after = ""
        for _ in range(len(inputs.NAMES) + 1):
            params = {"prefix": self.prefix, "limit": limit, "after": after}
            page = self.call("GET", "/v1/queues", (200,), params=params).json()
            names += [q["name"] for q in page["queues"]]
            if page["next_after"] is None:
                break
            after = page["next_after"]
        assert names == sorted(self.queues)

    @rule(data=st.data())
    def patch_queue(self, data: st.DataObject) -> None:
        name = self.name(data)
        patch = data.draw(inputs.queue_patch(self.prefix), label="patch")
        response = self.call("PATCH", f"/v1/queues/{name}", (200,), json=patch)
        self.agrees(name, response)
        if response.status_code == 200:
            self.known(response)

    @rule(data=st.data())
    def delete_queue(self, data: st.DataObject) -> None:
        name = self.name(data)
        response = self.call("DELETE", f"/v1/queues/{name}", (204,))
        self.agrees(name, response, strict=True)
        if response.status_code == 204:
            del self.queues[name]
        elif name in self.queues:
            assert_error(response, 409, "queue_in_use")
            assert any((q["dead_letter"] or {}).get("queue") == name for q in self.queues.values())

    @rule(data=st.data(), verb=st.sampled_from(["purge", "redrive"]))
    def purge_or_redrive(self, data: st.DataObject, verb: str) -> None:
        name = self.name(data)
        response = self.call("POST", f"/v1/queues/{name}/{verb}", (200,))
        self.agrees(name, response, strict=True)
        if response.status_code == 200:
            assert response.json()["count"] >= 0

    # -- messages -------------------------------------------------------------------------------

    @rule(data=st.data())
    def send(self, data: st.DataObject) -> None:
        name = self.name(data)
        fields = data.draw(inputs.message(name.endswith(".fifo")), label="message")
        response = self.call("POST", f"/v1/queues/{name}/messages", (201,), json=fields)
        self.agrees(name, response)

    @rule(data=st.data(), size=st.integers(1, 4), repeat_an_id=st.booleans())
    def send_batch(self, data: st.DataObject, size: int, repeat_an_id: bool) -> None:
        name = self.name(data)
        entries = [
            {"id": f"e{i}", **data.draw(inputs.message(name.endswith(".fifo")), label="entry")} for i in range(size)
        ]
        if repeat_an_id:
            entries.append({**entries[0]})
        response = self.call("POST", f"/v1/queues/{name}/messages/batch", (200,), json={"entries": entries})
        if response.status_code == 200:
            assert not repeat_an_id, response.text
            self.answered_each(entries, response)
        else:
            self.agrees(name, response)

    @rule(
        data=st.data(),
        max_messages=st.integers(1, 5),
        visibility_timeout=st.sampled_from([None, 0, 0, 30]),
        # Mostly plain receives: those run the hot statements outside a transaction.
        attempt_id=st.sampled_from([None, None, None, "t1", "t2"]),
        consumer_id=st.sampled_from([None, None, None, *inputs.CONSUMERS]),
    )
    def receive(
        self,
        data: st.DataObject,
        max_messages: int,
        visibility_timeout: int | None,
        attempt_id: str | None,
        consumer_id: str | None,
    ) -> None:
        name = self.name(data)
        body: dict[str, Any] = {"max_messages": max_messages, "wait_seconds": 0}
        optional = {"visibility_timeout": visibility_timeout, "attempt_id": attempt_id, "consumer_id": consumer_id}
        body.update({k: v for k, v in optional.items() if v is not None})
        response = self.take(name, body)
        self.agrees(name, response)
        if response.status_code == 200:
            # A repeated attempt id is answered with that attempt's messages, however many.
            assert len(response.json()["messages"]) <= max_messages or attempt_id is not None

    def take(self, name: str, body: dict[str, Any]) -> httpx.Response:
        """Receive from `name`, keeping the receipt handles."""
        response = self.call("POST", f"/v1/queues/{name}/messages/receive", (200,), json=body)
        if response.status_code == 200:
            self.receipts += [(name, m["receipt_handle"]) for m in response.json()["messages"]]
            del self.receipts[:-40]
        return response

    def handles(self, data: st.DataObject, name: str) -> list[str]:
        """Receipt handles for a settle: mostly this queue's, else other queues', forged ones."""
        known = [handle for _, handle in self.receipts]
        ours = [handle for queue, handle in self.receipts if queue == name]
        other = inputs.FORGED_HANDLES | st.sampled_from(known) if known else inputs.FORGED_HANDLES
        handle = inputs.mostly(st.sampled_from(ours), other) if ours else other
        return data.draw(st.lists(handle, min_size=1, max_size=4), label="handles")

    def answered_each(self, entries: list[dict[str, Any]], response: httpx.Response) -> None:
        """A batch answer accounts for every entry once, as successful or failed."""
        answer = response.json()
        ids = [e["id"] for e in answer["successful"]] + [e["id"] for e in answer["failed"]]
        assert sorted(ids) == sorted(e["id"] for e in entries), answer

    @precondition(lambda self: self.receipts)
    @rule(data=st.data(), verb=st.sampled_from(["ack", "nack", "visibility"]))
    def settle(self, data: st.DataObject, verb: str) -> None:
        name = self.name(data)
        extra = {
            "ack": st.fixed_dictionaries({}, optional={"result": inputs.JSON_VALUES}),
            "nack": st.fixed_dictionaries(
                {}, optional={"delay_seconds": st.sampled_from([0, 5]), "error": inputs.JSON_VALUES}
            ),
            "visibility": st.fixed_dictionaries({"visibility_timeout": st.sampled_from([0, 10])}),
        }[verb]
        entries = [
            {"id": f"h{i}", "receipt_handle": handle, **data.draw(extra, label="fields")}
            for i, handle in enumerate(self.handles(data, name))
        ]
        response = self.call("POST", f"/v1/queues/{name}/messages/{verb}", (200,), json={"entries": entries})
        self.agrees(name, response)
        if response.status_code == 200:
            self.answered_each(entries, response)

    @precondition(lambda self: self.receipts)
    @rule(data=st.data())
    def delete_message(self, data: st.DataObject) -> None:
        name = self.name(data)
        [handle] = self.handles(data, name)[:1]
        response = self.call("DELETE", f"/v1/queues/{name}/messages/{handle}", (204,))
        self.agrees(name, response)

    @rule(data=st.data(), consumer_id=st.sampled_from(inputs.CONSUMERS))
    def release(self, data: st.DataObject, consumer_id: str) -> None:
        name = self.name(data)
        response = self.call("POST", f"/v1/queues/{name}/messages/release", (200,), json={"consumer_id": consumer_id})
        self.agrees(name, response)

    # -- keys -----------------------------------------------------------------------------------

    @rule(
        actions=st.lists(st.sampled_from(["send", "receive", "ack", "read", "admin"]), min_size=1, unique=True),
        exact=st.booleans(),
    )
    def make_key(self, actions: list[str], exact: bool) -> None:
        queues = f"{self.prefix}a" if exact else f"{self.prefix}*"
        body = {"name": self.prefix + "key", "grants": [{"queues": queues, "actions": actions}]}
        made = self.call("POST", "/v1/keys", (201,), json=body).json()
        [grant] = made["api_key"]["grants"]
        assert grant["queues"] == queues and set(grant["actions"]) == set(actions), made
        self.keys[made["api_key"]["key_id"]] = False

    @rule(data=st.data())
    def revoke_key(self, data: st.DataObject) -> None:
        own = self.key.split("_")[1]
        ids = st.sampled_from([own, "0123456789ab", "self"])
        key_id = data.draw(inputs.mostly(st.sampled_from(sorted(self.keys)), ids) if self.keys else ids, label="key")
        response = self.call("DELETE", f"/v1/keys/{key_id}", (200,))
        if key_id in self.keys:
            assert response.status_code == 200 and response.json()["revoked_at"] is not None, response.text
            self.keys[key_id] = True
        else:
            assert response.status_code == (409 if key_id == own else 404), response.text

    @rule()
    def list_keys(self) -> None:
        listed = {k["key_id"]: k["revoked_at"] is not None for k in self.call("GET", "/v1/keys", (200,)).json()["keys"]}
        assert {key_id: listed.get(key_id) for key_id in self.keys} == self.keys

    @rule(
        data=st.data(),
        route=st.sampled_from(
            [
                ("PUT", ""),
                ("PATCH", ""),
                ("POST", "/messages"),
                ("POST", "/messages/batch"),
                ("POST", "/messages/receive"),
                ("POST", "/messages/ack"),
                ("POST", "/messages/nack"),
                ("POST", "/messages/visibility"),
                ("POST", "/messages/release"),
            ]
        ),
        body=inputs.NO_ROUTE_ACCEPTS,
    )
    def refused_body(self, data: st.DataObject, route: tuple[str, str], body: bytes) -> None:
        method, suffix = route
        headers = {"Content-Type": "application/json"}
        response = self.call(method, f"/v1/queues/{self.name(data)}{suffix}", (), content=body, headers=headers)
        assert_error(response, 400)


@pytest.mark.parametrize("fast_path", [True, False], ids=["lane", "fastapi"])
def test_no_sequence_of_requests_gets_a_5xx(db_url: str, fast_path: bool) -> None:
    machine = type("Walk", (ApiMachine,), {"db_url": db_url, "key": admin_key(db_url), "fast_path": fast_path})
    run_state_machine_as_test(machine, settings=settings(RUN, suppress_health_check=[HealthCheck.too_slow]))
