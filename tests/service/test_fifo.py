"""FIFO semantics at the service layer, with the clock injected (no sleeping)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.db.engine import Database
from app.service.messages import MessageService, ReceiptEntry
from app.service.queues import QueueService
from tests.factories import fifo_entries, make_queue

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def bodies(messages: list) -> list[tuple[str, int]]:  # type: ignore[type-arg]
    return [(m.body["group"], m.body["n"]) for m in messages]


def acks(messages: list) -> list[ReceiptEntry]:  # type: ignore[type-arg]
    return [ReceiptEntry(id=str(i), receipt_handle=m.receipt_handle) for i, m in enumerate(messages)]


async def test_group_is_blocked_while_a_message_is_in_flight(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, fifo=True)
    await messages.send(q, fifo_entries("g", 3), now=at(0))
    first = await messages.receive(q, max_messages=1, now=at(1))
    assert bodies(first) == [("g", 0)]
    assert await messages.receive(q, max_messages=10, now=at(2)) == []
    assert (await messages.ack(q, acks(first), now=at(3))) == {"0": None}
    second = await messages.receive(q, max_messages=1, now=at(4))
    assert bodies(second) == [("g", 1)]


async def test_one_receive_returns_several_messages_of_a_group_in_order(
    queues: QueueService, messages: MessageService
) -> None:
    q = await make_queue(queues, fifo=True)
    await messages.send(q, fifo_entries("a", 4) + fifo_entries("b", 2), now=at(0))
    got = await messages.receive(q, max_messages=10, now=at(1))
    assert bodies(got) == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1)]
    assert [m.sequence_number for m in got[:4]] == sorted(m.sequence_number for m in got[:4])


async def test_expired_lease_redelivers_from_the_head_with_new_handles(
    queues: QueueService, messages: MessageService
) -> None:
    q = await make_queue(queues, fifo=True, visibility_timeout=30)
    await messages.send(q, fifo_entries("g", 3), now=at(0))
    got = await messages.receive(q, max_messages=3, now=at(1))
    assert await messages.ack(q, acks(got[:1]), now=at(2)) == {"0": None}
    assert await messages.receive(q, max_messages=3, now=at(20)) == []
    again = await messages.receive(q, max_messages=3, now=at(32))
    assert bodies(again) == [("g", 1), ("g", 2)]
    assert [m.receive_count for m in again] == [2, 2]
    # The handles of the first delivery no longer work, and change nothing.
    stale = await messages.ack(q, acks(got[1:]), now=at(33))
    assert all(f is not None and f.code == "receipt_not_found" for f in stale.values())
    assert await messages.ack(q, acks(again), now=at(34)) == {"0": None, "1": None}


async def test_visibility_change_holds_the_group_until_its_last_message(
    queues: QueueService, messages: MessageService
) -> None:
    q = await make_queue(queues, fifo=True, visibility_timeout=30)
    await messages.send(q, fifo_entries("g", 3) + fifo_entries("h", 1), now=at(0))
    got = await messages.receive(q, max_messages=10, now=at(1))
    assert bodies(got) == [("g", 0), ("g", 1), ("g", 2), ("h", 0)]
    # Shortening one message of g does not free the group: two more are in flight until 31 s.
    short = [ReceiptEntry(id="short", receipt_handle=got[2].receipt_handle, visibility_timeout=5)]
    assert await messages.change_visibility(q, short, now=at(10)) == {"short": None}
    assert await messages.receive(q, max_messages=10, now=at(20)) == []
    # Extending another holds g until 121 s; h's lease (31 s) is not touched.
    long = [ReceiptEntry(id="long", receipt_handle=got[1].receipt_handle, visibility_timeout=100)]
    assert await messages.change_visibility(q, long, now=at(21)) == {"long": None}
    h = await messages.receive(q, max_messages=10, now=at(40))
    assert bodies(h) == [("h", 0)]
    assert await messages.ack(q, acks(h), now=at(41)) == {"0": None}
    assert await messages.receive(q, max_messages=10, now=at(120)) == []
    again = await messages.receive(q, max_messages=10, now=at(122))
    assert bodies(again) == [("g", 0), ("g", 1), ("g", 2)]
    assert [m.receive_count for m in again] == [2, 2, 2]


@pytest.mark.parametrize("leave", ["ack", "nack"])
async def test_a_group_is_free_once_what_is_left_under_its_lease_is_visible(
    queues: QueueService, messages: MessageService, leave: str
) -> None:
    """A message shortened to 0 s while others of its group are in flight is visible, but the
    group waits for those; once they leave (acked or nacked), the group's expiry is the latest
    visibility left under its lease, not the one of the messages that left. Before the fix the
    group stayed held until the receive's visibility timeout: up to 12 hours for one message a
    worker had asked, at once, to see again."""
    q = await make_queue(queues, fifo=True, visibility_timeout=30)
    await messages.send(q, fifo_entries("g", 3), now=at(0))
    got = await messages.receive(q, max_messages=10, now=at(1))
    assert bodies(got) == [("g", 0), ("g", 1), ("g", 2)]
    again = [ReceiptEntry(id="again", receipt_handle=got[0].receipt_handle, visibility_timeout=0)]
    assert await messages.change_visibility(q, again, now=at(2)) == {"again": None}
    assert await messages.receive(q, max_messages=10, now=at(3)) == []  # g 1 and 2 in flight
    rest = acks(got[1:])
    outcome = await (messages.ack(q, rest, now=at(4)) if leave == "ack" else messages.nack(q, rest, now=at(4)))
    assert outcome == {"0": None, "1": None}
    redelivered = await messages.receive(q, max_messages=10, now=at(5))
    expected = [("g", 0)] if leave == "ack" else [("g", 0), ("g", 1), ("g", 2)]
    assert bodies(redelivered) == expected
    assert redelivered[0].receive_count == 2


async def test_an_ack_that_leaves_the_expiry_as_it_was_writes_no_group_row(
    queues: QueueService, messages: MessageService, db: Database
) -> None:
    """Acking some of a receive's messages, all under one timeout, leaves the group held until
    that timeout, and its row unwritten (a worker acking one message at a time would otherwise
    rewrite its group's row at every ack but the last)."""
    q = await make_queue(queues, fifo=True, visibility_timeout=30)
    await messages.send(q, fifo_entries("g", 3), now=at(0))
    got = await messages.receive(q, max_messages=10, now=at(1))

    async def group_row() -> tuple[object, ...]:
        async with db.transaction() as conn:
            cursor = await conn.execute("SELECT xmin::text AS version, available_at FROM message_groups")
            row = await cursor.fetchone()
        assert row is not None
        return row["version"], row["available_at"]

    before = await group_row()
    assert await messages.ack(q, acks(got[:1]), now=at(2)) == {"0": None}
    assert await group_row() == before
    assert await messages.receive(q, max_messages=10, now=at(30)) == []  # g 1 and 2 still held
    assert bodies(await messages.receive(q, max_messages=10, now=at(32))) == [("g", 1), ("g", 2)]


async def test_nack_with_delay_keeps_the_group_waiting_and_records_the_error(
    queues: QueueService, messages: MessageService, db: Database
) -> None:
    q = await make_queue(queues, fifo=True)
    await messages.send(q, fifo_entries("g", 2), now=at(0))
    [first] = await messages.receive(q, max_messages=1, now=at(1))
    entry = ReceiptEntry(id="x", receipt_handle=first.receipt_handle, delay_seconds=10, error={"why": "flaky"})
    assert await messages.nack(q, [entry], now=at(2)) == {"x": None}
    assert await messages.receive(q, max_messages=10, now=at(5)) == []
    [retry] = await messages.receive(q, max_messages=1, now=at(13))
    assert (retry.message_id, retry.receive_count) == (first.message_id, 2)
    await messages.ack(q, [ReceiptEntry(id="a", receipt_handle=retry.receipt_handle, result={"done": 1})], now=at(14))
    async with db.transaction() as conn:
        row = await (await conn.execute("SELECT outcome, result, error, receive_count FROM message_history")).fetchone()
    assert row == {"outcome": "acked", "result": {"done": 1}, "error": {"why": "flaky"}, "receive_count": 2}


async def test_groups_are_served_round_robin(queues: QueueService, messages: MessageService) -> None:
    """One group with a big backlog never starves the others: every small group is fully
    served before the big group is 10% drained (issue shape, scaled down)."""
    q = await make_queue(queues, fifo=True)
    await messages.send(q, fifo_entries("big", 1000), now=at(0))
    small = [f"s{i:02d}" for i in range(50)]
    for group in small:
        await messages.send(q, fifo_entries(group, 10), now=at(1))
    served: list[str] = []
    for step in range(500):
        got = await messages.receive(q, max_messages=10, now=at(2 + step))
        assert got, "the queue ran dry before the small groups were served"
        served.extend(m.body["group"] for m in got)
        await messages.ack(q, acks(got), now=at(2 + step))
        if all(served.count(g) == 10 for g in small):
            break
    assert all(served.count(g) == 10 for g in small)
    assert served.count("big") <= 100, f"big group drained {served.count('big')} of 1000 first"


async def test_queue_delay_applies_to_fifo_groups(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, fifo=True, delay_seconds=10)
    await messages.send(q, fifo_entries("g", 1), now=at(0))
    assert await messages.receive(q, now=at(9)) == []
    assert len(await messages.receive(q, now=at(10))) == 1


async def test_receive_attempt_returns_the_same_messages(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, fifo=True)
    await messages.send(q, fifo_entries("g", 3), now=at(0))
    first = await messages.receive(q, max_messages=2, attempt_id="try-1", now=at(1))
    again = await messages.receive(q, max_messages=2, attempt_id="try-1", now=at(2))
    assert [m.receipt_handle for m in again] == [m.receipt_handle for m in first]
    other = await messages.receive(q, max_messages=2, attempt_id="try-2", now=at(3))
    assert other == []  # the group is still in flight under try-1


async def test_a_retried_attempt_resets_the_visibility_timeout(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, fifo=True, visibility_timeout=30)
    await messages.send(q, fifo_entries("g", 2), now=at(0))
    first = await messages.receive(q, max_messages=10, attempt_id="try-1", now=at(1))
    again = await messages.receive(q, max_messages=10, attempt_id="try-1", now=at(20))
    assert [m.receipt_handle for m in again] == [m.receipt_handle for m in first] and len(first) == 2
    # Hidden until 50 (20 + 30), not 31: neither the messages nor their group are due before.
    assert await messages.receive(q, max_messages=10, now=at(40)) == []
    later = await messages.receive(q, max_messages=10, now=at(51))
    assert [(m.message_id, m.receive_count) for m in later] == [(m.message_id, 2) for m in first]


@pytest.mark.parametrize("scope, expect_duplicate", [("queue", True), ("group", False)])
async def test_deduplication_scope(
    queues: QueueService, messages: MessageService, scope: str, expect_duplicate: bool
) -> None:
    q = await make_queue(queues, fifo=True, deduplication_scope=scope)
    from app.domain import SendEntry

    [a] = await messages.send(q, [SendEntry(body=1, group_id="g1", dedup_id="same")], now=at(0))
    [b] = await messages.send(q, [SendEntry(body=2, group_id="g2", dedup_id="same")], now=at(1))
    assert b.duplicate is expect_duplicate
    assert (a.message_id == b.message_id) is expect_duplicate
