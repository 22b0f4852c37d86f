"""What every scenario gets: the config, the target, the HTTP client, the progress display, and
the bookkeeping that turns a finished scenario into a result row (RSS, CPU, errors)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from app.bench import preload
from app.bench.client import Api, Meter, message_body
from app.bench.config import BenchConfig
from app.bench.procs import CpuMeter
from app.bench.report import ScenarioResult
from app.bench.sqs_client import SqsApi
from app.bench.target import Target

TICK_SECONDS = 0.25
# The region the service verifies signatures in (its PQS_SQS_REGION, default us-east-1).
SQS_REGION = os.environ.get("PQS_SQS_REGION", "us-east-1")


class Display:
    """A progress line per scenario (messages done, elapsed) on a terminal; elsewhere one line
    when each scenario ends."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description:<28}"),
            BarColumn(bar_width=30),
            TextColumn("{task.fields[done]:>12,} msgs"),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
        )

    def __enter__(self) -> Display:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def say(self, text: str) -> None:
        self.console.print(text, style="dim", markup=False, highlight=False)

    @asynccontextmanager
    async def track(self, name: str, seconds: float | None, meter: Meter) -> AsyncIterator[None]:
        """Show `name` while the body runs: a time bar over `seconds` (or a pulse) and the
        meter's count."""
        task: TaskID = self.progress.add_task(name, total=seconds, done=0, note="")
        started = time.perf_counter()

        async def tick() -> None:
            while True:
                elapsed = time.perf_counter() - started
                note = f"[red]{meter.errors} errors[/]" if meter.errors else ""
                completed = min(elapsed, seconds) if seconds else None
                self.progress.update(task, completed=completed, done=meter.done, note=note)
                await asyncio.sleep(TICK_SECONDS)

        ticker = asyncio.create_task(tick())
        try:
            yield
        finally:
            ticker.cancel()
            self.progress.update(task, completed=seconds, total=seconds, done=meter.done)


@dataclass
class Context:
    """Shared by the scenarios of one run."""

    config: BenchConfig
    target: Target
    api: Api
    display: Display
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    created: list[str] = field(default_factory=list)
    sqs: SqsApi | None = None

    def sqs_api(self) -> SqsApi:
        """The SQS endpoint's client, signing with the run's key (made on first use)."""
        if self.sqs is None:
            key_id, secret = self.target.sqs_key
            self.sqs = SqsApi(self.target.base_url, key_id, secret, SQS_REGION, self.config.http)
        return self.sqs

    @property
    def body(self) -> str:
        return message_body(self.config.body_bytes)

    @property
    def cpu(self) -> CpuMeter:
        return CpuMeter(self.target.service, self.target.postgres)

    async def new_queue(self, base: str, fifo: bool, **attributes: Any) -> tuple[str, int]:
        """Create a queue of this run (name and database id)."""
        name = f"bench-{base}-{self.run_id}" + (".fifo" if fifo else "")
        await self.api.create_queue(name, **attributes)
        self.created.append(name)
        return name, await asyncio.to_thread(preload.queue_id, self.target.database_url, name)

    async def preload(
        self, queue: int, count: int, *, group_count: int = 0, prefix: str = "g", body: str | None = None
    ) -> float:
        """Preload a backlog (in a thread, with a progress line) of `body` (JSON; by default the
        run's message body); seconds it took."""
        meter = Meter()
        async with self.display.track(f"  preload {count:,}", None, meter):
            seconds = await asyncio.to_thread(
                preload.preload,
                self.target.database_url,
                queue,
                count,
                self.body if body is None else body,
                group_count=group_count,
                prefix=prefix,
            )
            meter.done = count
            await asyncio.to_thread(preload.settle, self.target.database_url)
        return seconds

    def finish(self, result: ScenarioResult, meter: Meter, cpu_start: tuple[float, float, float, float]) -> None:
        """Add what every row carries: CPU use over the scenario, service RSS now, errors."""
        result.cpu_percent = self.cpu.since(cpu_start)
        result.rss_mb = self.rss_mb()
        result.errors = meter.errors
        result.last_error = meter.last_error

    def rss_mb(self) -> float | None:
        rss = self.target.service.rss_mb() if self.target.service else None
        return None if rss is None else round(rss, 1)

    async def cleanup(self) -> None:
        """Delete the queues of this run (only against a service the bench did not start; a run's
        own database is dropped whole)."""
        if self.target.started_service:
            return
        for name in self.created:
            await self.api.delete_queue(name)
