"""What runs in a Spark task: pass 1's check of its rows, and pass 2's transaction that claims
the rows' backfill keys and enqueues the rows whose key it claimed, by the send's rules
(app.service.enqueue: the group fence, the dedup window, the wake after commit)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from app.errors import PqsError
from app.pipeline.backfill.entry import python_staged
from app.pipeline.backfill.rows import Rows, key_text
from app.pipeline.session import PipelineError

if TYPE_CHECKING:
    import pyarrow as pa

    from app.db.rows import Conn
    from app.pipeline.backfill.faults import Fault
    from app.pipeline.backfill.spec import Task

EXAMPLES = 5  # reasons a refused run quotes
# What a task of pass 2 and of pass 1 answers (mapInArrow's output, in Spark's DDL).
WRITTEN = "enqueued long, already long, duplicates long"
CHECKED = "refused long, new long, examples array<string>, rows long, example_rows array<string>"
# A task's transaction: memory for sorting and staging its rows (see backfill_session).
SESSION = {"work_mem": "128MB", "temp_buffers": "256MB"}


def check_rows(task: Task, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Pass 1, per task, over the rows Spark did not stage (and, with `look_up`, the others):
    check the new ones (key not claimed yet) with the API's rules; a batch of one row (CHECKED):
    refused, new rows, a few reasons, rows read, and the identities of the rows the reasons are
    about (so the driver can say where they are). `batches` are plan.handed() without staged text."""
    import pyarrow as pa

    rows = Rows(task)
    for batch in batches:
        rows.add(batch)
    new = asyncio.run(_new_rows(task, rows.keys())) if task.look_up and rows.count else range(rows.count)
    refused = 0
    examples: list[str] = []
    example_rows: list[str] = []
    record = rows.column("record")
    texts = record.to_pylist() if record.null_count < len(record) else []
    for ord_ in new if texts else ():
        text = texts[ord_]
        if text is None:
            continue  # staged by Spark: it passes
        try:
            python_staged(task, text)
        except (PqsError, PipelineError) as exc:
            refused += 1
            if len(examples) < EXAMPLES:
                examples.append(f"{getattr(exc, 'message', str(exc))}: {text[:200]}")
                example_rows.append(rows.column("identity")[ord_].as_py())
    summary = {
        "refused": [refused],
        "new": [len(new)],
        "examples": [examples],
        "rows": [rows.count],
        "example_rows": [example_rows],
    }
    yield pa.RecordBatch.from_pydict(summary, schema=_arrow_schema(CHECKED))


def _arrow_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a task's answer (the Spark DDL of its columns: long, array<string>)."""
    import pyarrow as pa

    types = {"long": pa.int64(), "array<string>": pa.list_(pa.string())}
    return pa.schema([(name, types[kind]) for name, kind in (c.strip().split(" ", 1) for c in ddl.split(","))])


async def _new_rows(task: Task, keys: pa.ChunkedArray | pa.Array) -> Sequence[int]:
    """Positions of the rows whose backfill key is not claimed yet (a read-only look)."""
    import psycopg

    from app.pipeline.exports import SQL

    conn = await psycopg.AsyncConnection.connect(task.database_url)
    async with conn, conn.transaction():
        await conn.execute(SQL["backfill_keys_stage"].sql)
        async with conn.cursor().copy(SQL["backfill_keys_copy"].sql) as copy:
            for chunk in key_text(keys):
                await copy.write(chunk)
        row = await (await conn.execute(SQL["backfill_keys_new"].sql, {"queue_id": task.queue_id})).fetchone()
        assert row is not None
        ords: list[int] = row[0]
        return ords


