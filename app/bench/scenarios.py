"""Throughput scenarios: send (batches of 1, 10, 1000), consume a preloaded backlog (FIFO and
standard), and roundtrip (send 1, receive 1, ack 1 per message)."""

from __future__ import annotations

import time

from app.bench.client import (
    Meter,
    Samples,
    receive_bytes,
    run_clients,
    send_batch_bytes,
    send_one_bytes,
)
from app.bench.context import Context
from app.bench.report import ScenarioResult

RECEIVE_WAIT_SECONDS = 1


async def send(ctx: Context, batch: int) -> ScenarioResult:
    """Clients loop POST /messages (batch 1) or /messages/batch; messages accepted per second."""
    config = ctx.config
    fifo = config.send_kind == "fifo"
    queue, _ = await ctx.new_queue(f"send-b{batch}", fifo)
    path = f"/v1/queues/{queue}/messages" + ("" if batch == 1 else "/batch")
    body = ctx.body
    # Standard queues take the same bytes every time; FIFO sends need a group and fresh dedup ids.
    fixed = send_one_bytes(body) if batch == 1 else send_batch_bytes(body, batch)
    sequence = [0] * config.clients

    def content(client: int) -> bytes:
        if not fifo:
            return fixed
        sequence[client] += 1
        tag = f"c{client}-{sequence[client]}"
        if batch == 1:
            return send_one_bytes(body, group_id=f"c{client}", dedup_id=tag)
        return send_batch_bytes(body, batch, group_id=f"c{client}", dedup_prefix=tag)

    samples, meter = Samples(), Meter()

    async def step(client: int) -> int:
        return await ctx.api.send(path, content(client), batch, meter, samples)

    name = f"send batch={batch}"
    cpu = ctx.cpu.start()
    async with ctx.display.track(name, config.duration, meter):
        elapsed = await run_clients(config.clients, config.duration, meter, step)
    result = ScenarioResult(
        name=name,
        scenario="send",
        params={"batch": batch, "clients": config.clients, "kind": config.send_kind},
        messages=meter.done,
        seconds=round(elapsed, 3),
        throughput=round(meter.done / elapsed, 1),
        latency_ms={"send": samples.summary()},
        primary="send",
    )
    ctx.finish(result, meter, cpu)
    return result


async def consume(ctx: Context, kind: str) -> ScenarioResult:
    """Preload a backlog in SQL, then clients loop receive(n, wait 1) + one batch ack of what they
    got, until the backlog is drained or the time is up; messages acked per second."""
    config = ctx.config
    fifo = kind == "fifo"
    queue, queue_id = await ctx.new_queue("consume", fifo)
    preload_seconds = await ctx.preload(queue_id, config.backlog, group_count=config.groups if fifo else 0)
    request = receive_bytes(config.receive_batch, RECEIVE_WAIT_SECONDS)
    receives, acks, meter = Samples(), Samples(), Meter()
    empty = [0]
    drained_at: list[float] = []

    async def step(client: int) -> int:
        messages = await ctx.api.receive(queue, request, meter, receives)
        if not messages:
            empty[0] += messages is not None
            return 0
        acked = await ctx.api.ack(queue, [m["receipt_handle"] for m in messages], meter, acks)
        if meter.done + acked >= config.backlog and not drained_at:
            drained_at.append(time.perf_counter())
            meter.stop.set()
        return acked

    name = f"consume {kind}"
    cpu = ctx.cpu.start()
    started = time.perf_counter()
    async with ctx.display.track(name, config.duration, meter):
        elapsed = await run_clients(config.clients, config.duration, meter, step)
    if drained_at:
        elapsed = drained_at[0] - started
    result = ScenarioResult(
        name=name,
        scenario="consume",
        params={
            "kind": kind,
            "clients": config.clients,
            "backlog": config.backlog,
            "groups": config.groups if fifo else None,
            "receive_batch": config.receive_batch,
        },
        messages=meter.done,
        seconds=round(elapsed, 3),
        throughput=round(meter.done / elapsed, 1),
        latency_ms={"receive": receives.summary(), "ack": acks.summary()},
        primary="receive",
        extra={
            "drained": bool(drained_at),
            "preload_seconds": round(preload_seconds, 2),
            "empty_receives": empty[0],
            "messages_per_receive": round(meter.done / max(1, len(receives.values)), 2),
        },
        summary="drained" if drained_at else f"{meter.done / config.backlog:.0%} of backlog",
    )
    ctx.finish(result, meter, cpu)
    return result


async def roundtrip(ctx: Context, kind: str) -> ScenarioResult:
    """Each client: send 1, receive 1, ack 1, again; whole messages per second and the latency
    of each step (FIFO: one group per client)."""
    config = ctx.config
    fifo = kind == "fifo"
    queue, _ = await ctx.new_queue("roundtrip", fifo)
    path = f"/v1/queues/{queue}/messages"
    fixed = send_one_bytes(ctx.body)
    request = receive_bytes(1, RECEIVE_WAIT_SECONDS)
    sends, receives, acks, totals, meter = Samples(), Samples(), Samples(), Samples(), Meter()
    sequence = [0] * config.clients

    async def step(client: int) -> int:
        started = time.perf_counter()
        content = fixed
        if fifo:
            sequence[client] += 1
            content = send_one_bytes(ctx.body, group_id=f"c{client}", dedup_id=f"c{client}-{sequence[client]}")
        if not await ctx.api.send(path, content, 1, meter, sends):
            return 0
        messages = await ctx.api.receive(queue, request, meter, receives)
        if not messages:
            return 0
        acked = await ctx.api.ack(queue, [m["receipt_handle"] for m in messages], meter, acks)
        totals.add(time.perf_counter() - started)
        return acked

    name = "roundtrip" if kind == "standard" else f"roundtrip {kind}"
    cpu = ctx.cpu.start()
    async with ctx.display.track(name, config.duration, meter):
        elapsed = await run_clients(config.clients, config.duration, meter, step)
    result = ScenarioResult(
        name=name,
        scenario="roundtrip",
        params={"kind": kind, "clients": config.clients},
        messages=meter.done,
        seconds=round(elapsed, 3),
        throughput=round(meter.done / elapsed, 1),
        latency_ms={
            "message": totals.summary(),
            "send": sends.summary(),
            "receive": receives.summary(),
            "ack": acks.summary(),
        },
        primary="message",
    )
    ctx.finish(result, meter, cpu)
    return result
