"""Visibility, dedup window, delays, dead letters, redrive, retention, purge and delete."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.db.engine import Database
from app.domain import DeadLetter, SendEntry, SendResult
from app.errors import NotADeadLetterQueue, QueueInUse, QueueNotFound
from app.service.maintenance import Maintenance
from app.service.messages import MessageService, ReceiptEntry
from app.service.queues import QueueService
from tests.factories import fifo_entries, make_queue

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def history(db: Database) -> list[dict[str, Any]]:
    async with db.transaction() as conn:
        cur = await conn.execute("SELECT * FROM message_history ORDER BY id")
        return list(await cur.fetchall())


async def test_message_reappears_after_visibility_timeout(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, visibility_timeout=30)
    await messages.send(q, [SendEntry(body="job")], now=at(0))
    [first] = await messages.receive(q, now=at(1))
    assert first.receive_count == 1
    assert await messages.receive(q, now=at(30)) == []
    [second] = await messages.receive(q, now=at(31))
    assert (second.message_id, second.receive_count) == (first.message_id, 2)
    assert second.receipt_handle != first.receipt_handle
    assert second.first_received_at == first.first_received_at
    old = await messages.ack(q, [ReceiptEntry(id="old", receipt_handle=first.receipt_handle)], now=at(32))
    assert old["old"] is not None and old["old"].code == "receipt_not_found"
    assert await messages.ack(q, [ReceiptEntry(id="new", receipt_handle=second.receipt_handle)], now=at(32)) == {
        "new": None
    }
    again = await messages.ack(q, [ReceiptEntry(id="again", receipt_handle=second.receipt_handle)], now=at(33))
    assert again["again"] is not None


async def test_visibility_can_be_extended_and_shortened(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, visibility_timeout=30)
    await messages.send(q, [SendEntry(body="job")], now=at(0))
    [m] = await messages.receive(q, now=at(0))
    extend = ReceiptEntry(id="e", receipt_handle=m.receipt_handle, visibility_timeout=100)
    assert await messages.change_visibility(q, [extend], now=at(20)) == {"e": None}
    assert await messages.receive(q, now=at(60)) == []
    assert len(await messages.receive(q, now=at(121))) == 1


async def test_dedup_window(queues: QueueService, messages: MessageService, db: Database) -> None:
    q = await make_queue(queues)
    [first] = await messages.send(q, [SendEntry(body=1, dedup_id="d")], now=at(0))
    [m] = await messages.receive(q, now=at(1))
    await messages.ack(q, [ReceiptEntry(id="a", receipt_handle=m.receipt_handle)], now=at(2))
    # Still a duplicate after the first copy was deleted, inside the 5-minute window.
    [dup] = await messages.send(q, [SendEntry(body=2, dedup_id="d")], now=at(299))
    assert isinstance(first, SendResult) and isinstance(dup, SendResult)
    assert (dup.duplicate, dup.message_id, dup.sequence_number) == (
        True,
        first.message_id,
        first.sequence_number,
    )
    assert await messages.receive(q, now=at(299)) == []
    [later] = await messages.send(q, [SendEntry(body=3, dedup_id="d")], now=at(301))
    assert isinstance(later, SendResult) and not later.duplicate and later.message_id != first.message_id
    # The maintenance loop forgets ids whose window ended.
    report = await Maintenance(db).run_once(now=at(1000))
    assert report.dedup_pruned == 1


async def test_duplicates_within_one_batch(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, fifo=True, content_based_deduplication=True)
    results = await messages.send(
        q, [SendEntry(body={"x": 1}, group_id="g"), SendEntry(body={"x": 1}, group_id="g")], now=at(0)
    )
    assert [r.duplicate for r in results] == [False, True]
    assert len(await messages.receive(q, max_messages=10, now=at(1))) == 1


async def test_delays(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues)
    await messages.send(q, [SendEntry(body="later", delay_seconds=60), SendEntry(body="now")], now=at(0))
    got = await messages.receive(q, max_messages=10, now=at(1))
    assert [m.body for m in got] == ["now"]
    await messages.ack(q, [ReceiptEntry(id="a", receipt_handle=got[0].receipt_handle)], now=at(2))
    assert await messages.receive(q, max_messages=10, now=at(59)) == []
    got = await messages.receive(q, max_messages=10, now=at(60))
    assert [m.body for m in got] == ["later"]


@pytest.mark.parametrize("fifo", [False, True])
async def test_dead_letter_and_redrive(
    queues: QueueService, messages: MessageService, db: Database, fifo: bool
) -> None:
    dlq = await make_queue(queues, fifo=fifo)
    source = await make_queue(queues, fifo=fifo, visibility_timeout=10, dead_letter=DeadLetter(dlq, 2))
    entries = fifo_entries("g", 3) if fifo else [SendEntry(body={"group": "g", "n": n}) for n in range(3)]
    sent = await messages.send(source, entries, now=at(0))
    ids = [s.message_id for s in sent]
    assert len(await messages.receive(source, max_messages=10, now=at(0))) == 3
    assert len(await messages.receive(source, max_messages=10, now=at(11))) == 3
    # A third receive would exceed max_receive_count: the messages move, atomically, instead.
    assert await messages.receive(source, max_messages=10, now=at(22)) == []
    outcomes = [(h["outcome"], h["receive_count"]) for h in await history(db)]
    assert outcomes == [("dead_lettered", 2)] * 3
    in_dlq = await messages.receive(dlq, max_messages=10, visibility_timeout=0, now=at(23))
    assert [str(m.message_id) for m in in_dlq] == ids
    assert await queues.redrive(dlq, now=at(30)) == 3
    back = await messages.receive(source, max_messages=10, now=at(31))
    assert [str(m.message_id) for m in back] == ids
    assert [m.body["n"] for m in back] == [0, 1, 2]
    assert [m.receive_count for m in back] == [1, 1, 1]
    with pytest.raises(NotADeadLetterQueue):
        await queues.redrive(source)


async def test_a_fifo_group_larger_than_a_batch_goes_back_over_several_transactions(
    queues: QueueService, messages: MessageService, db: Database
) -> None:
    # A redrive batch is bounded by messages, not by groups: a group of 7 with batches of 3 goes
    # back in three transactions, in order, behind nothing else. Rows one transaction inserted
    # share their xmin, so the source's rows show how the move was split.
    dlq = await make_queue(queues, fifo=True)
    source = await make_queue(queues, fifo=True, visibility_timeout=10, dead_letter=DeadLetter(dlq, 1))
    await messages.send(source, fifo_entries("big", 7) + fifo_entries("small", 2), now=at(0))
    for _ in range(10):  # bounded: a receive takes at least one group's messages
        if not await messages.receive(source, max_messages=10, now=at(0)):
            break
    assert await messages.receive(source, max_messages=10, now=at(11)) == []  # all dead-lettered
    assert await queues.redrive(dlq, now=at(12), batch=3) == 9
    async with db.transaction() as conn:
        cur = await conn.execute(
            "SELECT xmin::text AS tx, count(*) AS n FROM messages WHERE queue_id = "
            "(SELECT id FROM queues WHERE name = %s) GROUP BY 1",
            (source,),
        )
        batches = sorted(r["n"] for r in await cur.fetchall())
    assert batches == [3, 3, 3], batches
    back: list[tuple[str, int]] = []
    for _ in range(10):
        got = await messages.receive(source, max_messages=10, now=at(13))
        if not got:
            break
        back += [(m.body["group"], m.body["n"]) for m in got]
        receipts = [ReceiptEntry(id=str(i), receipt_handle=m.receipt_handle) for i, m in enumerate(got)]
        await messages.ack(source, receipts)
    assert [n for g, n in back if g == "big"] == list(range(7))
    assert [n for g, n in back if g == "small"] == [0, 1]


async def test_retention_expires_into_history(queues: QueueService, messages: MessageService, db: Database) -> None:
    fifo = await make_queue(queues, fifo=True, retention_seconds=60)
    standard = await make_queue(queues, retention_seconds=60)
    await messages.send(fifo, fifo_entries("g", 2), now=at(0))
    await messages.send(standard, [SendEntry(body=1)], now=at(0))
    await messages.receive(fifo, now=at(1))
    report = await Maintenance(db).run_once(now=at(30))
    assert report.expired == 0
    report = await Maintenance(db).run_once(now=at(61))
    assert report.expired == 3
    assert sorted(h["outcome"] for h in await history(db)) == ["expired"] * 3
    # The group was released and emptied: new messages flow again.
    await messages.send(fifo, fifo_entries("g", 1, start=5), now=at(62))
    assert [m.body["n"] for m in await messages.receive(fifo, now=at(63))] == [5]


async def test_purge_and_delete_record_history(queues: QueueService, messages: MessageService, db: Database) -> None:
    q = await make_queue(queues, fifo=True)
    await messages.send(q, fifo_entries("g", 3), now=at(0))
    await messages.receive(q, now=at(1))
    assert await queues.purge(q, now=at(2)) == 3
    assert await messages.receive(q, max_messages=10, now=at(3)) == []
    await messages.send(q, fifo_entries("g", 2, start=10), now=at(4))
    await queues.delete(q, now=at(5))
    assert [h["outcome"] for h in await history(db)] == ["purged"] * 5
    with pytest.raises(QueueNotFound):
        await queues.get(q)


async def test_a_queue_used_as_dead_letter_queue_cannot_be_deleted(queues: QueueService) -> None:
    dlq = await make_queue(queues)
    await make_queue(queues, dead_letter=DeadLetter(dlq, 3))
    with pytest.raises(QueueInUse):
        await queues.delete(dlq)


async def test_any_json_body_and_attributes_come_back_as_sent(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues)
    bodies: list[Any] = [
        None,
        0,
        -1.5,
        True,
        "",
        'quote " backslash \\ newline \n tab \t',
        "ünïcødé ✓ 𝄞",
        [],
        {},
        [None, {"a": [1, {"b": None}]}],
        {"z": 1, "a": {"nested": "x"}},
    ]
    entries = [SendEntry(body=b, attributes={"i": str(i), "mark": "✓ ü"}) for i, b in enumerate(bodies)]
    results = await messages.send(q, entries, now=at(0))
    assert all(isinstance(r, SendResult) for r in results), results
    got = await messages.receive(q, max_messages=20, now=at(1))
    assert [(m.body, m.attributes) for m in got] == [(e.body, e.attributes) for e in entries]


async def test_release_returns_what_a_consumer_holds_at_once(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, visibility_timeout=300)
    await messages.send(q, [SendEntry(body=n) for n in range(6)], now=at(0))
    mine = await messages.receive(q, max_messages=3, consumer_id="w1", now=at(1))
    theirs = await messages.receive(q, max_messages=2, consumer_id="w2", now=at(1))
    anonymous = await messages.receive(q, max_messages=1, now=at(1))
    assert (len(mine), len(theirs), len(anonymous)) == (3, 2, 1)
    # w1 acks one of its three, then goes away: the other two come back now, not in 300 s.
    await messages.ack(q, [ReceiptEntry(id="a", receipt_handle=mine[0].receipt_handle)], now=at(2))
    assert await messages.release(q, "w1", now=at(3)) == 2
    again = await messages.receive(q, max_messages=10, now=at(3))
    assert sorted(m.body for m in again) == sorted(m.body for m in mine[1:])
    assert all(m.receive_count == 2 for m in again)
    # Nothing else moved; a second release (or an unknown consumer) returns nothing.
    assert await messages.release(q, "w1", now=at(4)) == 0
    assert await messages.release(q, "nobody", now=at(4)) == 0
    # A message w2 held but that was received again by someone else after its timeout is not w2's.
    assert await messages.receive(q, max_messages=10, now=at(400)) != []
    assert await messages.release(q, "w2", now=at(401)) == 0


async def test_release_frees_fifo_groups(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, fifo=True, visibility_timeout=300)
    await messages.send(q, fifo_entries("g", 3), now=at(0))
    [first] = await messages.receive(q, max_messages=1, consumer_id="w1", now=at(1))
    assert await messages.receive(q, max_messages=10, now=at(2)) == []  # the group is held
    assert await messages.release(q, "w1", now=at(3)) == 1
    got = await messages.receive(q, max_messages=10, now=at(3))
    assert [m.sequence_number for m in got][:1] == [first.sequence_number]  # order kept


async def test_maintenance_forgets_consumer_rows_of_finished_leases(
    db: Database, queues: QueueService, messages: MessageService
) -> None:
    q = await make_queue(queues, visibility_timeout=300)
    await messages.send(q, [SendEntry(body=n) for n in range(3)], now=at(0))
    got = await messages.receive(q, max_messages=3, consumer_id="w1", now=at(1))
    await messages.ack(q, [ReceiptEntry(id="a", receipt_handle=got[0].receipt_handle)], now=at(2))
    report = await Maintenance(db).run_once(now=at(3))
    assert report.consumers_pruned == 1  # the acked one; the two still held stay
    assert await messages.release(q, "w1", now=at(4)) == 2
    report = await Maintenance(db).run_once(now=at(5))
    assert report.consumers_pruned == 2
