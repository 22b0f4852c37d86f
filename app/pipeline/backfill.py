"""`pqs pipeline backfill`: rows of Parquet, CSV or JSON-lines files -> messages of a queue.

Rows enter the queue through the API's enqueue path: each row is checked by the API's own
`check_entry` (body, attributes, group and dedup ids, sizes; content-based dedup ids too), and
each Spark task stages its rows and enqueues them with `message_enqueue`, the repository
function a send uses, so dedup windows, FIFO groups (locked in order, sequence numbers in row
order) and long-poll wake-ups behave as for a send. One transaction per task: COPY into a
temporary table, claim the rows' backfill keys, one insert of the rows whose key is new.

Exactly once. Every row has a backfill key, kept in `backfill_keys` for good (a dedup id is
forgotten when its window ends, so it cannot carry this): SHA-256 of the row's identity and of
its occurrence number among identical rows. The identity is the row itself (all its columns,
as JSON) or, with `key`, a column of natural keys, which must then be unique. Identical rows
always land in the same task (FIFO: same group; standard: partitioned by identity), so their
occurrence numbers, and so the keys, come out the same however the rows are split into tasks,
in every run and every attempt. A key is claimed in the same transaction that enqueues its row:
a task attempt that fails before its commit leaves nothing, one that fails after it leaves
keys that make its retry enqueue nothing again, and a re-run enqueues 0. A row that is a
duplicate by its dedup id keeps its key too (it is answered, like a duplicate send).

Nothing is written unless every row can be enqueued: a first pass checks them all and refuses
the run with the reasons (a FIFO queue's rows without a dedup id, for example).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal

from app.domain import QueueAttributes, SendEntry
from app.errors import PqsError
from app.pipeline.session import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from app.db.messages import StagedRow
    from app.domain import Queue
    from app.pipeline.progress import Progress

FORMATS = ("parquet", "csv", "json")
SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
EXAMPLES = 5
_ATTRIBUTES = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
# A test hook: fail the first attempt of the first task before or after its commit.
Fault = Literal["before_commit", "after_commit"]


class BackfillRefused(PipelineError):
    """Some rows cannot be enqueued; nothing was written."""


class InjectedFailure(RuntimeError):
    """The failure a test asked for (see Fault)."""


@dataclass(frozen=True)
class Mapping:
    """Which source columns make a message. Without `body`, the columns not mapped to a group,
    dedup id or attributes are the body (a JSON object). A string body column of a Parquet or
    CSV file holds JSON text unless `body_text`; in JSON lines every value is JSON already."""

    body: str | None = None
    group_id: str | None = None
    dedup_id: str | None = None
    attributes: str | None = None
    key: str | None = None
    order_by: str | None = None
    body_text: bool = False

    def columns(self) -> list[str]:
        """The source columns named."""
        named = (self.body, self.group_id, self.dedup_id, self.attributes, self.key, self.order_by)
        return [c for c in named if c is not None]


@dataclass(frozen=True)
class BackfillResult:
    """What a run did: rows read, enqueued, already there (an earlier run or attempt), and
    duplicates by dedup id (answered, not enqueued)."""

    queue: str
    rows: int = 0
    enqueued: int = 0
    already: int = 0
    duplicates: int = 0
    tasks: int = 0


@dataclass(frozen=True)
class _Task:
    """What every Spark task needs (pickled to the executors)."""

    database_url: str
    queue: str
    queue_id: int
    attributes: QueueAttributes
    mapping: Mapping
    parse_string_body: bool
    dedup_window: int
    fault: Fault | None = None
    mapped: frozenset[str] = field(default_factory=frozenset)
    # False when no backfill enqueued into the queue before: every row is new, no look-up.
    look_up: bool = True


def source_format(source: str, fmt: str | None) -> str:
    """The source's format: given, or from its suffix."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise PipelineError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
        return fmt
    suffix = PurePath(source.rstrip("/")).suffix.lower()
    if suffix not in SUFFIXES:
        raise PipelineError(f"cannot tell the format of {source} from its name: give --format ({', '.join(FORMATS)})")
    return SUFFIXES[suffix]


