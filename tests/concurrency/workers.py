"""Consumers, producers' helpers and a lease sampler for the concurrency tests.

A consumer talks to the queue through an `Endpoint`: the HTTP API (requests run concurrently
through the app and its pool) or the MessageService directly. Either way every concurrent call
takes its own pooled connection, so PostgreSQL sees real parallel sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any, Protocol

import httpx
import psycopg

from app.service.messages import MessageService, ReceiptEntry
from tests.concurrency.history import Got, History

MAX_ROUNDS = 5000


class Endpoint(Protocol):
    """What a consumer needs from a queue."""

    async def receive(self, max_messages: int, wait_seconds: int, visibility_timeout: int) -> list[Got]: ...

    async def ack(self, batch: list[Got]) -> list[str]:
        """Ack `batch`; the receipt handles that were refused."""
        ...


class ServiceEndpoint:
    """A queue reached through the MessageService."""

    def __init__(self, messages: MessageService, queue: str) -> None:
        self.messages = messages
        self.queue = queue

    async def receive(self, max_messages: int, wait_seconds: int, visibility_timeout: int) -> list[Got]:
        got = await self.messages.receive(
            self.queue,
            max_messages=max_messages,
            wait_seconds=wait_seconds,
            visibility_timeout=visibility_timeout,
        )
        return [Got.of(m) for m in got]

    async def ack(self, batch: list[Got]) -> list[str]:
        outcome = await self.messages.ack(
            self.queue,
            [ReceiptEntry(id=str(i), receipt_handle=g.receipt_handle) for i, g in enumerate(batch)],
        )
        return [batch[int(i)].receipt_handle for i, failure in outcome.items() if failure is not None]


class HttpEndpoint:
    """A queue reached through the HTTP API."""

    def __init__(self, client: httpx.AsyncClient, queue: str) -> None:
        self.client = client
        self.path = f"/v1/queues/{queue}/messages"

    async def receive(self, max_messages: int, wait_seconds: int, visibility_timeout: int) -> list[Got]:
        response = await self.client.post(
            f"{self.path}/receive",
            json={
                "max_messages": max_messages,
                "wait_seconds": wait_seconds,
                "visibility_timeout": visibility_timeout,
            },
        )
        assert response.status_code == 200, response.text
        return [Got.of_json(m) for m in response.json()["messages"]]

    async def ack(self, batch: list[Got]) -> list[str]:
        entries = [{"id": f"e{i}", "receipt_handle": g.receipt_handle} for i, g in enumerate(batch)]
        response = await self.client.post(f"{self.path}/ack", json={"entries": entries})
        assert response.status_code == 200, response.text
        return [batch[int(f["id"][1:])].receipt_handle for f in response.json()["failed"]]


async def consume(
    endpoint: Endpoint,
    history: History,
    consumer: int,
    *,
    deadline: float,
    max_messages: int = 5,
    wait_seconds: int = 1,
    visibility_timeout: int = 300,
) -> int:
    """Receive, record and ack until the history is done (or broken) or the deadline passes;
    the number of rounds run."""
    loop = asyncio.get_running_loop()
    rounds = 0
    while not (history.done or history.broken) and loop.time() < deadline and rounds < MAX_ROUNDS:
        rounds += 1
        batch = await endpoint.receive(max_messages, wait_seconds, visibility_timeout)
        if not batch:
            continue
        history.delivered(consumer, batch)
        # Let every other consumer run while this one holds its messages.
        await asyncio.sleep(0)
        history.acking(batch)
        history.acked_ok(batch, await endpoint.ack(batch))
    return rounds


async def run_consumers(
    endpoint: Endpoint, history: History, count: int, *, time_limit: float, **options: Any
) -> list[int]:
    """`count` consumers in parallel until the history is done; fails when the time runs out."""
    deadline = asyncio.get_running_loop().time() + time_limit
    # A task group: when one consumer fails, the others are cancelled rather than left running.
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(consume(endpoint, history, c, deadline=deadline, **options)) for c in range(count)]
    rounds = [t.result() for t in tasks]
    assert history.done and not history.broken, (
        f"consumers stopped after {rounds} rounds with {history.remaining}"
        f" of {len(history.must_finish)} messages unfinished; problems so far: {history.problems()[:5]}"
    )
    return rounds


class LeaseSampler:
    """Polls, on a connection of its own, for a FIFO group with two leases in flight at once."""

    QUERY = (
        "SELECT queue_id, group_id, count(DISTINCT lease_id) AS leases FROM messages"
        " WHERE state = 'in_flight' AND group_id IS NOT NULL"
        " GROUP BY queue_id, group_id HAVING count(DISTINCT lease_id) > 1"
    )

    def __init__(self, url: str, *, interval: float = 0.005, max_seconds: float = 60) -> None:
        self.url = url
        self.interval = interval
        self.max_seconds = max_seconds
        self.samples = 0
        self.violations: list[tuple[Any, ...]] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LeaseSampler:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        assert self._task is not None
        await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_seconds
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            while not self._stop.is_set() and loop.time() < deadline:
                cur = await conn.execute(self.QUERY)
                self.violations.extend(await cur.fetchall())
                self.samples += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.interval)


async def history_in_db(url: str) -> dict[str, tuple[int, int, int]]:
    """What the database recorded as finished: outcome -> (rows, distinct messages, max receive count)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT outcome::text, count(*), count(DISTINCT message_id), max(receive_count)"
            " FROM message_history GROUP BY outcome"
        )
        return {row[0]: (int(row[1]), int(row[2]), int(row[3])) for row in await cur.fetchall()}


async def messages_left(url: str) -> int:
    """Messages still in the hot table."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(*) FROM messages")
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])
