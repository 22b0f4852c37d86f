"""Repository functions of SQS's message move tasks (queries/moves.sql, `move_task_*`): a task's
row, its start, its progress and its end. Each takes a connection and never commits; the
messages move by the redrive's statements (app.db.moves)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from app.db.rows import Conn
from app.db.statements import NoRow, execute, fetch, fetch_one, statement


class TaskRow(NamedTuple):
    """A `message_move_tasks` row."""

    id: UUID
    source_queue_id: int
    destination_queue_id: int | None
    destination_name: str | None
    max_per_second: int | None
    status: str
    to_move: int
    moved: int
    failure_reason: str | None
    started_at: datetime
    before_id: int


class Backlog(NamedTuple):
    """What a dead-letter queue holds for a task when it starts."""

    to_move: int
    before_id: int
    source_ids: list[int]


class Advancing(NamedTuple):
    """A running task locked for a batch, with how many messages its rate allows now (None: no
    limit)."""

    id: UUID
    source_queue_id: int
    destination_queue_id: int | None
    destination_name: str | None
    before_id: int
    allowance: int | None


class TaskId(NamedTuple):
    id: UUID


class Moved(NamedTuple):
    moved: int


_BACKLOG = statement("move_task_backlog", Backlog)
_INSERT = statement("move_task_insert", TaskRow)
_TRIM = statement("move_task_trim", NoRow)
_GET = statement("move_task_get", TaskRow)
_LIST = statement("move_task_list", TaskRow)
_RUNNING = statement("move_task_running", TaskId)
_LOCK = statement("move_task_lock", Advancing)
_PROGRESS = statement("move_task_progress", NoRow)
_END = statement("move_task_end", Moved)


async def move_task_backlog(conn: Conn, queue_id: int) -> Backlog:
    """How many messages of the dead-letter queue can move, the last of them, their sources."""
    [row] = await fetch(conn, _BACKLOG, {"queue_id": queue_id})
    return row


async def move_task_insert(
    conn: Conn,
    task_id: UUID,
    source_queue_id: int,
    destination: tuple[int, str] | None,
    max_per_second: int | None,
    backlog: Backlog,
    now: datetime | None,
) -> TaskRow:
    """A new running task (MoveTaskInProgress, by the running index, if the queue has one)."""
    params = {
        "id": task_id,
        "source_queue_id": source_queue_id,
        "destination_queue_id": destination[0] if destination else None,
        "destination_name": destination[1] if destination else None,
        "max_per_second": max_per_second,
        "to_move": backlog.to_move,
        "before_id": backlog.before_id,
        "now": now,
    }
    [row] = await fetch(conn, _INSERT, params)
    return row


async def move_task_trim(conn: Conn, source_queue_id: int, keep: int) -> None:
    """Forget the queue's ended tasks but the newest `keep`."""
    await execute(conn, _TRIM, {"source_queue_id": source_queue_id, "keep": keep})


async def move_task_get(conn: Conn, source_queue_id: int, task_id: UUID) -> TaskRow | None:
    """One task of the queue, locked."""
    return await fetch_one(conn, _GET, {"id": task_id, "source_queue_id": source_queue_id})


async def move_task_list(conn: Conn, source_queue_id: int, limit: int) -> list[TaskRow]:
    """The queue's tasks, newest first."""
    return await fetch(conn, _LIST, {"source_queue_id": source_queue_id, "limit": limit})


async def move_task_running(conn: Conn) -> list[UUID]:
    """The running tasks, oldest first."""
    return [row.id for row in await fetch(conn, _RUNNING, {})]


async def move_task_lock(conn: Conn, task_id: UUID, now: datetime | None) -> Advancing | None:
    """The task locked for a batch, if it is still running."""
    return await fetch_one(conn, _LOCK, {"id": task_id, "now": now})


async def move_task_progress(conn: Conn, task_id: UUID, moved: int) -> None:
    """Count what a batch moved."""
    await execute(conn, _PROGRESS, {"id": task_id, "moved": moved})


async def move_task_end(conn: Conn, task_id: UUID, status: str, failure_reason: str | None = None) -> int | None:
    """End a running task with this status; what it moved (None: it was not running)."""
    row = await fetch_one(conn, _END, {"id": task_id, "status": status, "failure_reason": failure_reason})
    return row.moved if row else None
