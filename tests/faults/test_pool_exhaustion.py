"""Pool exhaustion: a service with a pool of two connections, both held by requests stuck behind
a lock the test holds in a connection of its own, and a burst of 40 concurrent requests of every
kind on top.

Proves: each request of the burst waits at most the pool timeout, then is answered 503 with
Retry-After (no hang, no pile-up: nothing is left waiting in the pool afterwards); once the
lock goes, the stuck requests finish normally and the service serves again at once: a burst of
the same size is answered, each request of it served or, when the two connections could not serve
them all within the pool timeout (a loaded machine), refused only after waiting that timeout
(never at once, as a circuit opened by the burst would), and then requests one after the other
are all served."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import httpx
import psycopg
import pytest
import pytest_asyncio
from fastapi import FastAPI

from app.access import EVERYTHING
from app.db.sessions import on_connection
from app.main import create_app
from app.service.keys import create_key
from tests.conftest import settings_for
from tests.faults.load import Api, api, create_queue, waiting_on_locks

pytestmark = pytest.mark.xdist_group("faults")

POOL_TIMEOUT = 0.5
BOUND = POOL_TIMEOUT + 1.5  # a request may wait for the pool at most twice (auth, then its work)
URL = "http://pqs.test"


@pytest_asyncio.fixture
async def small(db_url: str) -> AsyncIterator[FastAPI]:
    """The app with a pool of at most two connections and a short pool timeout (statements may
    wait for locks much longer, so stuck requests keep their connections)."""
    settings = settings_for(
        db_url, pool_min_size=1, pool_max_size=2, pool_timeout_seconds=POOL_TIMEOUT, lock_timeout_seconds=60
    )
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest_asyncio.fixture
async def short_locks(db_url: str) -> AsyncIterator[FastAPI]:
    """The same small pool, and statements wait for a lock no longer than for a connection."""
    settings = settings_for(
        db_url, pool_min_size=1, pool_max_size=2, pool_timeout_seconds=POOL_TIMEOUT, lock_timeout_seconds=POOL_TIMEOUT
    )
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


def request(client: Api, fifo: str, standard: str, i: int) -> Coroutine[Any, Any, httpx.Response | None]:
    """The `i`th request of a mix of every kind, none of them touching the locked table."""
    kinds = [
        ("send", "POST", f"/v1/queues/{standard}/messages", lambda i: {"body": {"n": i}, "dedup_id": f"b{i}"}),
        ("receive", "POST", f"/v1/queues/{standard}/messages/receive", lambda i: {"max_messages": 1}),
        ("batch", "POST", f"/v1/queues/{standard}/messages/batch",
         lambda i: {"entries": [{"id": "0", "body": {"n": i}, "dedup_id": f"c{i}"}]}),
        ("stats", "GET", f"/v1/queues/{fifo}", lambda i: None),
        ("readyz", "GET", "/readyz", lambda i: None),
    ]  # fmt: skip
    op, method, path, body = kinds[i % len(kinds)]
    return client.call(URL, op, method, path, body(i))


def burst(client: Api, fifo: str, standard: str, size: int) -> list[asyncio.Task[httpx.Response | None]]:
    """`size` concurrent requests of every kind (`request`)."""
    return [asyncio.create_task(request(client, fifo, standard, i)) for i in range(size)]


async def test_requests_beyond_the_pool_get_503_in_bounded_time_and_the_service_recovers(
    small: FastAPI, db_url: str, record_property: Callable[[str, object], None]
) -> None:
    _, key = await on_connection(db_url, lambda conn: create_key(conn, "faults", EVERYTHING))
    loop = asyncio.get_running_loop()
    async with api(key, httpx.ASGITransport(app=small)) as client:
        fifo, standard = "held.fifo", "free"
        for name in (fifo, standard):
            await create_queue(client, URL, name)
        send = {"body": "first", "group_id": "g", "dedup_id": "first"}
        sent = await client.call(URL, "send", "POST", f"/v1/queues/{fifo}/messages", send)
        assert sent is not None and sent.status_code == 201

        lock = await psycopg.AsyncConnection.connect(db_url)
        try:
            await lock.execute("LOCK TABLE message_groups IN ACCESS EXCLUSIVE MODE")
            # Two FIFO receives take both pooled connections and wait for the lock (different
            # visibility timeouts, so that they do not share one statement).
            stuck = [
                asyncio.create_task(
                    client.call(
                        URL,
                        "receive",
                        "POST",
                        f"/v1/queues/{fifo}/messages/receive",
                        {"max_messages": 1, "visibility_timeout": 60 + i},
                    )
                )
                for i in range(2)
            ]
            await waiting_on_locks(db_url, 2)
            started, first = loop.time(), len(client.calls)
            answers = await asyncio.wait_for(asyncio.gather(*burst(client, fifo, standard, 40)), BOUND + 5)
            burst_seconds = loop.time() - started
            burst_calls = client.calls[first:]
            assert not any(task.done() for task in stuck)
            size = small.state.db.pool.get_stats()["pool_size"]
        finally:
            await lock.rollback()
            released = loop.time()
            await lock.close()
        unstuck = await asyncio.wait_for(asyncio.gather(*stuck), 10)
        recovered = loop.time() - released
        first_after = len(client.calls)
        after = await asyncio.wait_for(asyncio.gather(*burst(client, fifo, standard, 40)), 10)
        after_calls = client.calls[first_after:]
        # One after the other, nothing competes for the two connections: each kind is served.
        one_by_one = [await asyncio.wait_for(request(client, fifo, standard, 40 + i), 10) for i in range(5)]
        # Nobody left waiting for a connection (timed-out waiters are dropped once one comes back).
        waiting = small.state.db.pool.get_stats()["requests_waiting"]

    record_property("figures", json.dumps({
        "burst": len(answers),
        "503": sum(1 for r in answers if r is not None and r.status_code == 503),
        "slowest_503_s": round(max(c.seconds for c in burst_calls if c.status == 503), 2),
        "burst_s": round(burst_seconds, 2),
        "stuck_done_after_release_s": round(recovered, 2),
        "after_ok": sum(1 for r in after if r is not None and r.status_code in (200, 201)),
    }))  # fmt: skip

    # Every request of the burst: 503 with Retry-After, within the bound.
    assert all(r is not None and r.status_code == 503 and r.headers["retry-after"] == "1" for r in answers)
    assert {r.json()["error"]["code"] for r in answers if r is not None} == {"unavailable"}
    assert len(burst_calls) == 40 and all(c.seconds <= BOUND for c in burst_calls)
    assert burst_seconds <= BOUND + 1
    assert size <= 2
    # The stuck receives finish once the lock goes (one gets the message), then everything works.
    assert sorted(len(r.json()["messages"]) for r in unstuck if r is not None and r.status_code == 200) == [0, 1]
    # 40 requests on two connections: on a loaded machine some may wait out the pool timeout, and
    # only those may be refused; a 503 sooner is one that did not wait (a circuit the burst opened).
    assert all(c.status in (200, 201) or (c.status == 503 and c.seconds >= POOL_TIMEOUT) for c in after_calls), [
        (c.op, c.status, round(c.seconds, 3), c.body) for c in after_calls if c.status not in (200, 201)
    ]
    assert len(after_calls) == len(after) == 40
    assert all(r is not None and r.status_code in (200, 201) for r in one_by_one), [r and r.text for r in one_by_one]
    assert waiting == 0


async def test_sends_queued_behind_a_stuck_flush_get_503_in_bounded_time(short_locks: FastAPI, db_url: str) -> None:
    _, key = await on_connection(db_url, lambda conn: create_key(conn, "faults", EVERYTHING))
    async with api(key, httpx.ASGITransport(app=short_locks)) as client:
        await create_queue(client, URL, "stuck")
        lock = await psycopg.AsyncConnection.connect(db_url)
        try:
            # A send's flush takes a key-share lock on its queue row: this makes the flushes wait.
            await lock.execute("SELECT 1 FROM queues WHERE name = 'stuck' FOR UPDATE")
            path = "/v1/queues/stuck/messages"
            first = [asyncio.create_task(client.call(URL, "send", "POST", path, {"body": i})) for i in range(2)]
            await waiting_on_locks(db_url, 1)
            queued = [asyncio.create_task(client.call(URL, "send", "POST", path, {"body": i})) for i in range(10)]
            done, _ = await asyncio.wait(queued, timeout=BOUND + 1)
        finally:
            await lock.rollback()
            await lock.close()
        await asyncio.wait_for(asyncio.gather(*first, *queued), 10)
    assert len(done) == len(queued)
    assert all(task.result() is not None and task.result().status_code == 503 for task in done)
