"""Round robin under parallel consumers: a group with a big backlog does not starve the others."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.service.messages import MessageService, ReceiptEntry
from app.service.queues import QueueService
from tests.concurrency.history import History
from tests.concurrency.workers import ServiceEndpoint, run_consumers
from tests.factories import fifo_entries, make_queue


async def test_small_groups_are_served_before_a_big_backlog_is_a_tenth_drained(
    queues: QueueService, live: MessageService
) -> None:
    big, small_groups, small, consumers = 2000, 100, 10, 8
    name = await make_queue(queues, fifo=True)
    # The big group is sent first, so it also starts first in the rotation.
    backlog = fifo_entries("big", big)
    for start in range(0, big, 1000):
        await live.send(name, backlog[start : start + 1000])
    await live.send(name, [e for s in range(small_groups) for e in fifo_entries(f"s{s}", small)])
    small_keys = {(f"s{s}", n) for s in range(small_groups) for n in range(small)}
    history = History(small_keys | {("big", n) for n in range(big)}, fifo=True, must_finish=small_keys)

    await run_consumers(ServiceEndpoint(live, name), history, consumers, time_limit=40, max_messages=10)

    assert history.problems() == []
    last_small = max(i for i, d in enumerate(history.deliveries) if d.got.group_id != "big")
    big_before = sum(1 for d in history.deliveries[:last_small] if d.got.group_id == "big")
    assert big_before < big // 10, f"the big group got {big_before} messages before the small groups were done"
    order = history.group_order()
    assert all(order[f"s{s}"] == list(range(small)) for s in range(small_groups))
    assert order["big"] == list(range(len(order["big"])))


async def test_a_group_picked_but_not_served_keeps_its_place_in_the_rotation(
    queues: QueueService, messages: MessageService
) -> None:
    name = await make_queue(queues, fifo=True)
    base = datetime.now(UTC)

    def at(seconds: int) -> datetime:
        return base + timedelta(seconds=seconds)

    async def receive_and_ack(seconds: int) -> str | None:
        got = await messages.receive(name, max_messages=10, now=at(seconds))
        outcome = await messages.ack(
            name,
            [ReceiptEntry(id=str(i), receipt_handle=m.receipt_handle) for i, m in enumerate(got)],
            now=at(seconds),
        )
        assert all(failure is None for failure in outcome.values())
        groups = {m.group_id for m in got}
        assert len(groups) == 1, groups
        return groups.pop()

    await messages.send(name, fifo_entries("big", 20), now=at(0))
    await messages.send(name, fifo_entries("a", 10) + fifo_entries("b", 10), now=at(1))
    # big is served first and goes behind a and b; the next receive picks a, b and big but can
    # serve only the first of them (ten messages fill it).
    assert await receive_and_ack(2) == "big"
    first_small = await receive_and_ack(4)
    assert first_small in {"a", "b"}

    # The other small group has waited since second 1, big only since second 2: it is next.
    assert await receive_and_ack(6) == ({"a", "b"} - {first_small}).pop()
