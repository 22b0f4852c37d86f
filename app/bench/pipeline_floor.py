"""The backfill's database part alone: `pqs bench pipeline`'s same-run baseline for the backfill.

A backfill's tasks each run one transaction (app.pipeline.backfill.task.enqueue_rows): stage the
rows, claim their backfill keys, lock their groups, insert the messages and their dedup claims.
Here the same statements run on the same number of rows, shaped as the bench's source and split
as Spark splits them (by group, in the source's order within a task), from Arrow batches made
before the clock starts, with as many tasks at once as Spark runs: everything a backfill does but
Spark's part (reading, checking, shuffling and handing over the rows). What it takes is what
PostgreSQL needs for these rows on this machine today: both sides of a backfill's seconds over
these run on the same machine minutes apart, so that ratio is what to compare between hours and
boots, where the seconds move with the machine (its speed has been seen to change twofold
between boots).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING

from app.pipeline.backfill.rows import KEY_PREFIX
from app.pipeline.backfill.spec import Mapping, Task
from app.pipeline.staging import NULL

if TYPE_CHECKING:
    import pyarrow as pa

    from app.domain import Queue

BATCH_ROWS = 10_000  # Spark's spark.sql.execution.arrow.maxRecordsPerBatch default
NOTE = "x" * 60  # the bench source's body (app.bench.pipeline._source)


def task_batches(rows: int, groups: int, tasks: int, fifo: bool) -> list[list[pa.RecordBatch]]:
    """The bench source's rows as the tasks of a backfill's one pass get them (plan.handed(),
    staged by Spark): row n is in group g<n % groups> with dedup id order-<n> (FIFO), in task
    <its group % tasks> (FIFO; standard: n % tasks), in source order within its task."""
    import pyarrow as pa

    columns: list[dict[str, list[str | None]]] = [
        {"key0": [], "identity": [], "record": [], "staged": [], "dedup_key": []} for _ in range(tasks)
    ]
    for n in range(rows):
        body = f'{{"image":{n},"note":"{NOTE}","task":"resize"}}'
        identity = hashlib.sha256(f"bench row {n}".encode()).hexdigest()
        key0 = KEY_PREFIX + hashlib.sha256(bytes.fromhex(identity) + bytes(8)).hexdigest()
        group, dedup = (f"g{n % groups}", f"order-{n}") if fifo else (NULL, NULL)
        part = columns[(n % groups if fifo else n) % tasks]
        part["key0"].append(key0)
        part["identity"].append(identity)
        part["record"].append(None)
        # (group, dedup id, scope key: '' (queue-wide), body, attributes, delay), as staging.py
        part["staged"].append(f"{group}\t{dedup}\t\t{body}\t{{}}\t0")
        part["dedup_key"].append(f"\t{dedup}" if fifo else None)
    out = []
    for part in columns:
        table = pa.table({name: pa.array(values, pa.string()) for name, values in part.items()})
        out.append(table.to_batches(max_chunksize=BATCH_ROWS))
    return out


def run_database_part(url: str, queue: Queue, batches: list[list[pa.RecordBatch]], at_once: int) -> int:
    """Enqueue the tasks' batches into `queue` (new, never backfilled), `at_once` tasks at a
    time, each by enqueue_rows as a Spark task would; the rows enqueued."""
    from app.pipeline.backfill.task import enqueue_rows

    fifo = queue.fifo
    task = Task(
        database_url=url,
        queue=queue.name,
        queue_id=queue.id,
        attributes=queue.attributes,
        mapping=Mapping(body="body", group_id="grp" if fifo else None, dedup_id="dedup" if fifo else None),
        parse_string_body=True,
        dedup_window=300,
        look_up=False,
    )

    async def run() -> int:
        gate = asyncio.Semaphore(at_once)

        async def one(part: list[pa.RecordBatch]) -> int:
            async with gate:
                enqueued, _, _ = await enqueue_rows(task, part, None)
                return enqueued

        return sum(await asyncio.gather(*(one(part) for part in batches if part)))

    return asyncio.run(run())
