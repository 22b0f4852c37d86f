"""Message move tasks against the real database: a redrive advanced by the maintenance round at
its rate (time injected), up to the DLQ's last message at the start, cancelled, failed, kept."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from app.db import move_tasks as tdb
from app.db.engine import Database
from app.domain import DeadLetter, MoveTask, SendEntry
from app.errors import (
    InvalidInput,
    MoveQueueNotFound,
    MoveTaskInProgress,
    MoveTaskNotFound,
    MoveTaskNotRunning,
    NotADeadLetterQueue,
)
from app.service import move_tasks
from app.service.maintenance import Maintenance
from app.service.messages import MessageService
from app.service.move_tasks import MoveTasks
from app.service.queues import QueueService
from tests.factories import fifo_entries, make_queue

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def tasks(db: Database) -> MoveTasks:
    return MoveTasks(db)


async def dead_letter(messages: MessageService, source: str, entries: list[SendEntry], sent: float) -> None:
    """Send `entries` to `source` (max_receive_count 1, visibility 10) at `sent`, receive them
    once, and let the next receive move them to the dead-letter queue."""
    await messages.send(source, entries, now=at(sent))
    for _ in range(len(entries)):
        if not await messages.receive(source, max_messages=10, now=at(sent)):
            break
    for _ in range(len(entries) // 10 + 1):  # a receive moves at most 10
        assert await messages.receive(source, max_messages=10, now=at(sent + 11)) == []


async def drained(messages: MessageService, queue: str, now: float) -> list[int]:
    """Every body's `n` a queue hands out at `now`, in the order received."""
    found: list[int] = []
    for _ in range(100):
        got = await messages.receive(queue, max_messages=10, visibility_timeout=600, now=at(now))
        if not got:
            return found
        found += [m.body["n"] for m in got]
    raise AssertionError("the queue did not run dry")


async def pipe(queues: QueueService, fifo: bool = False) -> tuple[str, str]:
    dlq = await make_queue(queues, fifo=fifo)
    source = await make_queue(queues, fifo=fifo, visibility_timeout=10, dead_letter=DeadLetter(dlq, 1))
    return source, dlq


async def test_a_task_moves_at_its_rate_then_completes(
    queues: QueueService, messages: MessageService, tasks: MoveTasks
) -> None:
    source, dlq = await pipe(queues)
    await dead_letter(messages, source, [SendEntry(body={"n": n}) for n in range(25)], sent=0)
    task = await tasks.start(dlq, max_per_second=2, now=at(100))
    assert (task.status, task.to_move, task.moved, task.destination) == ("RUNNING", 25, 0, None)
    assert await tasks.advance(now=at(100)) == 0
    assert await tasks.advance(now=at(103)) == 6  # 2 a second, counted from the start
    assert await tasks.advance(now=at(103)) == 0
    assert await tasks.advance(now=at(110)) == 14
    [running] = await tasks.list(dlq)
    assert (running.status, running.moved) == ("RUNNING", 20)
    assert await tasks.advance(now=at(200)) == 5
    [done] = await tasks.list(dlq)
    assert (done.status, done.moved, done.to_move, done.started_at) == ("COMPLETED", 25, 25, at(100))
    assert sorted(await drained(messages, source, now=200)) == list(range(25))
    assert await drained(messages, dlq, now=200) == []


async def test_the_maintenance_round_advances_the_tasks(
    db: Database, queues: QueueService, messages: MessageService, tasks: MoveTasks
) -> None:
    source, dlq = await pipe(queues)
    await dead_letter(messages, source, [SendEntry(body={"n": n}) for n in range(3)], sent=0)
    await tasks.start(dlq, now=at(20))
    report = await Maintenance(db).run_once(now=at(21))
    assert report.moved == 3
    assert [t.status for t in await tasks.list(dlq)] == ["COMPLETED"]


