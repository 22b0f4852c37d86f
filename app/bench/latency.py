"""Latency and fairness scenarios: wake (long-poll wake-up after a send), backlog (receive
latency as the queue grows) and fairness (one huge FIFO group next to many small ones)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from app.bench.client import Meter, Samples, receive_bytes, run_clients, send_one_bytes
from app.bench.context import Context
from app.bench.http import HttpError
from app.bench.report import ScenarioResult

WAKE_WAIT_SECONDS = 20
# Time for every waiter to be parked in its long poll before the first send.
WAKE_SETTLE_SECONDS = 1.0
# After the last send, how long the waiters get to deliver what is left.
WAKE_GRACE_SECONDS = 5.0
BACKLOG_WARMUP_ROUNDS = 20


async def wake(ctx: Context) -> ScenarioResult:
    """W waiters long-poll an empty queue; one sender sends single messages at a fixed interval.
    Latency: from the send's response to the waiter's response carrying that message."""
    config = ctx.config
    queue, _ = await ctx.new_queue("wake", False)
    send_path = f"/v1/queues/{queue}/messages"
    send_body = send_one_bytes(ctx.body)
    request = receive_bytes(1, WAKE_WAIT_SECONDS)
    sent_at: dict[str, float] = {}
    got_at: dict[str, float] = {}
    sends, meter = Samples(), Meter()

    sending_done, all_in = asyncio.Event(), asyncio.Event()

    def check_all_in() -> None:
        if sending_done.is_set() and sent_at.keys() <= got_at.keys():
            all_in.set()

    async def waiter() -> None:
        while not meter.stop.is_set():
            messages = await ctx.api.receive(queue, request, meter, None)
            now = time.perf_counter()
            if messages is None:
                await asyncio.sleep(0.05)
                continue
            for m in messages:
                got_at[m["message_id"]] = now
            check_all_in()
            if messages:
                await ctx.api.ack(queue, [m["receipt_handle"] for m in messages], meter, None)

    cpu = ctx.cpu.start()
    seconds = WAKE_SETTLE_SECONDS + config.wake_samples * config.wake_interval + WAKE_GRACE_SECONDS
    async with ctx.display.track("wake", seconds, meter):
        waiters = [asyncio.create_task(waiter()) for _ in range(config.wake_waiters)]
        try:
            await asyncio.sleep(WAKE_SETTLE_SECONDS)
            tick = time.perf_counter()
            for _ in range(config.wake_samples):
                tick += config.wake_interval
                await asyncio.sleep(max(0.0, tick - time.perf_counter()))
                started = time.perf_counter()
                try:
                    response = await ctx.api.post(send_path, send_body)
                except HttpError as exc:
                    meter.error(f"send: {exc}")
                    continue
                answered = time.perf_counter()
                if response.status_code != 201:
                    meter.error(f"send: {response.status_code} {response.text[:200]}")
                    continue
                sends.add(answered - started)
                sent_at[json.loads(response.content)["message_id"]] = answered
                meter.done += 1
            sending_done.set()
            check_all_in()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_in.wait(), WAKE_GRACE_SECONDS)
        finally:
            meter.stop.set()
            # One more message per waiter ends the parked long polls: a cancelled client would leave
            # its poll waiting in the service (it does not notice the disconnect), holding up its
            # shutdown until the poll's 20 s are over.
            with contextlib.suppress(HttpError):
                for _ in waiters:
                    await ctx.api.post(send_path, send_body)
            await asyncio.wait(waiters, timeout=WAKE_GRACE_SECONDS)
            for task in waiters:
                task.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
    latencies = Samples()
    early = 0
    for message_id, answered in sent_at.items():
        if message_id in got_at:
            delta = got_at[message_id] - answered
            early += delta < 0
            latencies.add(max(0.0, delta))
    result = ScenarioResult(
        name="wake",
        scenario="wake",
        params={
            "waiters": config.wake_waiters,
            "samples": config.wake_samples,
            "interval_ms": round(config.wake_interval * 1000, 1),
        },
        messages=len(latencies.values),
        seconds=round(seconds, 2),
        throughput=None,
        latency_ms={"wake": latencies.summary(), "send": sends.summary()},
        primary="wake",
        extra={
            "not_received": len(sent_at) - len(latencies.values),
            # The waiter's answer came before the sender's own 201 (counted as 0 ms).
            "received_before_send_response": early,
        },
    )
    ctx.finish(result, meter, cpu)
    return result


async def backlog(ctx: Context, kind: str) -> ScenarioResult:
    """Receive 1 + ack 1 latency with a few clients while the queue holds each of the sizes
    (topped up in SQL between measurements); p99 of the largest over p99 of the smallest."""
    config = ctx.config
    fifo = kind == "fifo"
    queue, queue_id = await ctx.new_queue("backlog", fifo)
    queued = 0
    per_size: list[dict[str, Any]] = []
    total = Meter()
    cpu = ctx.cpu.start()
    for size in sorted(config.backlog_sizes):
        preload_seconds = await ctx.preload(queue_id, size - queued, group_count=config.groups if fifo else 0)
        queued = size

        warm_meter, meter, receives, acks = Meter(), Meter(), Samples(), Samples()
        await _receive_ack(ctx, queue, config.backlog_clients, 30.0, BACKLOG_WARMUP_ROUNDS, warm_meter, None, None)
        async with ctx.display.track(f"backlog {kind} {size:,}", config.backlog_seconds, meter):
            await _receive_ack(ctx, queue, config.backlog_clients, config.backlog_seconds, None, meter, receives, acks)
        queued -= meter.done + warm_meter.done
        total.done += meter.done
        total.errors += meter.errors + warm_meter.errors
        total.last_error = meter.last_error or warm_meter.last_error or total.last_error
        per_size.append(
            {
                "size": size,
                "receive": receives.summary(),
                "ack": acks.summary(),
                "preload_seconds": round(preload_seconds, 2),
            }
        )
    first, last = per_size[0]["receive"], per_size[-1]["receive"]
    ratio = round(last["p99"] / first["p99"], 3) if first.get("p99") and last.get("p99") else None
    worst = max((s["receive"].get("p99", 0.0) for s in per_size), default=None)
    result = ScenarioResult(
        name=f"backlog {kind}",
        scenario="backlog",
        params={"kind": kind, "sizes": list(config.backlog_sizes), "clients": config.backlog_clients},
        messages=total.done,
        seconds=round(config.backlog_seconds * len(per_size), 2),
        throughput=None,
        latency_ms={"receive": last, "ack": per_size[-1]["ack"]},
        primary="receive",
        extra={"sizes": per_size, "p99_ratio": ratio, "worst_p99_ms": worst},
        summary="  ".join(f"{s['size']:,}: p99 {s['receive'].get('p99', 0):.1f}" for s in per_size)
        + (f"  ratio {ratio:.2f}" if ratio else ""),
    )
    ctx.finish(result, total, cpu)
    return result


async def _receive_ack(
    ctx: Context,
    queue: str,
    clients: int,
    seconds: float,
    rounds: int | None,
    meter: Meter,
    receives: Samples | None,
    acks: Samples | None,
) -> None:
    """Clients loop receive 1 + ack 1 for `seconds` (or `rounds` each)."""
    request = receive_bytes(1, 1)

    async def step(client: int) -> int:
        messages = await ctx.api.receive(queue, request, meter, receives)
        if not messages:
            return 0
        return await ctx.api.ack(queue, [m["receipt_handle"] for m in messages], meter, acks)

    await run_clients(clients, seconds, meter, step, max_steps=rounds or 10_000_000)


async def fairness(ctx: Context) -> ScenarioResult:
    """One FIFO group with a big backlog and many groups of a few messages; consumers receive 10
    + ack. The share of the big group drained when the last small group is finished."""
    config = ctx.config
    queue, queue_id = await ctx.new_queue("fairness", True)
    big = config.fairness_big
    small_total = config.fairness_groups * config.fairness_group_size
    # The big group goes in first: it is at the head of the rotation when the clients start.
    await ctx.preload(queue_id, big, group_count=1, prefix="big")
    await ctx.preload(queue_id, small_total, group_count=config.fairness_groups, prefix="g")
    request = receive_bytes(10, 1)
    receives, acks, meter = Samples(), Samples(), Meter()
    counts = {"big": 0, "small": 0}
    finished_at: list[float] = []

    async def step(client: int) -> int:
        messages = await ctx.api.receive(queue, request, meter, receives)
        if not messages:
            return 0
        acked = await ctx.api.ack(queue, [m["receipt_handle"] for m in messages], meter, acks)
        if acked == len(messages) and not finished_at:
            for m in messages:
                counts["big" if m["group_id"] == "big" else "small"] += 1
            if counts["small"] >= small_total:
                finished_at.append(time.perf_counter())
                meter.stop.set()
        return acked

    seconds = max(3 * config.duration, 20.0)
    cpu = ctx.cpu.start()
    started = time.perf_counter()
    async with ctx.display.track("fairness", seconds, meter):
        elapsed = await run_clients(config.clients, seconds, meter, step)
    if finished_at:
        elapsed = finished_at[0] - started
    fraction = counts["big"] / big if big else 0.0
    result = ScenarioResult(
        name="fairness",
        scenario="fairness",
        params={
            "big_group": big,
            "small_groups": config.fairness_groups,
            "small_group_size": config.fairness_group_size,
            "clients": config.clients,
        },
        messages=meter.done,
        seconds=round(elapsed, 3),
        throughput=round(meter.done / elapsed, 1),
        latency_ms={"receive": receives.summary(), "ack": acks.summary()},
        primary="receive",
        extra={
            "big_fraction": round(fraction, 5),
            "big_acked": counts["big"],
            "small_acked": counts["small"],
            "small_groups_finished": bool(finished_at),
        },
        summary=f"big group {fraction:.2%} drained" + ("" if finished_at else " (small groups unfinished)"),
    )
    ctx.finish(result, meter, cpu)
    return result