def records(spark: SparkSession, source: str, fmt: str, mapping: Mapping) -> DataFrame:
    """The source as one JSON object per row (`record`, nulls kept), with the columns Spark
    needs for placing rows: `group_id` (FIFO), `identity` (hex SHA-256) and the row's place in
    FIFO order (`position`, then `position_text`)."""
    from pyspark.sql import functions as F

    def value(name: str) -> Column:
        if fmt == "json":
            return F.get_json_object("record", f"$['{name}']")
        return F.col(f"`{name}`").cast("string")

    if fmt == "json":
        # Lines as they are: Spark's schema inference would drop null fields and merge shapes.
        frame = spark.read.text(source).where(F.trim("value") != "").select(F.col("value").alias("record"))
    else:
        reader = spark.read.option("mode", "FAILFAST")
        if fmt == "csv":
            # RFC 4180: a header line, quotes doubled inside quoted fields; every value is text.
            raw = reader.option("header", "true").option("escape", '"').csv(source)
        else:
            raw = reader.parquet(source)
        missing = [c for c in mapping.columns() if c not in raw.columns]
        if missing:
            raise PipelineError(f"{source} has no column {', '.join(missing)} (its columns: {', '.join(raw.columns)})")
        record = F.to_json(F.struct(*[F.col(f"`{c}`") for c in raw.columns]), {"ignoreNullFields": "false"})
        frame = raw.select(record.alias("record"), *[F.col(f"`{c}`") for c in mapping.columns()])
    identity = F.sha2(value(mapping.key), 256) if mapping.key else F.sha2(F.col("record"), 256)
    if mapping.order_by is None:
        position: list[Column] = [F.monotonically_increasing_id(), F.lit(None).cast("string")]
    elif fmt == "parquet":
        position = [F.col(f"`{mapping.order_by}`"), F.lit(None).cast("string")]
    else:
        # Text: numbers in numeric order, anything else (ISO times, say) in text order.
        position = [value(mapping.order_by).cast("double"), value(mapping.order_by)]
    return frame.select(
        "record",
        (value(mapping.group_id) if mapping.group_id else F.lit(None).cast("string")).alias("group_id"),
        identity.alias("identity"),
        position[0].alias("position"),
        position[1].alias("position_text"),
    )


def placed(rows: DataFrame, fifo: bool, partitions: int) -> DataFrame:
    """Rows split into tasks so that identical rows (same identity) meet in one task: FIFO by
    group (a group's rows then stay in one task, in their order), standard by identity."""
    if fifo:
        return rows.repartition(partitions, "group_id").sortWithinPartitions("position", "position_text")
    return rows.repartition(partitions, "identity")


