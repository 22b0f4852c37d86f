"""The fault tests' HTTP load: producers and consumers that behave as a careful client should
when the service or its database fails, recording everything in a Timeline and every call in
`Api.calls`.

- Every call has a timeout (`CALL_TIMEOUT`); a call that times out counts as a failure of the
  service (it hung).
- A send is retried with the same dedup id until it is answered 201 (503 and connection errors
  are retried after `RETRY_PAUSE`); a producer sends each group's messages one after the other,
  each only once the previous one is confirmed.
- An ack is retried with the same receipt handles until it is answered (200); see timeline.py
  for what an answer, a refusal and no answer mean.
- A consumer may be told to quit (its process died): it abandons what it holds without acking.

The pause after a 503 is `RETRY_PAUSE`, shorter than the service's `Retry-After: 1`, to measure
recovery to a tenth of a second; the test asserts that the header is there.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from app.service.maintenance import LEADER_LOCK_KEY
from app.service.wakeup import CHANNEL
from tests.faults.timeline import Delivery, Key, Timeline, tally

# The two queues every fault test loads: one of each kind, so that a fault is seen through FIFO
# groups and through a standard queue alike.
FIFO, STANDARD = "jobs.fifo", "jobs"
CALL_TIMEOUT = 15.0
RETRY_PAUSE = 0.1
# uvicorn closes a connection idle for 5 s (its timeout_keep_alive), and httpx kept connections
# for 5 s too: a request sent on one just as the server closed it ended in ReadError or
# RemoteProtocolError, no answer, with nothing at fault but the two equal timers. A client
# reuses a connection only well inside the server's idle limit.
CONNECTIONS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=2.0)


@dataclass(frozen=True)
class Call:
    """One HTTP call as the client saw it."""

    target: str
    op: str
    started: float
    finished: float
    status: int | None  # None: no answer (connection error or timeout)
    error: str | None = None
    retry_after: str | None = None
    body: str = ""

    @property
    def seconds(self) -> float:
        return self.finished - self.started


class Api:
    """HTTP clients for one or more service URLs, with an API key; every call is recorded."""

    def __init__(self, key: str, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.headers = {"Authorization": f"Bearer {key}"}
        self.transport = transport
        self.calls: list[Call] = []
        self._clients: dict[str, httpx.AsyncClient] = {}

    def client(self, target: str) -> httpx.AsyncClient:
        if target not in self._clients:
            self._clients[target] = httpx.AsyncClient(
                base_url=target,
                headers=self.headers,
                timeout=CALL_TIMEOUT,
                limits=CONNECTIONS,
                transport=self.transport,
            )
        return self._clients[target]

    async def close(self) -> None:
        for client in self._clients.values():
            await client.aclose()

    async def call(self, target: str, op: str, method: str, path: str, body: Any = None) -> httpx.Response | None:
        """One call; None when no answer came (connection error, timeout)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            response = await self.client(target).request(method, path, json=body)
        except httpx.TransportError as exc:
            self.calls.append(Call(target, op, started, loop.time(), None, type(exc).__name__))
            return None
        text = response.text if response.status_code >= 400 else ""
        self.calls.append(
            Call(
                target, op, started, loop.time(), response.status_code, None, response.headers.get("retry-after"), text
            )
        )
        return response


@asynccontextmanager
async def api(key: str, transport: httpx.AsyncBaseTransport | None = None) -> AsyncIterator[Api]:
    """An Api whose clients are closed on the way out."""
    clients = Api(key, transport)
    try:
        yield clients
    finally:
        await clients.close()


@dataclass
class Targets:
    """The service URLs a client may use, in order of preference; on a connection error it moves
    on to the next (and back to the first after the last)."""

    urls: list[str]
    index: int = 0

    @property
    def current(self) -> str:
        return self.urls[self.index]

    def failover(self) -> None:
        self.index = (self.index + 1) % len(self.urls)


def fifo_keys(groups: list[str]) -> Iterator[Key]:
    """Messages 0, 1, 2 ... of each group, the groups taking turns."""
    for n in itertools.count():
        for group in groups:
            yield (group, n)


def standard_keys(first: int) -> Iterator[Key]:
    """Counters first, first + 1 ... (producers of a standard queue get disjoint ranges)."""
    return ((None, n) for n in itertools.count(first))


