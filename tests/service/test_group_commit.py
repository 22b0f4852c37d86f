"""Concurrent sends and acks of one queue are committed together, and each caller gets its own
results (the answer comes after the shared commit)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.db.engine import Database
from app.domain import SendEntry, SendResult
from app.service.messages import MessageService, ReceiptEntry
from app.service.queues import QueueService
from tests.factories import fifo_entries, make_queue

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def flushes(messages: MessageService, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many flushes each of the service's coalescers ran (sends, acks, receives,
    fifo_receives): their flush functions are wrapped to count the calls."""
    counts: Counter[str] = Counter()

    def counting(name: str, flush: Callable[[Any, list[Any]], Awaitable[list[Any]]]) -> Callable[..., Any]:
        async def counted(key: Any, items: list[Any]) -> list[Any]:
            counts[name] += 1
            return await flush(key, items)

        return counted

    for name in ("sends", "acks", "receives", "fifo_receives"):
        coalescer = getattr(messages, name)
        monkeypatch.setattr(coalescer, "_flush", counting(name, coalescer._flush))
    return counts


async def test_concurrent_sends_and_acks_share_commits(
    queues: QueueService, messages: MessageService, flushes: Counter[str]
) -> None:
    q = await make_queue(queues)
    sent = await asyncio.gather(*(messages.send(q, [SendEntry(body=n)]) for n in range(40)))
    assert all(isinstance(r, SendResult) and not r.duplicate for [r] in sent)
    assert len({r.sequence_number for [r] in sent if isinstance(r, SendResult)}) == 40
    assert flushes["sends"] < 40, "no send was coalesced"

    got = await messages.receive(q, max_messages=100)
    assert sorted(m.body for m in got) == list(range(40))
    by_body = {m.body: m for m in got}
    outcomes = await asyncio.gather(
        *(messages.ack(q, [ReceiptEntry(id=str(n), receipt_handle=by_body[n].receipt_handle)]) for n in range(40))
    )
    assert outcomes == [{str(n): None} for n in range(40)]
    assert flushes["acks"] < 40, "no ack was coalesced"
    assert await messages.receive(q, max_messages=100) == []


async def test_a_bad_entry_fails_only_its_own_caller(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, fifo=True)
    good = messages.send(q, [SendEntry(body=1, group_id="g", dedup_id="a")])
    bad = messages.send(q, [SendEntry(body=2)])  # no group id
    [ok], [failed] = await asyncio.gather(good, bad)
    assert isinstance(ok, SendResult)
    assert not isinstance(failed, SendResult) and failed.code == "invalid_message"


async def test_concurrent_standard_receives_share_a_statement(
    queues: QueueService, messages: MessageService, flushes: Counter[str]
) -> None:
    q = await make_queue(queues)
    await messages.send(q, [SendEntry(body=n) for n in range(50)])
    # 30 receivers ask for 3 each (90) while 50 are due: every message goes to exactly one of
    # them, nobody gets more than asked, and the statements were shared.
    got = await asyncio.gather(*(messages.receive(q, max_messages=3) for _ in range(30)))
    assert all(len(batch) <= 3 for batch in got)
    bodies = [m.body for batch in got for m in batch]
    assert sorted(bodies) == list(range(50))
    assert flushes["receives"] < 30, "no receive was coalesced"
    assert await messages.receive(q, max_messages=10) == []


async def test_concurrent_fifo_receives_share_a_statement_and_no_group_goes_to_two(
    queues: QueueService, messages: MessageService, flushes: Counter[str]
) -> None:
    q = await make_queue(queues, fifo=True)
    await messages.send(q, [SendEntry(body=n, group_id=f"g{n % 5}", dedup_id=str(n)) for n in range(20)])
    got = await asyncio.gather(*(messages.receive(q, max_messages=3) for _ in range(8)))
    assert flushes["receives"] == 0  # the standard queues' coalescer is not involved
    assert flushes["fifo_receives"] < 8, "no FIFO receive was coalesced"
    assert all(len(batch) <= 3 for batch in got)
    # 5 groups are servable: each receiver got at most one group's head (3 of its 4 messages),
    # each group went to one receiver only, and the rest wait behind the groups' leases.
    assert sum(1 for batch in got if batch) == 5
    assert sorted(m.body for batch in got for m in batch) == sorted(n for n in range(20) if n < 15)
    owners: dict[str, int] = {}
    for who, batch in enumerate(got):
        for m in batch:
            assert owners.setdefault(m.group_id or "", who) == who
        for group in {m.group_id for m in batch}:
            numbers = [m.body for m in batch if m.group_id == group]
            assert numbers == sorted(numbers)


@pytest.mark.parametrize("fifo", [True, False], ids=["fifo", "standard"])
async def test_a_stale_receipt_acked_in_the_commit_of_the_current_one_is_refused(
    queues: QueueService, messages: MessageService, db: Database, fifo: bool, flushes: Counter[str]
) -> None:
    # What a PostgreSQL restart under load produced (tests/faults/test_postgres_restart.py): a
    # consumer's ack retried through the outage while the message's visibility timeout ran out;
    # once the database was back, another consumer received it again and acked it, and both acks
    # went into one flush. Only the current receipt acks the message; the stale one was answered
    # as acked too, because the flush matched its answer by sequence number alone.
    q = await make_queue(queues, fifo=fifo, visibility_timeout=30)
    await messages.send(q, fifo_entries("g", 1) if fifo else [SendEntry(body={"n": 0})], now=at(0))
    [old] = await messages.receive(q, now=at(1))
    [new] = await messages.receive(q, now=at(32))  # the timeout ran out: received again
    assert (new.sequence_number, new.receive_count) == (old.sequence_number, 2)

    before = flushes["acks"]
    stale, current = await asyncio.gather(
        messages.ack(q, [ReceiptEntry(id="stale", receipt_handle=old.receipt_handle, result="late")], now=at(33)),
        messages.ack(q, [ReceiptEntry(id="current", receipt_handle=new.receipt_handle, result="done")], now=at(33)),
    )
    assert flushes["acks"] == before + 1, "the two acks did not share a flush"
    assert current == {"current": None}
    assert stale["stale"] is not None and stale["stale"].code == "receipt_not_found"
    async with db.connection() as conn:
        cur = await conn.execute("SELECT sequence_number, receive_count, result FROM message_history")
        assert await cur.fetchall() == [{"sequence_number": new.sequence_number, "receive_count": 2, "result": "done"}]