def run_backfill(
    spark: SparkSession,
    database_url: str,
    queue_name: str,
    source: str,
    progress: Progress,
    *,
    fmt: str | None = None,
    mapping: Mapping | None = None,
    partitions: int | None = None,
    dedup_window: int = 300,
    fault: Fault | None = None,
) -> BackfillResult:
    """Enqueue every row of `source` into `queue_name` once, however often this runs."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    mapping = mapping or Mapping()
    fmt = source_format(source, fmt)
    queue = _queue(database_url, queue_name)
    _check_mapping(queue, mapping, fmt)
    progress.attach(spark.sparkContext)
    task = _Task(
        database_url=database_url,
        queue=queue.name,
        queue_id=queue.id,
        attributes=queue.attributes,
        mapping=mapping,
        parse_string_body=fmt != "json" and not mapping.body_text,
        dedup_window=dedup_window,
        fault=fault,
        mapped=frozenset(c for c in (mapping.group_id, mapping.dedup_id, mapping.attributes) if c),
        look_up=_backfilled_before(database_url, queue.id),
    )
    parts = partitions or 2 * max(1, spark.sparkContext.defaultParallelism)
    rows = records(spark, source, fmt, mapping)
    # Pass 1 finds each task's new rows (their keys unclaimed) and checks them with the API's
    # rules; what it prepares is kept for pass 2, which enqueues. A re-run has no new rows, so
    # it checks nothing and copies only keys.
    prepared = placed(rows, queue.fifo, parts).select("record", "identity").rdd.mapPartitions(partial(_prepare, task))
    prepared.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with progress.step(f"backfill {queue.name}: find new rows and check them"):
            if mapping.key:
                repeated = rows.groupBy("identity").count().where(F.col("count") > 1).count()
                if repeated:
                    raise BackfillRefused(
                        f"{repeated:,} values of the key column {mapping.key!r} are not unique; nothing was written"
                    )
            summaries = prepared.filter(lambda item: item[0] == _SUMMARY).map(lambda item: item[1]).collect()
        total = sum(s[0] for s in summaries)
        refused = sum(s[2] for s in summaries)
        if refused:
            examples = [e for s in summaries for e in s[3]][:EXAMPLES]
            raise BackfillRefused(
                f"{refused:,} of {total:,} rows cannot be enqueued into {queue.name}; nothing was written. "
                + "; ".join(examples)
            )
        found = sum(s[1] for s in summaries)
        with progress.step(f"backfill {queue.name}: enqueue {total - found:,} of {total:,} rows"):
            outcomes = prepared.mapPartitions(partial(_write_rows, task)).collect()
    finally:
        prepared.unpersist()
    return BackfillResult(
        queue=queue.name,
        rows=total,
        enqueued=sum(o[0] for o in outcomes),
        already=found + sum(o[1] for o in outcomes),
        duplicates=sum(o[2] for o in outcomes),
        tasks=len(outcomes),
    )


def _queue(database_url: str, name: str) -> Queue:
    from app.db.queues import queue_get
    from app.service.keys import on_connection

    queue = asyncio.run(on_connection(database_url, lambda conn: queue_get(conn, name)))
    if queue is None:
        raise PipelineError(f"queue {name} does not exist (create it first: pqs queue create {name})")
    return queue


def _backfilled_before(database_url: str, queue_id: int) -> bool:
    from app.pipeline.exports import SQL, connect

    with connect(database_url) as conn:
        row = conn.execute(SQL["backfill_keys_any"].sql, {"queue_id": queue_id}).fetchone()
    return bool(row and row["any"])


def _check_mapping(queue: Queue, mapping: Mapping, fmt: str) -> None:
    """What can be refused before reading a single row."""
    attrs = queue.attributes
    if fmt == "json" and any("'" in c or "]" in c for c in mapping.columns()):
        raise PipelineError("JSON-lines column names cannot contain ' or ]")
    if queue.fifo and mapping.group_id is None:
        raise BackfillRefused(
            f"{queue.name} is a FIFO queue: map a column to group ids (--group-id); nothing was written"
        )
    if queue.fifo and mapping.dedup_id is None and not attrs.content_based_deduplication:
        raise BackfillRefused(
            f"{queue.name} is a FIFO queue without content-based deduplication: every row needs a dedup id, "
            "map a column to it (--dedup-id); nothing was written"
        )
    if not queue.fifo and mapping.group_id is not None:
        raise BackfillRefused(f"{queue.name} is a standard queue: group ids are for FIFO queues; nothing was written")


def _token(value: Any) -> str | None:
    """A group or dedup id from a source value (numbers become their text)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


def _entry(task: _Task, text: str) -> tuple[SendEntry, tuple[str | None, int, bytes]]:
    """One source row as the API's SendEntry, checked by the API's check_entry."""
    from app.service.validation import check_entry

    try:
        record = json.loads(text)
    except ValueError:
        raise PipelineError("the line is not JSON") from None
    if not isinstance(record, dict):
        raise PipelineError("the line is not a JSON object")
    mapping = task.mapping
    if mapping.body is not None:
        body = record.get(mapping.body)
        if task.parse_string_body and isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                raise PipelineError(f"column {mapping.body!r} is not JSON text (for plain text: --body-text)") from None
    else:
        body = {k: v for k, v in record.items() if k not in task.mapped}
    attributes = record.get(mapping.attributes) if mapping.attributes else None
    if isinstance(attributes, str):
        try:
            attributes = json.loads(attributes)
        except ValueError:
            raise PipelineError(f"column {mapping.attributes!r} is not a JSON object") from None
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        raise PipelineError(f"column {mapping.attributes!r} is not an object of attributes")
    entry = SendEntry(
        body=body,
        group_id=_token(record.get(mapping.group_id)) if mapping.group_id else None,
        dedup_id=_token(record.get(mapping.dedup_id)) if mapping.dedup_id else None,
        attributes=attributes,
    )
    return entry, check_entry(task.attributes, entry)


_ROW = "r"
_SUMMARY = "s"


