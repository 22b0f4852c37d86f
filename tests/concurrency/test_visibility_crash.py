"""Consumers that crash (never ack) under concurrency: once the visibility timeout runs out their
messages come back, head of the group first, with receive count 2; nothing is lost."""

from __future__ import annotations

import asyncio

from app.service.messages import MessageService, ReceiptEntry
from app.service.queues import QueueService
from tests.concurrency.history import History
from tests.concurrency.workers import ServiceEndpoint, history_in_db, messages_left, run_consumers
from tests.factories import fifo_entries, make_queue


async def test_messages_of_crashed_consumers_come_back_in_group_order(
    queues: QueueService, live: MessageService, db_url: str
) -> None:
    groups, per_group, crashers, healthy = 8, 6, 3, 6
    name = await make_queue(queues, fifo=True)
    await live.send(name, [e for g in range(groups) for e in fifo_entries(f"g{g}", per_group)])
    history = History({(f"g{g}", n) for g in range(groups) for n in range(per_group)}, fifo=True)
    endpoint = ServiceEndpoint(live, name)
    loop = asyncio.get_running_loop()

    crashed_at = loop.time()
    # Parallel short polls may come back empty while the others hold every group they look at;
    # a long poll looks again.
    crashed = await asyncio.gather(
        *(endpoint.receive(max_messages=4, wait_seconds=1, visibility_timeout=1) for _ in range(crashers))
    )
    for c, batch in enumerate(crashed):
        history.delivered(100 + c, batch)
    for batch in crashed:
        history.abandoned(batch)
    held = [got for batch in crashed for got in batch]
    crashed_groups = {got.group_id for got in held}
    # Each crashed receive took the head of a group of its own.
    assert all(crashed) and len(crashed_groups) == crashers

    await run_consumers(
        endpoint, history, healthy, time_limit=20, max_messages=4, wait_seconds=1, visibility_timeout=60
    )

    assert history.problems(redeliveries=True) == []
    assert history.group_order() == {
        f"g{g}": [*range(4), *range(per_group)] if f"g{g}" in crashed_groups else list(range(per_group))
        for g in range(groups)
    }
    again = [d for d in history.deliveries if d.got.receive_count == 2]
    assert sorted(d.got.key for d in again) == sorted(got.key for got in held)
    assert min(d.at for d in again) - crashed_at >= 0.9, "redelivered before the visibility timeout ran out"
    # The crashed receipts are stale now: the messages were received again since.
    stale = await live.ack(name, [ReceiptEntry(id=str(i), receipt_handle=g.receipt_handle) for i, g in enumerate(held)])
    assert {f.code for f in stale.values() if f is not None} == {"receipt_not_found"}
    assert all(f is not None for f in stale.values())
    total = groups * per_group
    assert await history_in_db(db_url) == {"acked": (total, total, 2)}
    assert await messages_left(db_url) == 0
