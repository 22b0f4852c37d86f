"""A receive for a Recipient (app/service/recipient.py) whose client leaves: nothing is leased once
it has left, and what it was handed goes back at once without counting as a receive
(MessageService.give_back)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import psycopg
from fastapi import FastAPI

from app.db.engine import Database
from app.domain import DeadLetter, SendEntry
from app.service.messages import MessageService, ReceiptEntry
from app.service.queues import QueueService
from app.service.recipient import Recipient
from tests.factories import fifo_entries, make_queue
from tests.faults.load import waiting_on_locks

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def test_a_recipient_that_has_left_is_leased_nothing(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues)
    await messages.send(q, [SendEntry(body="job")], now=at(0))
    gone = Recipient()
    gone.leave()
    assert await messages.receive(q, now=at(1), recipient=gone) == []
    # Nor for an attempt (whose leases would stay, for the attempt's retry).
    assert await messages.receive(q, attempt_id="a1", now=at(1), recipient=gone) == []
    [m] = await messages.receive(q, now=at(2))
    assert m.receive_count == 1


async def test_long_polls_end_when_their_recipients_leave(app: FastAPI) -> None:
    messages: MessageService = app.state.messages
    q = await make_queue(app.state.queues)
    recipients = [Recipient() for _ in range(20)]
    parked = [
        asyncio.create_task(messages.receive(q, wait_seconds=20, visibility_timeout=600, recipient=r))
        for r in recipients
    ]
    await asyncio.sleep(0.3)
    assert not any(task.done() for task in parked)
    for recipient in recipients:
        recipient.leave()
    # At once, not after their 20 s.
    assert await asyncio.wait_for(asyncio.gather(*parked), 5) == [[]] * 20

    await messages.send(q, [SendEntry(body="job")])
    [m] = await messages.receive(q, wait_seconds=5)
    assert m.receive_count == 1


async def test_a_give_back_does_not_count_as_a_receive(
    queues: QueueService, messages: MessageService, db: Database
) -> None:
    dlq = await make_queue(queues)
    q = await make_queue(queues, visibility_timeout=600, dead_letter=DeadLetter(dlq, 1))
    await messages.send(q, [SendEntry(body="job")], now=at(0))
    recipient = Recipient()
    [handed] = await messages.receive(q, now=at(1), recipient=recipient)
    assert await messages.give_back(recipient, now=at(2)) == 1
    assert await messages.give_back(recipient, now=at(2)) == 0  # handed back once only

    # Due at once, not after the visibility timeout; and with max_receive_count 1 a counted
    # receive would send it to the dead-letter queue now.
    [again] = await messages.receive(q, now=at(3))
    assert (again.message_id, again.receive_count, again.first_received_at) == (handed.message_id, 1, at(3))
    assert again.receipt_handle != handed.receipt_handle
    assert await messages.receive(dlq, now=at(3)) == []
    async with db.transaction() as conn:
        cur = await conn.execute("SELECT count(*) AS n, max(last_error::text) AS e FROM messages")
        assert await cur.fetchone() == {"n": 1, "e": None}  # no error recorded
        cur = await conn.execute("SELECT count(*) AS n FROM message_history")
        assert await cur.fetchone() == {"n": 0}


async def test_a_fifo_group_goes_back_whole_and_in_order(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, fifo=True, visibility_timeout=600)
    await messages.send(q, fifo_entries("g", 3), now=at(0))
    await messages.send(q, fifo_entries("h", 1), now=at(1))
    recipient = Recipient()
    handed = await messages.receive(q, max_messages=2, now=at(2), recipient=recipient)
    assert [m.body["n"] for m in handed] == [0, 1] and {m.group_id for m in handed} == {"g"}
    # The group is held: another receive is served from h only.
    assert [m.group_id for m in await messages.receive(q, max_messages=10, now=at(3))] == ["h"]

    assert await messages.give_back(recipient, now=at(4)) == 2
    got = await messages.receive(q, max_messages=10, now=at(5))
    assert [(m.body["n"], m.receive_count) for m in got] == [(0, 1), (1, 1), (2, 1)]


async def test_only_current_receipts_go_back(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, visibility_timeout=10)
    await messages.send(q, [SendEntry(body="acked"), SendEntry(body="taken again")], now=at(0))
    recipient = Recipient()
    handed = await messages.receive(q, max_messages=2, now=at(1), recipient=recipient)
    acked = next(m for m in handed if m.body == "acked")
    await messages.ack(q, [ReceiptEntry(id="a", receipt_handle=acked.receipt_handle)], now=at(2))
    [taken] = await messages.receive(q, now=at(12))  # its visibility timeout ran out
    assert taken.body == "taken again"

    assert await messages.give_back(recipient, now=at(13)) == 0
    outcome = await messages.ack(q, [ReceiptEntry(id="t", receipt_handle=taken.receipt_handle)], now=at(14))
    assert outcome == {"t": None}


async def test_what_an_attempt_received_stays_for_its_retry(queues: QueueService, messages: MessageService) -> None:
    q = await make_queue(queues, fifo=True, visibility_timeout=600)
    await messages.send(q, fifo_entries("g", 2), now=at(0))
    recipient = Recipient()
    first = await messages.receive(q, max_messages=10, attempt_id="a1", now=at(1), recipient=recipient)
    assert await messages.give_back(recipient, now=at(2)) == 0
    retry = await messages.receive(q, max_messages=10, attempt_id="a1", now=at(3))
    assert [m.receipt_handle for m in retry] == [m.receipt_handle for m in first] and len(first) == 2


async def test_a_recipient_that_leaves_during_its_poll_is_left_nothing(
    queues: QueueService, messages: MessageService, db_url: str
) -> None:
    q = await make_queue(queues, fifo=True, visibility_timeout=600)
    [sent] = await messages.send(q, fifo_entries("g", 1))
    recipient = Recipient()
    # The receive (a statement shared by concurrent FIFO receives) leases the group, then waits
    # for this lock to put the message in flight.
    async with await psycopg.AsyncConnection.connect(db_url) as lock:
        await lock.execute("SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (sent.sequence_number,))
        receiving = asyncio.create_task(messages.receive(q, recipient=recipient))
        await waiting_on_locks(db_url, 1)
        recipient.leave()
        await lock.rollback()
        assert await asyncio.wait_for(receiving, 10) == []

    [m] = await messages.receive(q)
    assert (m.sequence_number, m.receive_count) == (sent.sequence_number, 1)