async def test_a_round_is_bounded(
    queues: QueueService, messages: MessageService, tasks: MoveTasks, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a rate a task moves ROUND_LIMIT messages a round at most, in batches of BATCH.
    source, dlq = await pipe(queues)
    await dead_letter(messages, source, [SendEntry(body={"n": n}) for n in range(7)], sent=0)
    monkeypatch.setattr(move_tasks, "ROUND_LIMIT", 5)
    monkeypatch.setattr(move_tasks, "BATCH", 2)
    await tasks.start(dlq, now=at(20))
    assert await tasks.advance(now=at(21)) == 5
    assert [t.status for t in await tasks.list(dlq)] == ["RUNNING"]
    assert await tasks.advance(now=at(22)) == 2
    assert [t.status for t in await tasks.list(dlq)] == ["COMPLETED"]


async def test_messages_dead_lettered_after_the_start_stay(
    queues: QueueService, messages: MessageService, tasks: MoveTasks
) -> None:
    source, dlq = await pipe(queues)
    await dead_letter(messages, source, [SendEntry(body={"n": n}) for n in range(3)], sent=0)
    await tasks.start(dlq, now=at(20))
    await dead_letter(messages, source, [SendEntry(body={"n": n}) for n in range(3, 5)], sent=30)
    assert await tasks.advance(now=at(50)) == 3
    [task] = await tasks.list(dlq)
    assert (task.status, task.moved, task.to_move) == ("COMPLETED", 3, 3)
    assert sorted(await drained(messages, dlq, now=50)) == [3, 4]
    assert sorted(await drained(messages, source, now=50)) == [0, 1, 2]


async def test_an_empty_dead_letter_queue_completes_at_once(queues: QueueService, tasks: MoveTasks) -> None:
    _, dlq = await pipe(queues)
    await tasks.start(dlq, now=at(0))
    assert await tasks.advance(now=at(1)) == 0
    [task] = await tasks.list(dlq)
    assert (task.status, task.to_move, task.moved) == ("COMPLETED", 0, 0)


async def test_a_fifo_task_to_a_destination_keeps_each_group_in_order(
    queues: QueueService, messages: MessageService, tasks: MoveTasks
) -> None:
    source, dlq = await pipe(queues, fifo=True)
    elsewhere = await make_queue(queues, fifo=True)
    await dead_letter(messages, source, fifo_entries("a", 4) + fifo_entries("b", 3), sent=0)
    task = await tasks.start(dlq, elsewhere, now=at(20))
    assert task.destination == elsewhere
    assert await tasks.advance(now=at(21)) == 7
    back = []
    for _ in range(10):
        got = await messages.receive(elsewhere, max_messages=10, visibility_timeout=600, now=at(22))
        if not got:
            break
        back += [(m.body["group"], m.body["n"]) for m in got]
    assert [n for g, n in back if g == "a"] == [0, 1, 2, 3]
    assert [n for g, n in back if g == "b"] == [0, 1, 2]
    assert await drained(messages, source, now=22) == []


async def test_cancel_stops_a_task(queues: QueueService, messages: MessageService, tasks: MoveTasks) -> None:
    source, dlq = await pipe(queues)
    await dead_letter(messages, source, [SendEntry(body={"n": n}) for n in range(10)], sent=0)
    task = await tasks.start(dlq, max_per_second=1, now=at(20))
    assert await tasks.advance(now=at(23)) == 3
    assert await tasks.cancel(dlq, task.id) == 3
    assert await tasks.advance(now=at(100)) == 0
    [cancelled] = await tasks.list(dlq)
    assert (cancelled.status, cancelled.moved) == ("CANCELLED", 3)
    assert len(await drained(messages, dlq, now=100)) == 7
    with pytest.raises(MoveTaskNotRunning):
        await tasks.cancel(dlq, task.id)
    with pytest.raises(MoveTaskNotFound):
        await tasks.cancel(dlq, uuid.uuid4())
    _, other_dlq = await pipe(queues)
    with pytest.raises(MoveTaskNotFound):  # a task is found under its own queue only
        await tasks.cancel(other_dlq, task.id)


async def test_one_running_task_per_queue_and_the_last_ten_kept(queues: QueueService, tasks: MoveTasks) -> None:
    _, dlq = await pipe(queues)
    first = await tasks.start(dlq, max_per_second=1, now=at(0))
    with pytest.raises(MoveTaskInProgress):
        await tasks.start(dlq, now=at(1))
    await tasks.cancel(dlq, first.id)
    started = [first.id]
    for i in range(1, 12):
        task = await tasks.start(dlq, max_per_second=1, now=at(10 * i))
        await tasks.cancel(dlq, task.id)
        started.append(task.id)
    kept = await tasks.list(dlq, limit=100)
    assert [t.id for t in kept] == started[::-1][:10]
    assert [t.id for t in await tasks.list(dlq)] == [started[-1]]  # one by default: the newest


async def test_a_task_whose_destination_is_deleted_fails(
    queues: QueueService, messages: MessageService, tasks: MoveTasks
) -> None:
    source, dlq = await pipe(queues)
    elsewhere = await make_queue(queues)
    await dead_letter(messages, source, [SendEntry(body={"n": n}) for n in range(4)], sent=0)
    await tasks.start(dlq, elsewhere, max_per_second=1, now=at(20))
    assert await tasks.advance(now=at(21)) == 1
    await queues.delete(elsewhere)
    assert await tasks.advance(now=at(30)) == 0
    [failed] = await tasks.list(dlq)
    assert (failed.status, failed.moved, failed.failure_reason) == (
        "FAILED",
        1,
        "AWS.SimpleQueueService.NonExistentQueue",
    )
    assert failed.destination == elsewhere
    assert len(await drained(messages, dlq, now=30)) == 3


async def test_what_a_task_refuses(queues: QueueService, tasks: MoveTasks) -> None:
    source, dlq = await pipe(queues)
    fifo = await make_queue(queues, fifo=True)
    with pytest.raises(MoveQueueNotFound):
        await tasks.start("missing")
    with pytest.raises(MoveQueueNotFound):
        await tasks.start(dlq, "missing")
    with pytest.raises(MoveQueueNotFound):
        await tasks.list("missing")
    with pytest.raises(NotADeadLetterQueue):
        await tasks.start(source)
    with pytest.raises(InvalidInput):
        await tasks.start(dlq, fifo)
    with pytest.raises(InvalidInput):
        await tasks.start(dlq, dlq)
    for rate in (0, 501):
        with pytest.raises(InvalidInput):
            await tasks.start(dlq, max_per_second=rate)
    assert await tasks.list(dlq, limit=10) == []


async def test_the_caller_is_asked_about_every_queue_a_task_moves_into(
    queues: QueueService, messages: MessageService, tasks: MoveTasks
) -> None:
    # Back to the sources: each source queue of the DLQ's messages; else the destination.
    dlq = await make_queue(queues)
    sources = [await make_queue(queues, visibility_timeout=10, dead_letter=DeadLetter(dlq, 1)) for _ in range(2)]
    for source in sources:
        await dead_letter(messages, source, [SendEntry(body={"n": 0})], sent=0)
    elsewhere = await make_queue(queues)
    asked: list[str] = []

    def refuse_the_last(name: str) -> None:
        asked.append(name)
        if name in (sources[1], elsewhere):
            raise PermissionError(name)

    with pytest.raises(PermissionError):
        await tasks.start(dlq, check_destination=refuse_the_last)
    assert asked == sources
    with pytest.raises(PermissionError):
        await tasks.start(dlq, elsewhere, check_destination=refuse_the_last)
    assert asked == [*sources, elsewhere]
    assert await tasks.list(dlq) == []


async def test_of_concurrent_starts_one_runs(queues: QueueService, tasks: MoveTasks) -> None:
    # Concurrent starts on one queue, each on its own connection: the running index lets one in.
    _, dlq = await pipe(queues)
    answers = await asyncio.gather(*(tasks.start(dlq, now=at(0)) for _ in range(8)), return_exceptions=True)
    started = [a for a in answers if isinstance(a, MoveTask)]
    assert len(started) == 1, answers
    assert all(isinstance(a, MoveTaskInProgress) for a in answers if a not in started), answers
    assert [t.id for t in await tasks.list(dlq, limit=10)] == [started[0].id]


async def test_a_cancel_waits_for_the_batch_in_progress(db: Database, queues: QueueService, tasks: MoveTasks) -> None:
    # The runner holds the task's row for a batch (move_task_lock): a cancel then waits, and
    # answers with what that batch moved.
    _, dlq = await pipe(queues)
    task = await tasks.start(dlq, now=at(0))
    async with db.transaction() as conn:
        assert await tdb.move_task_lock(conn, task.id, at(1)) is not None
        cancel = asyncio.create_task(tasks.cancel(dlq, task.id))
        await asyncio.sleep(0.3)
        assert not cancel.done(), "the cancel did not wait for the batch"
        await tdb.move_task_progress(conn, task.id, 2)
    assert await cancel == 2
    [cancelled] = await tasks.list(dlq)
    assert (cancelled.status, cancelled.moved) == ("CANCELLED", 2)
