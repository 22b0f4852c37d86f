"""The load generator's side of the HTTP API: request bodies encoded by hand (or once, and
reused), latency samples, and bounded client loops.

The generator shares two cores with PostgreSQL and the service, so it avoids per-request work
it can skip: no pydantic, no JSON encoding of constant bodies, no parsing of send responses.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from app.bench.http import HttpError, Response, make_http

# Back-off after an error so a failing service does not turn a client into a hot loop.
ERROR_PAUSE_SECONDS = 0.05
# How long a client loop may run past its deadline (one slow request), and past a stop.
STEP_GRACE_SECONDS = 90.0
STOP_GRACE_SECONDS = 0.2


@dataclass
class Samples:
    """Latencies of one step (seconds), kept in full: runs are bounded, so are the lists."""

    values: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.values.append(seconds)

    def summary(self) -> dict[str, float | int]:
        """count, p50/p95/p99/max in milliseconds (nearest rank)."""
        ordered = sorted(self.values)
        if not ordered:
            return {"count": 0}

        def pct(p: float) -> float:
            index = min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))
            return round(ordered[index] * 1000, 3)

        return {"count": len(ordered), "p50": pct(50), "p95": pct(95), "p99": pct(99), "max": pct(100)}


@dataclass
class Meter:
    """Shared counters of a scenario: messages done, errors; read by the progress display."""

    done: int = 0
    errors: int = 0
    last_error: str = ""
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def error(self, what: str) -> None:
        self.errors += 1
        self.last_error = what[:300]


def message_body(size: int) -> str:
    """A JSON message body of about `size` bytes, the same for every message."""
    return json.dumps({"task": "bench", "pad": "x" * max(0, size - 26)}, separators=(",", ":"))


def send_batch_bytes(body: str, count: int, group_id: str | None = None, dedup_prefix: str | None = None) -> bytes:
    """The body of POST /messages/batch with `count` entries (ids 0..count-1)."""
    parts = []
    for i in range(count):
        extra = ""
        if group_id is not None:
            extra += f',"group_id":"{group_id}"'
        if dedup_prefix is not None:
            extra += f',"dedup_id":"{dedup_prefix}-{i}"'
        parts.append(f'{{"id":"{i}","body":{body}{extra}}}')
    return ('{"entries":[' + ",".join(parts) + "]}").encode()


def send_one_bytes(body: str, group_id: str | None = None, dedup_id: str | None = None) -> bytes:
    """The body of POST /messages."""
    extra = ""
    if group_id is not None:
        extra += f',"group_id":"{group_id}"'
    if dedup_id is not None:
        extra += f',"dedup_id":"{dedup_id}"'
    return f'{{"body":{body}{extra}}}'.encode()


def receive_bytes(max_messages: int, wait_seconds: int) -> bytes:
    """The body of POST /messages/receive."""
    return f'{{"max_messages":{max_messages},"wait_seconds":{wait_seconds}}}'.encode()


def ack_bytes(handles: list[str]) -> bytes:
    """The body of POST /messages/ack (receipt handles are base64url: nothing to escape)."""
    entries = ",".join(f'{{"id":"{i}","receipt_handle":"{h}"}}' for i, h in enumerate(handles))
    return ('{"entries":[' + entries + "]}").encode()


class Api:
    """The HTTP API of the service under test, over keep-alive connections (see app.bench.http)."""

    def __init__(self, base_url: str, http: str = "lean", api_key: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self.http = make_http(http, base_url, headers)

    async def close(self) -> None:
        await self.http.close()

    async def post(self, path: str, content: bytes) -> Response:
        return await self.http.request("POST", path, content)

    async def create_queue(self, name: str, **attributes: Any) -> None:
        """PUT the queue (FIFO when the name ends in .fifo); fails loudly."""
        body = json.dumps({"fifo": name.endswith(".fifo"), **attributes}).encode()
        response = await self.http.request("PUT", f"/v1/queues/{name}", body)
        if response.status_code not in (200, 201):
            raise RuntimeError(f"creating queue {name}: {response.status_code} {response.text[:300]}")

    async def delete_queue(self, name: str) -> None:
        response = await self.http.request("DELETE", f"/v1/queues/{name}", seconds=600.0)
        if response.status_code not in (200, 204, 404):
            raise RuntimeError(f"deleting queue {name}: {response.status_code} {response.text[:300]}")

    async def receive(
        self, queue: str, body: bytes, meter: Meter, samples: Samples | None
    ) -> list[dict[str, Any]] | None:
        """Messages of one receive (maybe none); None (counted as an error) on failure. Its latency
        goes to `samples` when it returned messages."""
        started = time.perf_counter()
        try:
            response = await self.post(f"/v1/queues/{queue}/messages/receive", body)
        except HttpError as exc:
            meter.error(f"receive: {exc}")
            return None
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            meter.error(f"receive: {response.status_code} {response.text[:200]}")
            return None
        messages: list[dict[str, Any]] = json.loads(response.content)["messages"]
        # An empty long poll measures the wait asked for, not the service: left out.
        if samples is not None and messages:
            samples.add(elapsed)
        return messages

    async def ack(self, queue: str, handles: list[str], meter: Meter, samples: Samples | None) -> int:
        """Ack these receipts in one batch; how many were acked."""
        started = time.perf_counter()
        try:
            response = await self.post(f"/v1/queues/{queue}/messages/ack", ack_bytes(handles))
        except HttpError as exc:
            meter.error(f"ack: {exc}")
            return 0
        if samples is not None:
            samples.add(time.perf_counter() - started)
        if response.status_code != 200:
            meter.error(f"ack: {response.status_code} {response.text[:200]}")
            return 0
        if b'"failed":[]' in response.content:
            return len(handles)
        failed = json.loads(response.content)["failed"]
        meter.error(f"ack: {len(failed)} entries failed, first: {failed[0]}")
        return len(handles) - len(failed)

    async def send(self, path: str, content: bytes, count: int, meter: Meter, samples: Samples | None) -> int:
        """POST a send (one message or a batch of `count`); how many were accepted."""
        started = time.perf_counter()
        try:
            response = await self.post(path, content)
        except HttpError as exc:
            meter.error(f"send: {exc}")
            return 0
        if samples is not None:
            samples.add(time.perf_counter() - started)
        if response.status_code == 201:
            return 1
        if response.status_code == 200 and b'"failed":[]' in response.content:
            return count
        meter.error(f"send: {response.status_code} {response.text[:200]}")
        return 0


async def run_clients(
    clients: int,
    seconds: float,
    meter: Meter,
    step: Callable[[int], Awaitable[int]],
    max_steps: int = 10_000_000,
) -> float:
    """Run `clients` loops of `step(client)` (it returns messages done) until the time is up, the
    meter's stop is set, or `max_steps` per client; the elapsed seconds."""
    started = time.perf_counter()
    deadline = started + seconds

    async def loop(index: int) -> None:
        for _ in range(max_steps):
            if meter.stop.is_set() or time.perf_counter() >= deadline:
                return
            errors = meter.errors
            done = await step(index)  # not `meter.done += await ...`: that reads done before the await
            meter.done += done
            if meter.errors != errors:
                await asyncio.sleep(ERROR_PAUSE_SECONDS)

    tasks = [asyncio.create_task(loop(i)) for i in range(clients)]

    async def all_finished() -> None:
        await asyncio.wait(tasks)

    finished = asyncio.create_task(all_finished())
    stopped = asyncio.create_task(meter.stop.wait())
    try:
        # A step can outlive the deadline by one request; that is bounded too.
        await asyncio.wait(
            [finished, stopped], timeout=seconds + STEP_GRACE_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        if not finished.done():
            # Stopped early (a backlog drained): clients parked in a long poll are not waited for.
            await asyncio.wait([finished], timeout=STOP_GRACE_SECONDS)
    finally:
        for task in (finished, stopped, *tasks):
            task.cancel()
        await asyncio.gather(finished, stopped, *tasks, return_exceptions=True)
    failures = [t.exception() for t in tasks if not t.cancelled() and t.exception() is not None]
    if failures and failures[0] is not None:
        raise failures[0]
    return time.perf_counter() - started
