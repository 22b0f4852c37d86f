"""Message move tasks (SQS's StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask):
a redrive of a dead-letter queue that runs in the background at a bounded rate.

A task moves the messages its dead-letter queue held when it started (up to the last of them,
`before_id`), to a destination queue or back to each message's source, by the redrive's own
batches (app.service.queues.redrive_batch). The maintenance leader advances every running task
once a round (`MoveTasks.advance`, from Maintenance.run_once): by what its rate allows since it
started, at most ROUND_LIMIT messages a round in transactions of at most BATCH; a batch that
moves fewer than it could ends the task, COMPLETED. One task runs per dead-letter queue at a
time; the last KEEP of a queue are kept.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Final, cast

from app.db import move_tasks as tdb
from app.db import queues as qdb
from app.db.engine import Database
from app.db.move_tasks import TaskRow
from app.db.rows import Conn
from app.domain import MoveTask, MoveTaskStatus, Queue
from app.errors import (
    InvalidInput,
    MoveQueueNotFound,
    MoveTaskInProgress,
    MoveTaskNotFound,
    MoveTaskNotRunning,
    NotADeadLetterQueue,
    QueueNotFound,
    quote,
)
from app.service.queues import redrive_batch

BATCH: Final = 500
ROUND_LIMIT: Final = 5000
KEEP: Final = 10
MAX_PER_SECOND: Final = 500
# What a task that lost its destination queue says, in SQS's words (its error code for a queue
# that does not exist).
DESTINATION_GONE: Final = "AWS.SimpleQueueService.NonExistentQueue"


def _task(row: TaskRow, source: str) -> MoveTask:
    return MoveTask(
        id=row.id,
        source=source,
        destination=row.destination_name,
        max_per_second=row.max_per_second,
        status=cast(MoveTaskStatus, row.status),
        to_move=row.to_move,
        moved=row.moved,
        failure_reason=row.failure_reason,
        started_at=row.started_at,
    )


async def _queue(conn: Conn, name: str, role: str) -> Queue:
    queue = await qdb.queue_get(conn, name)
    if queue is None:
        raise MoveQueueNotFound(name, role)
    return queue


class MoveTasks:
    """Start, list, cancel and advance move tasks; each public method is one transaction
    (advance: one per batch)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def start(
        self,
        source: str,
        destination: str | None = None,
        max_per_second: int | None = None,
        *,
        check_destination: Callable[[str], None] = lambda _: None,
        now: datetime | None = None,
    ) -> MoveTask:
        """Start moving the messages the dead-letter queue `source` holds now to `destination`,
        or (None) each back to its source queue. `check_destination(name)` is called for each
        queue the task will move messages into (the caller's right to send there), before the
        task exists."""
        if max_per_second is not None and not 1 <= max_per_second <= MAX_PER_SECOND:
            raise InvalidInput(f"max_per_second must be between 1 and {MAX_PER_SECOND}")

        async def work(conn: Conn) -> MoveTask:
            queue = await _queue(conn, source, "source")
            if not await qdb.queue_dead_letter_sources(conn, queue.id):
                raise NotADeadLetterQueue(f"queue {quote(source)} is not the dead-letter queue of any queue")
            target: Queue | None = None
            if destination is not None:
                target = await _queue(conn, destination, "destination")
                if target.id == queue.id:
                    raise InvalidInput("a move task's destination must be another queue than its source")
                if target.fifo != queue.fifo:
                    raise InvalidInput("a move task's destination must be of its source's kind (FIFO or standard)")
            backlog = await tdb.move_task_backlog(conn, queue.id)
            if target is not None:
                check_destination(target.name)
            else:
                for source_id in sorted(backlog.source_ids):
                    found = await qdb.queue_get_by_id(conn, source_id)
                    if found is not None:
                        check_destination(found.name)
            into = (target.id, target.name) if target is not None else None
            try:
                row = await tdb.move_task_insert(conn, uuid.uuid4(), queue.id, into, max_per_second, backlog, now)
            except MoveTaskInProgress:  # app.db.errors: by the running index
                raise MoveTaskInProgress(
                    f"queue {quote(source)} has a move task running: one at a time for a queue"
                ) from None
            await tdb.move_task_trim(conn, queue.id, KEEP)
            return _task(row, queue.name)

        return await self.db.run(work)

    async def list(self, source: str, limit: int = 1) -> list[MoveTask]:
        """The queue's tasks, newest first, at most `limit` (the last KEEP are kept)."""

        async def work(conn: Conn) -> list[MoveTask]:
            queue = await _queue(conn, source, "source")
            return [_task(row, queue.name) for row in await tdb.move_task_list(conn, queue.id, limit)]

        return await self.db.run(work)

    async def cancel(self, source: str, task_id: uuid.UUID) -> int:
        """Stop a running task: it is CANCELLED at once (a batch in progress ends first); how
        many messages it moved. The messages it moved stay where they went."""

        async def work(conn: Conn) -> int:
            queue = await _queue(conn, source, "source")
            row = await tdb.move_task_get(conn, queue.id, task_id)
            if row is None:
                raise MoveTaskNotFound(f"queue {quote(source)} has no move task {task_id}")
            moved = await tdb.move_task_end(conn, row.id, "CANCELLED")
            if moved is None:
                raise MoveTaskNotRunning(f"move task {task_id} has ended ({row.status}): only a running task stops")
            return moved

        return await self.db.run(work)

    async def advance(self, now: datetime | None = None) -> int:
        """Advance every running task by what its rate allows now (at most ROUND_LIMIT messages
        each); how many messages moved in all."""
        moved = 0
        for task_id in await self.db.run(tdb.move_task_running):
            left = ROUND_LIMIT
            while left > 0:
                count = await self._batch(task_id, left, now)
                if count is None:
                    break
                moved += count
                left -= count
        return moved

    async def _batch(self, task_id: uuid.UUID, most: int, now: datetime | None) -> int | None:
        """One batch of a task; how many moved, or None when the task has nothing more to do this
        round (ended, or its rate allows nothing yet)."""

        async def work(conn: Conn) -> int | None:
            task = await tdb.move_task_lock(conn, task_id, now)
            if task is None:
                return None
            if task.destination_name is not None and task.destination_queue_id is None:
                await tdb.move_task_end(conn, task.id, "FAILED", DESTINATION_GONE)
                return None
            limit = min(BATCH, most, task.allowance if task.allowance is not None else BATCH)
            if limit <= 0:
                return None
            source = await qdb.queue_get_by_id(conn, task.source_queue_id)
            assert source is not None  # the task goes with its queue
            count = await redrive_batch(
                conn, source, limit, now, destination=task.destination_name, before_id=task.before_id
            )
            await tdb.move_task_progress(conn, task.id, count)
            if count < limit:
                await tdb.move_task_end(conn, task.id, "COMPLETED")
                return None if count == 0 else count
            return count

        try:
            return await self.db.run(work)
        except QueueNotFound:
            # The destination was deleted during the batch (undone): the next one finds its id
            # gone and fails the task.
            return None
