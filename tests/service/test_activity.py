"""A queue's minutes and groups at the service layer, with the clock injected: counts fall in
their minute and every process's add up; a flush that fails keeps its counts; maintenance forgets
minutes older than a day; group ages are read against the given clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.db import activity as adb
from app.db.engine import Database
from app.errors import NotAFifoQueue, Unavailable
from app.service.activity import ActivityService
from app.service.maintenance import Maintenance
from app.service.messages import MessageService
from app.service.queues import QueueService
from app.service.throughput import Throughput
from tests.factories import fifo_entries, make_queue

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def queue_id(queues: QueueService, name: str) -> int:
    queue, _ = await queues.get(name)
    return queue.id


async def test_counts_fall_in_their_minute_and_every_processes_add_up(db: Database, queues: QueueService) -> None:
    name = await make_queue(queues)
    qid = await queue_id(queues, name)
    one, two = Throughput(db), Throughput(db)  # two processes' counts
    one.sent(qid, 3, at(1))
    one.acked(qid, 1, at(59))
    two.sent(qid, 2, at(30))
    two.dead_lettered(qid, 1, at(30))
    one.sent(qid, 1, at(61))
    one.sent(qid, 0, at(61))  # nothing: no row
    assert await one.flush() == 2 and await two.flush() == 1
    reader = ActivityService(db, Throughput(db))
    rows = await reader.minutes(name, 3, now=at(90))
    assert [row.minute for row in rows] == [at(-60), at(0), at(60)]
    assert [(row.sent, row.acked, row.dead_lettered) for row in rows] == [(0, 0, 0), (5, 1, 1), (1, 0, 0)]
    assert all(row.visible is None for row in rows)

    # A reader adds what its own process has not flushed yet, and only that queue's.
    reader.throughput.sent(qid, 4, at(70))
    reader.throughput.sent(qid + 1000, 9, at(70))
    assert [row.sent for row in await reader.minutes(name, 3, now=at(90))] == [0, 5, 5]


async def test_a_flush_that_fails_keeps_its_counts_for_the_next(db_url: str, queues: QueueService) -> None:
    name = await make_queue(queues)
    qid = await queue_id(queues, name)
    closed = Database(db_url, min_size=1, max_size=1)
    await closed.open()
    await closed.close()
    now = at(0).timestamp()
    counts = Throughput(closed, clock=lambda: now)
    counts.sent(qid, 2, at(0))
    counts.sent(qid, 7, at(-2 * 86400))  # two days old: not kept past a failed flush
    with pytest.raises(Unavailable):  # the database cannot be reached
        await counts.flush()
    assert counts.unflushed(qid) == {at(0): [2, 0, 0]}

    counts.db = queues.db
    counts.acked(qid, 1, at(1))
    await counts.stop()  # its last flush
    assert counts.unflushed(qid) == {}
    rows = await ActivityService(queues.db, Throughput(queues.db)).minutes(name, 1, now=at(0))
    assert [(row.sent, row.acked) for row in rows] == [(2, 1)]


async def test_maintenance_forgets_minutes_older_than_a_day(db: Database, queues: QueueService) -> None:
    name = await make_queue(queues)
    qid = await queue_id(queues, name)
    counts = Throughput(db)
    for minute in range(3):
        counts.sent(qid, 1, at(minute * 60))
    await counts.flush()
    report = await Maintenance(db).run_once(now=at(86400 + 90))  # the first two are over a day old
    assert report.minutes_pruned == 2
    reader = ActivityService(db, Throughput(db))
    assert sum(row.sent for row in await reader.minutes(name, 1440, now=at(86400 + 90))) == 1


async def test_group_ages_are_read_against_the_clock_given(
    db: Database, queues: QueueService, messages: MessageService
) -> None:
    name = await make_queue(queues, fifo=True)
    qid = await queue_id(queues, name)
    await messages.send(name, fifo_entries("a", 2), now=at(0))
    await messages.send(name, fifo_entries("b", 3), now=at(5))
    [got] = await messages.receive(name, 1, wait_seconds=0, visibility_timeout=30, now=at(10))
    assert got.group_id == "a"
    activity = ActivityService(db, messages.throughput)
    await db.run(lambda conn: adb.group_census_take(conn, qid, 50, at(20)))

    groups = await activity.groups(name, now=at(100))
    assert (groups.counted_at, groups.group_count) == (at(20), 2)
    assert [(g.group_id, g.messages) for g in groups.largest] == [("b", 3), ("a", 2)]
    assert [g.group_id for g in groups.oldest] == ["a", "b"]
    heads = {g.group_id: g.head for g in groups.oldest}
    assert heads["a"] is not None and heads["a"].age_seconds == 100 and heads["a"].state == "in_flight"
    assert heads["b"] is not None and heads["b"].age_seconds == 95 and heads["b"].state == "ready"
    [lease] = groups.in_flight
    assert (lease.group_id, lease.messages, lease.leased_at, lease.lease_age_seconds) == ("a", 1, at(10), 90)
    assert lease.lease_expires_at == at(40)
    assert [g.group_id for g in (await activity.groups(name, limit=1, now=at(100))).largest] == ["b"]

    standard = await make_queue(queues)
    with pytest.raises(NotAFifoQueue):
        await activity.groups(standard)