def _prepare(task: _Task, rows: Iterable[Any]) -> Iterator[tuple[str, Any]]:
    """Pass 1, per task: the rows' backfill keys; the new rows (key not claimed yet) checked with
    the API's rules and ready for the staging table (tagged _ROW),
    then one summary (tagged _SUMMARY): (rows, already there, refused, a few reasons)."""
    from app.service.messages import dedup_scope_key

    records: list[str] = []
    keys: list[bytes] = []
    seen: dict[str, int] = {}
    for text, identity in rows:
        # The row's key: its identity and its number among the task's rows of that identity
        # (all of which are in this task, see placed()).
        occurrence = seen.get(identity, 0)
        seen[identity] = occurrence + 1
        records.append(text)
        keys.append(hashlib.sha256(bytes.fromhex(identity) + occurrence.to_bytes(8, "big")).digest())
    new = asyncio.run(_new_rows(task, keys)) if task.look_up and keys else list(range(len(keys)))
    refused = 0
    examples: list[str] = []
    claimed: set[tuple[str, str]] = set()  # dedup keys of earlier new rows of the task
    for ord_ in new:
        text = records[ord_]
        try:
            entry, (dedup_id, delay, body_json) = _entry(task, text)
        except (PqsError, PipelineError) as exc:
            refused += 1
            if len(examples) < EXAMPLES:
                examples.append(f"{getattr(exc, 'message', str(exc))}: {text[:200]}")
            continue
        scope_key = dedup_scope_key(task.attributes, entry.group_id)
        repeat = False
        if dedup_id is not None:
            repeat = (scope_key, dedup_id) in claimed
            claimed.add((scope_key, dedup_id))
        staged: StagedRow = (
            keys[ord_],
            ord_,
            entry.group_id,
            dedup_id,
            scope_key,
            body_json.decode(),
            _ATTRIBUTES.encode(entry.attributes) if entry.attributes else "{}",
            delay,
            repeat,
        )
        yield _ROW, staged
    yield _SUMMARY, (len(records), len(records) - len(new), refused, examples)


async def _new_rows(task: _Task, keys: list[bytes]) -> list[int]:
    """Positions of the rows whose backfill key is not claimed yet (a read-only look)."""
    import psycopg

    from app.pipeline.exports import SQL

    conn = await psycopg.AsyncConnection.connect(task.database_url)
    async with conn, conn.transaction():
        await conn.execute(SQL["backfill_keys_stage"].sql)
        async with conn.cursor().copy(SQL["backfill_keys_copy"].sql) as copy:
            for ord_, key in enumerate(keys):
                await copy.write_row((ord_, key))
        row = await (await conn.execute(SQL["backfill_keys_new"].sql, {"queue_id": task.queue_id})).fetchone()
        assert row is not None
        ords: list[int] = row[0]
        return ords


def _write_rows(task: _Task, items: Iterable[tuple[str, Any]]) -> Iterator[tuple[int, int, int]]:
    """Pass 2, per task, in one transaction: (enqueued, already there, duplicates by dedup id)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    first_try = context is not None and context.attemptNumber() == 0 and context.partitionId() == 0
    staged = [row for tag, row in items if tag == _ROW]
    if not staged:
        yield 0, 0, 0
        return
    yield asyncio.run(_enqueue(task, staged, task.fault if first_try else None))


async def _enqueue(task: _Task, rows: list[StagedRow], fault: Fault | None) -> tuple[int, int, int]:
    import psycopg
    from psycopg.rows import dict_row

    from app.db import messages as mdb
    from app.db.queues import queue_get

    conn = await psycopg.AsyncConnection.connect(task.database_url, row_factory=dict_row, autocommit=True)
    async with conn:
        async with conn.transaction():
            # As a send: hold the queue (key-share) so that it is not deleted under the task.
            queue = await queue_get(conn, task.queue, for_send=True)
            if queue is None or queue.id != task.queue_id:
                raise PipelineError(f"queue {task.queue} was deleted during the backfill")
            staged = await mdb.message_stage(conn, rows)
            already = await mdb.message_stage_claim(conn, queue.id)
            outcome: list[tuple[int, bool]] = []
            if staged > already:
                outcome = await mdb.message_enqueue(
                    conn, queue.id, queue.fifo, mdb.StagedEntries(), task.dedup_window, None
                )
            if fault == "before_commit":
                raise InjectedFailure("injected failure before the commit (test)")
        enqueued = sum(1 for _, inserted in outcome if inserted)
        if enqueued:
            # As after a send's commit: wake long-polling receivers in every service process.
            await mdb.queue_wake(conn, queue.id)
        if fault == "after_commit":
            raise InjectedFailure("injected failure after the commit (test)")
    return enqueued, already, staged - already - enqueued