def write_rows(task: Task, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Pass 2, per task, in one transaction; a batch of one row (WRITTEN): enqueued, already
    there, duplicates by dedup id. `batches` are plan.handed() with staged text."""
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    first_try = context is not None and context.attemptNumber() == 0 and context.partitionId() == 0
    arriving = (b for b in batches if b.num_rows)
    first = next(arriving, None)
    outcome = (0, 0, 0)
    if first is not None:
        fault = task.fault if first_try else None
        outcome = asyncio.run(enqueue_rows(task, itertools.chain((first,), arriving), fault))
    yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64()) for n in outcome], schema=_arrow_schema(WRITTEN))


async def claim_keys(conn: Conn, queue_id: int, count: int = 0) -> list[int]:
    """Claim the task's staged keys (backfill_keys_claim); the positions of the rows whose key
    this claimed. With `count` (the task's rows, of a queue no backfill had enqueued into when
    the run began) it tries to claim them all at once first (backfill_keys_claim_all)."""
    import psycopg
    from psycopg import sql

    from app.pipeline.exports import SQL

    params = {"queue_id": queue_id}
    if count:
        try:
            async with conn.transaction():  # a savepoint: the failed insert leaves nothing
                await conn.execute(SQL["backfill_keys_claim_all"].sql, params)
            return list(range(count))
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != "backfill_keys_pkey":
                raise
    claim = sql.SQL(SQL["backfill_keys_claim"].text)
    try:
        async with conn.transaction():  # a savepoint: the failed insert leaves nothing
            row = await (await conn.execute(claim.format(conflict=sql.SQL("")), params)).fetchone()
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name != "backfill_keys_pkey":
            raise
        contended = claim.format(conflict=sql.SQL("ON CONFLICT (queue_id, key) DO NOTHING"))
        row = await (await conn.execute(contended, params)).fetchone()
    assert row is not None
    ords: list[int] = row["ords"]
    return ords


async def enqueue_rows(task: Task, batches: Iterable[pa.RecordBatch], fault: Fault | None) -> tuple[int, int, int]:
    """A task's transaction: claim the keys of its rows (plan.handed() batches) and enqueue the rows
    whose key it claimed; (enqueued, already there, duplicates by dedup id)."""
    import psycopg
    from psycopg.rows import dict_row

    from app.db import send as mdb
    from app.db.queues import queue_get
    from app.pipeline.exports import SQL
    from app.service import enqueue

    conn = await psycopg.AsyncConnection.connect(task.database_url, row_factory=dict_row, autocommit=True)
    async with conn:
        async with conn.transaction():
            # As a send: hold the queue (key-share) so that it is not deleted under the task.
            queue = await queue_get(conn, task.queue, for_send=True)
            if queue is None or queue.id != task.queue_id:
                raise PipelineError(f"queue {task.queue} was deleted during the backfill")
            await conn.execute(SQL["backfill_session"].sql, SESSION)
            rows = Rows(task)
            # Into a queue no backfill had enqueued into when the run began, every row is new as
            # a rule: the rows are staged as they arrive, so PostgreSQL parses them while Spark
            # still sends the rest. Else they are read first, and only those whose key this
            # transaction claims are staged.
            streamed = not task.look_up
            if streamed:
                await mdb.message_stage(conn, rows.arriving(batches))
            else:
                for batch in batches:
                    rows.add(batch)
            # Claim the keys (in key order: two backfills of the same rows wait for each other
            # instead of deadlocking).
            await conn.execute(SQL["backfill_keys_stage"].sql)
            async with conn.cursor().copy(SQL["backfill_keys_copy"].sql) as copy:
                for chunk in key_text(rows.keys()):
                    await copy.write(chunk)
            ords = await claim_keys(conn, queue.id, rows.count if streamed else 0)
            already = rows.count - len(ords)
            # Rows staged as they came are staged again, only those of this claim, when some
            # keys were claimed already (a retried task whose first attempt committed, a
            # concurrent run), or when a dedup key repeats (rare: the repeats are marked then).
            again = streamed and (already > 0 or rows.repeated())
            if again:
                await conn.execute(SQL["backfill_stage_drop"].sql)
            enqueued = 0
            if ords:
                if not streamed or again:
                    await mdb.message_stage(conn, rows.stage_text(ords))
                enqueued = await enqueue.enqueue_staged(conn, queue.id, queue.fifo, task.dedup_window, None)
            if fault is not None:
                fault.inject("before_commit", enqueued)
        if enqueued:
            # As after a send's commit (the connection is in autocommit again).
            await enqueue.wake_after_commit(conn, queue.id)
        if fault is not None:
            fault.inject("after_commit", enqueued)
    return enqueued, already, rows.count - already - enqueued
