"""Wake-ups published after the commit reach other processes: a send through one service
(its own listener and publisher) wakes a receive waiting in another."""

from __future__ import annotations

import asyncio

import pytest

from app.db.engine import Database
from app.domain import SendEntry
from app.service.messages import MessageService
from app.service.queues import QueueService
from app.service.wakeup import Wakeup
from tests.factories import make_queue


async def test_a_send_in_one_service_wakes_a_receive_waiting_in_another(db: Database, db_url: str) -> None:
    queue = await make_queue(QueueService(db))
    waiting_side, sending_side = Wakeup(db_url), Wakeup(db_url)
    await waiting_side.start()
    await sending_side.start()
    try:
        receiver, sender = MessageService(db, waiting_side), MessageService(db, sending_side)
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiter = asyncio.create_task(receiver.receive(queue, wait_seconds=10))
        for _ in range(200):  # until the receive is parked on its event
            if waiting_side._waiters:
                break
            await asyncio.sleep(0.01)
        assert waiting_side._waiters, "the receive never started waiting"
        await sender.send(queue, [SendEntry(body="hello")])
        got = await asyncio.wait_for(waiter, timeout=5)
        assert [m.body for m in got] == ["hello"]
        # Woken by the NOTIFY, not by the 10 s deadline (a correctness bound, not a speed test).
        assert loop.time() - started < 5
    finally:
        await sending_side.stop()
        await waiting_side.stop()


async def test_many_publishes_are_coalesced_and_all_delivered(db: Database, db_url: str) -> None:
    queues = [await make_queue(QueueService(db)) for _ in range(3)]
    listener, publisher = Wakeup(db_url), Wakeup(db_url)
    await listener.start()
    await publisher.start()
    try:
        queue_ids = [(await QueueService(db).get(q))[0].id for q in queues]
        events = {}
        with (
            listener.subscribe(queue_ids[0]) as e0,
            listener.subscribe(queue_ids[1]) as e1,
            listener.subscribe(queue_ids[2]) as e2,
        ):
            events = {queue_ids[0]: e0, queue_ids[1]: e1, queue_ids[2]: e2}
            for _ in range(50):
                for queue_id in queue_ids:
                    publisher.publish(queue_id)
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events.values())), timeout=5)
        assert all(e.is_set() for e in events.values())
    finally:
        await publisher.stop()
        await listener.stop()


async def test_a_process_is_not_woken_twice_by_its_own_publish(db: Database, db_url: str) -> None:
    """publish() wakes the process's own waiters at once; the NOTIFY it sends for the other
    processes comes back to its listener too, which skips it (it would only make every waiter
    of the queue poll again). A NOTIFY from another process still wakes it."""
    queues = [await make_queue(QueueService(db)) for _ in range(2)]
    own, other = Wakeup(db_url), Wakeup(db_url)
    await own.start()
    await other.start()
    try:
        mine, theirs = [(await QueueService(db).get(q))[0].id for q in queues]
        with own.subscribe(mine) as woken_by_me, own.subscribe(theirs) as woken_by_them:
            own.publish(mine)
            assert woken_by_me.is_set()  # at once, before any NOTIFY
            woken_by_me.clear()
            assert own._publisher is not None
            await asyncio.wait_for(own._publisher, timeout=5)  # own NOTIFY committed
            other.publish(theirs)
            # NOTIFYs arrive in commit order: once the later one is here, the earlier was handled.
            await asyncio.wait_for(woken_by_them.wait(), timeout=5)
            assert not woken_by_me.is_set()
    finally:
        await other.stop()
        await own.stop()


def notify_rounds(wakeup: Wakeup, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The queue ids of each round of NOTIFYs the wakeup sends from now on (a round that
    failed is not counted): its NOTIFY statement is wrapped to record them."""
    rounds: list[list[int]] = []
    notify = wakeup._notify

    async def recorded(queue_ids: list[int]) -> None:
        await notify(queue_ids)
        rounds.append(queue_ids)

    monkeypatch.setattr(wakeup, "_notify", recorded)
    return rounds


async def test_notify_rounds_are_spaced_and_carry_what_was_published_meanwhile(
    db: Database, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone publish goes out at once; what is published while a round rests goes out together,
    in one more round, no sooner than the interval after the first."""
    queues = [await make_queue(QueueService(db)) for _ in range(2)]
    listener, publisher = Wakeup(db_url), Wakeup(db_url, notify_interval=0.3)
    rounds = notify_rounds(publisher, monkeypatch)
    await listener.start()
    await publisher.start()
    loop = asyncio.get_running_loop()
    try:
        first_id, second_id = [(await QueueService(db).get(q))[0].id for q in queues]
        with listener.subscribe(first_id) as first, listener.subscribe(second_id) as second:
            publisher.publish(first_id)
            await asyncio.wait_for(first.wait(), timeout=5)
            first_at = loop.time()
            first.clear()
            for _ in range(20):
                publisher.publish(second_id)
                publisher.publish(first_id)
            await asyncio.wait_for(asyncio.gather(first.wait(), second.wait()), timeout=5)
            second_at = loop.time()
            assert publisher._publisher is not None
            await asyncio.wait_for(publisher._publisher, timeout=5)
        assert len(rounds) == 2
        assert second_at - first_at >= 0.2  # the second round waited out the interval
    finally:
        await publisher.stop()
        await listener.stop()
