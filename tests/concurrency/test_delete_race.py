"""Sends racing a queue delete: each send either lands before the delete (and its message is
purged with the queue) or finds no queue; no message outlives its queue, and a delete is not
held off by sends that started after it."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from app.db.engine import Database
from app.db.queues import QUEUE_LOCK_CLASS
from app.db.sql import QUERIES
from app.domain import SendEntry, SendResult
from app.errors import QueueNotFound
from app.service.messages import MessageService
from app.service.queues import QueueService
from tests.concurrency.workers import history_in_db
from tests.factories import make_queue

MAX_SENDS = 150


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
async def test_sends_racing_a_delete_leave_no_orphaned_message(
    queues: QueueService, messages: MessageService, db_url: str, fifo: bool
) -> None:
    senders = 8
    name = await make_queue(queues, fifo=fifo)
    accepted: list[int] = []
    busy = asyncio.Event()

    async def send_until_gone(s: int) -> None:
        for i in range(MAX_SENDS):
            entry = SendEntry(body={"s": s, "i": i}, group_id=f"g{s}" if fifo else None, dedup_id=f"{s}-{i}")
            try:
                [result] = await messages.send(name, [entry])
            except QueueNotFound:
                return
            assert isinstance(result, SendResult), result
            accepted.append(result.sequence_number)
            if len(accepted) >= 4 * senders:
                busy.set()

    async with asyncio.TaskGroup() as tasks:
        for s in range(senders):
            tasks.create_task(send_until_gone(s))
        await asyncio.wait_for(busy.wait(), 20)
        await queues.delete(name)

    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.id = m.queue_id)"
        )
        assert await cur.fetchone() == (0,)
    # Every accepted send was purged with the queue, exactly once.
    assert await history_in_db(db_url) == {"purged": (len(accepted), len(accepted), 0)}


async def _blocked_by(conn: psycopg.AsyncConnection[tuple[object, ...]], pid: int) -> list[str]:
    """The statements of the sessions waiting for session `pid`."""
    cur = await conn.execute("SELECT query FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,))
    return [str(row[0]) for row in await cur.fetchall()]


async def test_a_send_that_starts_while_a_delete_waits_is_not_accepted(
    queues: QueueService, messages: MessageService, db_url: str
) -> None:
    name = await make_queue(queues)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as watcher:
        async with await psycopg.AsyncConnection.connect(db_url) as sender:
            # A send in progress: it has run its first statement and holds the queue's row.
            await sender.execute(QUERIES["queue_get_for_send"].sql, {"name": name, "lock_class": QUEUE_LOCK_CLASS})
            delete = asyncio.create_task(queues.delete(name))
            try:
                for _ in range(500):
                    if await _blocked_by(watcher, sender.info.backend_pid):  # only the delete can be
                        break
                    await asyncio.sleep(0.01)
                else:
                    raise AssertionError("the delete never waited for the send in progress")

                late = asyncio.create_task(messages.send(name, [SendEntry(body={"late": True})]))
                # A late send must queue behind the delete; give one that does not time to finish.
                finished, _ = await asyncio.wait({late}, timeout=1.0)
                assert late not in finished, f"a send that started after the delete returned {late.result()}"
            finally:
                await sender.commit()
                await asyncio.wait_for(delete, 10)

        with pytest.raises(QueueNotFound):
            await asyncio.wait_for(late, 10)


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
async def test_a_send_after_another_process_replaced_the_queue_lands_in_the_new_one(
    queues: QueueService, messages: MessageService, db_url: str, fifo: bool
) -> None:
    """A standard queue's send checks entries against the process's queue cache and fences the
    cached queue id in its insert: when another process deleted the queue and made a new one of
    the same name meanwhile, the send must land in the new queue, not fail or go nowhere."""
    name = await make_queue(queues, fifo=fifo)
    group = "g" if fifo else None
    [first] = await messages.send(name, [SendEntry(body=1, group_id=group, dedup_id="a")])  # caches the queue
    assert isinstance(first, SendResult)
    other = Database(db_url, min_size=1, max_size=2)  # another process: its own pool and cache
    await other.open()
    try:
        await QueueService(other).delete(name)
        await make_queue(QueueService(other), name=name, fifo=fifo)
    finally:
        await other.close()
    [second] = await messages.send(name, [SendEntry(body=2, group_id=group, dedup_id="b")])
    assert isinstance(second, SendResult)
    messages.db.queue_cache.forget(name)  # (a receive may see the old queue for up to the cache's ttl)
    got = await messages.receive(name, max_messages=10)
    assert [m.body for m in got] == [2]