async def produce(
    api: Api,
    targets: Targets,
    queue: str,
    history: Timeline,
    keys: Iterator[Key],
    stop: asyncio.Event,
    *,
    deadline: float,
    pause: float = 0.0,
) -> int:
    """Send `keys` one after the other until `stop` is set; the number confirmed. A message that
    cannot be confirmed by `deadline` ends the producer (no later message of its group is sent)."""
    loop = asyncio.get_running_loop()
    confirmed = 0
    for key in keys:
        if stop.is_set():
            break
        group, n = key
        body: dict[str, Any] = {"body": {"n": n}, "dedup_id": f"{group or 's'}-{n}"}
        if group is not None:
            body["group_id"] = group
        while True:
            if loop.time() > deadline:
                return confirmed
            history.send_attempted(key)
            response = await api.call(targets.current, "send", "POST", f"/v1/queues/{queue}/messages", body)
            if response is not None and response.status_code == 201:
                history.sent(key, response.json()["message_id"], loop.time())
                confirmed += 1
                break
            if response is None:
                targets.failover()
            elif response.status_code != 503:
                return confirmed  # an answer no fault explains; the test's call check reports it
            await asyncio.sleep(RETRY_PAUSE)
        if pause:
            await asyncio.sleep(pause)
    return confirmed


def queue_histories(visibility: float) -> dict[str, Timeline]:
    """The timelines of the FIFO and the standard queue, by queue name."""
    return {
        FIFO: Timeline(fifo=True, visibility_timeout=visibility),
        STANDARD: Timeline(fifo=False, visibility_timeout=visibility),
    }


def producers(
    api: Api, targets: Sequence[Targets], histories: dict[str, Timeline], stop: asyncio.Event, *, deadline: float
) -> list[Coroutine[Any, Any, int]]:
    """Per entry of `targets`, two producers sending every 10 ms until `stop`: one to the FIFO
    queue (four groups of its own) and one to the standard queue (a counter range of its own)."""
    fifo = [
        produce(api, where, FIFO, histories[FIFO], fifo_keys([f"p{p}-g{g}" for g in range(4)]), stop,
                deadline=deadline, pause=0.01)
        for p, where in enumerate(targets)
    ]  # fmt: skip
    standard = [
        produce(api, where, STANDARD, histories[STANDARD], standard_keys(p * 1_000_000), stop,
                deadline=deadline, pause=0.01)
        for p, where in enumerate(targets)
    ]  # fmt: skip
    return fifo + standard


def assert_nothing_lost(
    histories: dict[str, Timeline],
    problems: dict[str, list[Any]],
    finished: dict[str, tuple[dict[str, int], int, int]],
    empty: bool,
    *,
    evidence: object = None,
) -> None:
    """The checker found nothing wrong, the queues were drained, and the database finished each
    message once (one history row per acked message) and kept nothing behind."""
    for name, found in problems.items():
        assert found == [], (name, tally(found), found[:10], evidence)
    assert empty, {name: h.stats() for name, h in histories.items()}
    for name in histories:
        acked_ids, rows, left = finished[name]
        assert rows == len(acked_ids) and left == 0, (name, rows, len(acked_ids), left)


