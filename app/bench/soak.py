"""Soak: a steady send + consume load for minutes, sampled every few seconds for the service's
RSS, receive p99 and the dead tuples of the hot tables, to see what grows."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from app.bench import preload
from app.bench.client import Meter, Samples, receive_bytes, send_batch_bytes
from app.bench.context import Context
from app.bench.report import ScenarioResult

SEND_BATCH = 10


async def soak(ctx: Context) -> ScenarioResult:
    """Producers send batches of 10 at `soak_rate` msg/s in all; consumers receive 10 + ack."""
    config = ctx.config
    queue, _ = await ctx.new_queue("soak", False)
    producers = max(1, config.clients // 4)
    consumers = max(1, config.clients - producers)
    seconds = config.soak_minutes * 60
    batch_path = f"/v1/queues/{queue}/messages/batch"
    batch_body = send_batch_bytes(ctx.body, SEND_BATCH)
    request = receive_bytes(10, 1)
    meter, sent = Meter(), Meter()
    window = {"receive": Samples(), "send": Samples(), "ack": Samples()}
    totals = {"receive": Samples(), "send": Samples(), "ack": Samples()}
    deadline = time.perf_counter() + seconds
    # Each producer paces itself so that together they send soak_rate messages per second.
    pause = SEND_BATCH * producers / max(1, config.soak_rate)

    async def producer() -> None:
        tick = time.perf_counter()
        while time.perf_counter() < deadline and not meter.stop.is_set():
            accepted = await ctx.api.send(batch_path, batch_body, SEND_BATCH, sent, window["send"])
            sent.done += accepted
            tick += pause
            await asyncio.sleep(max(0.0, tick - time.perf_counter()))

    async def consumer() -> None:
        while time.perf_counter() < deadline and not meter.stop.is_set():
            messages = await ctx.api.receive(queue, request, meter, window["receive"])
            if messages:
                acked = await ctx.api.ack(queue, [m["receipt_handle"] for m in messages], meter, window["ack"])
                meter.done += acked
            elif messages is None:
                await asyncio.sleep(0.05)

    series: list[dict[str, Any]] = []
    started = time.perf_counter()

    async def sample() -> None:
        latencies = {}
        for step, samples in window.items():
            window[step] = Samples()
            totals[step].values += samples.values
            latencies[f"{step}_p99_ms"] = samples.summary().get("p99")
        tuples = await asyncio.to_thread(preload.dead_tuples, ctx.target.database_url)
        series.append(
            {
                "t": round(time.perf_counter() - started, 1),
                "rss_mb": ctx.rss_mb(),
                "sent": sent.done,
                "acked": meter.done,
                **latencies,
                "tuples": tuples,
            }
        )

    cpu = ctx.cpu.start()
    async with ctx.display.track("soak", seconds, meter):
        tasks = [asyncio.create_task(producer()) for _ in range(producers)]
        tasks += [asyncio.create_task(consumer()) for _ in range(consumers)]
        try:
            await sample()
            while time.perf_counter() < deadline:
                await asyncio.sleep(min(config.soak_interval, max(0.0, deadline - time.perf_counter())))
                await sample()
        finally:
            meter.stop.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=30)
            for task in tasks:
                task.cancel()
    elapsed = time.perf_counter() - started
    rss = [s["rss_mb"] for s in series if s["rss_mb"] is not None]
    dead = [s["tuples"].get("messages", {}).get("dead", 0) for s in series]
    meter.errors += sent.errors
    meter.last_error = meter.last_error or sent.last_error
    result = ScenarioResult(
        name="soak",
        scenario="soak",
        params={
            "minutes": config.soak_minutes,
            "rate": config.soak_rate,
            "producers": producers,
            "consumers": consumers,
        },
        messages=meter.done,
        seconds=round(elapsed, 2),
        throughput=round(meter.done / elapsed, 1),
        # A paced load leaves receivers waiting for messages: send and ack show the service.
        latency_ms={step: samples.summary() for step, samples in totals.items()},
        primary="send",
        extra={"series": series, "sent": sent.done},
        summary=(f"RSS {rss[0]:.0f}->{rss[-1]:.0f} MB" if rss else "")
        + (f"  dead tuples max {max(dead):,}" if dead else "")
        + f"  backlog {sent.done - meter.done:,}",
    )
    ctx.finish(result, meter, cpu)
    return result
