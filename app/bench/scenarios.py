"""Throughput scenarios: send (batches of 1, 10, 1000), consume a preloaded backlog (FIFO and
standard), and roundtrip (send 1, receive 1, ack 1 per message)."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

from app.bench import sqs_client
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
# The APIs a throughput scenario drives (`--api`): the REST API, or the SQS endpoint.
REST = "rest"
SQS = "sqs"


async def send(ctx: Context, batch: int, api: str = REST) -> ScenarioResult:
    """Clients loop POST /messages (batch 1) or /messages/batch, or through SQS SendMessage or
    SendMessageBatch; messages accepted per second."""
    config = ctx.config
    fifo = config.send_kind == "fifo"
    queue, _ = await ctx.new_queue(f"send-b{batch}-{api}", fifo)
    body = ctx.body
    encode: Callable[[str, str | None, str | None], bytes]
    if api == SQS:
        sqs = ctx.sqs_api()
        url = await sqs.queue_url(queue)
        action = "SendMessage" if batch == 1 else "SendMessageBatch"

        def encode(body: str, group: str | None, dedup: str | None) -> bytes:
            if batch == 1:
                return sqs_client.send_message_bytes(url, body, group, dedup)
            return sqs_client.send_batch_bytes(url, body, batch, group, dedup)

        def post(content: bytes) -> Awaitable[int]:
            return sqs.send(action, content, batch, meter, samples)

    else:
        path = f"/v1/queues/{queue}/messages" + ("" if batch == 1 else "/batch")

        def encode(body: str, group: str | None, dedup: str | None) -> bytes:
            if batch == 1:
                return send_one_bytes(body, group_id=group, dedup_id=dedup)
            return send_batch_bytes(body, batch, group_id=group, dedup_prefix=dedup)

        def post(content: bytes) -> Awaitable[int]:
            return ctx.api.send(path, content, batch, meter, samples)

    # Standard queues take the same bytes every time; FIFO sends need a group and fresh dedup ids.
    fixed = encode(body, None, None)
    sequence = [0] * config.clients

    def content(client: int) -> bytes:
        if not fifo:
            return fixed
        sequence[client] += 1
        return encode(body, f"c{client}", f"c{client}-{sequence[client]}")

    samples, meter = Samples(), Meter()

    async def step(client: int) -> int:
        return await post(content(client))

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
        api=api,
    )
    ctx.finish(result, meter, cpu)
    return result


async def consume(ctx: Context, kind: str, api: str = REST) -> ScenarioResult:
    """Preload a backlog in SQL, then clients loop receive(n, wait 1) + one batch ack of what they
    got (through SQS: ReceiveMessage + DeleteMessageBatch), until the backlog is drained or the
    time is up; messages acked per second."""
    config = ctx.config
    fifo = kind == "fifo"
    queue, queue_id = await ctx.new_queue(f"consume-{api}", fifo)
    # What each API's senders store: a JSON document over REST, a string through SQS (the same
    # text, as SendMessage stores a MessageBody).
    body = json.dumps(ctx.body) if api == SQS else ctx.body
    preload_seconds = await ctx.preload(queue_id, config.backlog, group_count=config.groups if fifo else 0, body=body)
    receives, acks, meter = Samples(), Samples(), Meter()
    empty = [0]
    drained_at: list[float] = []
    if api == SQS:
        sqs = ctx.sqs_api()
        url = await sqs.queue_url(queue)
        request = sqs_client.receive_bytes(url, config.receive_batch, RECEIVE_WAIT_SECONDS)

        async def receive() -> list[str] | None:
            return await sqs.receipts(request, meter, receives)

        def ack(handles: list[str]) -> Awaitable[int]:
            return sqs.delete(url, handles, meter, acks)

    else:
        request = receive_bytes(config.receive_batch, RECEIVE_WAIT_SECONDS)

        async def receive() -> list[str] | None:
            messages = await ctx.api.receive(queue, request, meter, receives)
            return None if messages is None else [m["receipt_handle"] for m in messages]

        def ack(handles: list[str]) -> Awaitable[int]:
            return ctx.api.ack(queue, handles, meter, acks)

    async def step(client: int) -> int:
        handles = await receive()
        if not handles:
            empty[0] += handles is not None
            return 0
        acked = await ack(handles)
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
        api=api,
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