@dataclass
class Consumer:
    """Receives, holds for `hold` seconds, acks; until `stop`. When `quit` is set it stops at
    once and abandons what it holds (`abandoned`), as a worker whose process died."""

    name: str
    targets: Targets
    queue: str
    history: Timeline
    visibility_timeout: int
    hold: float = 0.0
    max_messages: int = 5
    wait_seconds: int = 1
    quit: asyncio.Event = field(default_factory=asyncio.Event)
    abandoned: list[Delivery] = field(default_factory=list)

    async def run(self, api: Api, stop: asyncio.Event, *, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        path = f"/v1/queues/{self.queue}/messages"
        request = {
            "max_messages": self.max_messages,
            "wait_seconds": self.wait_seconds,
            "visibility_timeout": self.visibility_timeout,
        }
        while not (stop.is_set() or self.quit.is_set()) and loop.time() < deadline:
            requested = loop.time()
            response = await api.call(self.targets.current, "receive", "POST", f"{path}/receive", request)
            if response is None or response.status_code != 200:
                if response is None:
                    self.targets.failover()
                await asyncio.sleep(RETRY_PAUSE)
                continue
            messages = response.json()["messages"]
            if not messages:
                continue
            delivery = self.history.delivered(self.name, messages, requested, loop.time())
            if self.hold:
                await asyncio.sleep(self.hold)
            if self.quit.is_set():
                self.abandoned.append(delivery)
                return
            await self._ack(api, delivery, deadline=deadline)

    async def _ack(self, api: Api, delivery: Delivery, *, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        entries = [{"id": str(i), "receipt_handle": item.receipt_handle} for i, item in enumerate(delivery.items)]
        path = f"/v1/queues/{self.queue}/messages/ack"
        while loop.time() < deadline:
            started = loop.time()
            response = await api.call(self.targets.current, "ack", "POST", path, {"entries": entries})
            if response is not None and response.status_code == 200:
                failed = [delivery.items[int(f["id"])].receipt_handle for f in response.json()["failed"]]
                self.history.ack(delivery, started, loop.time(), failed)
                return
            self.history.ack(delivery, started, None)
            if response is None:
                self.targets.failover()
            elif response.status_code != 503:
                return
            if self.quit.is_set():
                self.abandoned.append(delivery)
                return
            await asyncio.sleep(RETRY_PAUSE)


async def queue_stats(api: Api, target: str, queue: str) -> dict[str, Any] | None:
    """The queue's stats {visible, in_flight, delayed ...}, or None without a 200 answer."""
    response = await api.call(target, "stats", "GET", f"/v1/queues/{queue}")
    if response is None or response.status_code != 200:
        return None
    stats: dict[str, Any] = response.json()["stats"]
    return stats


async def drained(api: Api, target: str, queues: dict[str, Timeline], *, deadline: float) -> bool:
    """Wait until every confirmed message has an ack (answered ok, or unknown) and every queue
    is empty; False if `deadline` passes first."""
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        if all(history.settled() for history in queues.values()):
            stats = [await queue_stats(api, target, name) for name in queues]
            if all(s is not None and s["visible"] == s["in_flight"] == s["delayed"] == 0 for s in stats):
                return True
        await asyncio.sleep(0.2)
    return False


async def create_queue(api: Api, target: str, queue: str) -> None:
    """PUT the queue (FIFO when its name ends in .fifo)."""
    response = await api.call(target, "create", "PUT", f"/v1/queues/{queue}", {"fifo": queue.endswith(".fifo")})
    assert response is not None and response.status_code == 201, response and response.text


async def finished_in_db(url: str, queue: str) -> tuple[dict[str, int], int, int]:
    """From the database itself: the queue's messages in history as acked (message id -> receive
    count), the number of history rows for the queue (each message must have one), and the
    messages left in the queue."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT message_id::text, outcome::text, receive_count FROM message_history WHERE queue_name = %s",
            (queue,),
        )
        rows = await cur.fetchall()
        cur = await conn.execute(
            "SELECT count(*) FROM messages m JOIN queues q ON q.id = m.queue_id WHERE q.name = %s", (queue,)
        )
        left = await cur.fetchone()
    assert left is not None
    return {str(r[0]): int(r[2]) for r in rows if r[1] == "acked"}, len(rows), int(left[0])


def unexpected(calls: list[Call], *, hang_after: float) -> list[Call]:
    """Calls that no fault excuses: answered neither 2xx nor 503, a 503 without Retry-After, or
    answered (or failed) after more than `hang_after` seconds."""
    return [
        c
        for c in calls
        if (c.status is not None and not (200 <= c.status < 300 or c.status == 503))
        or (c.status == 503 and c.retry_after is None)
        or c.seconds > hang_after
    ]


def figures(histories: dict[str, Timeline], calls: list[Call], problems: dict[str, list[Any]]) -> dict[str, Any]:
    """What a run measured, for the README's Reliability section (pytest's record_property)."""
    found: dict[str, int] = {}
    for listed in problems.values():
        for kind, count in tally(listed).items():
            found[kind] = found.get(kind, 0) + count
    return {
        "messages": sum(h.stats()["confirmed"] for h in histories.values()),
        "redelivered": sum(h.stats()["redeliveries"] for h in histories.values()),
        "ack_unknown": sum(h.stats()["ack_unknown"] for h in histories.values()),
        "calls": len(calls),
        "503": sum(1 for c in calls if c.status == 503),
        "no_answer": sum(1 for c in calls if c.status is None),
        "slowest_call_s": round(max((c.seconds for c in calls), default=0.0), 2),
        **found,
    }


async def probe(api: Api, target: str, queue: str, stop: asyncio.Event, *, every: float = 0.25) -> None:
    """Until `stop`: the queue's attributes and /readyz, which FastAPI serves (not the fast path),
    so outages are seen through its error handlers too."""
    while not stop.is_set():
        await api.call(target, "stats", "GET", f"/v1/queues/{queue}")
        await api.call(target, "readyz", "GET", "/readyz")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


async def service_sessions(url: str, *, deadline: float, listeners: int = 1) -> float:
    """When (loop time) the database sees `listeners` LISTEN sessions of the service processes
    and one maintenance leader holding its lock; fails after `deadline`."""
    loop = asyncio.get_running_loop()
    query = (
        "SELECT (SELECT count(*) FROM pg_stat_activity WHERE query = %s AND datname = current_database()),"
        " (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND granted"
        "   AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))"
    )
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while loop.time() < deadline:
            cur = await conn.execute(query, (f"LISTEN {CHANNEL}", LEADER_LOCK_KEY & 0xFFFF_FFFF))
            if await cur.fetchone() == (listeners, 1):
                return loop.time()
            await asyncio.sleep(0.1)
    raise AssertionError(f"no {listeners} LISTEN sessions and one maintenance leader by the deadline")


async def waiting_on_locks(url: str, count: int) -> None:
    """Until `count` sessions of this database wait for a lock (bounded)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock' AND state = 'active'"
    )
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(200):
            cur = await conn.execute(query)
            row = await cur.fetchone()
            if row is not None and row[0] >= count:
                return
            await asyncio.sleep(0.025)
    raise AssertionError(f"{count} sessions never waited on the lock")
