"""`pqs pipeline backfill`: rows of Parquet, CSV or JSON-lines files -> messages of a queue.

Rows enter the queue through the API's enqueue path: each row is checked by the API's rules
(body, attributes, group and dedup ids, sizes; content-based dedup ids too), and each Spark task
stages its rows and enqueues them with `message_enqueue_staged` (app/db/messages.py). That is
not the function a send calls (`message_enqueue`) but its sibling: the two share
`group_lock_for_send` (a FIFO queue's groups locked in order before sequence numbers are drawn)
and the `message_insert` SQL block, here with the staging table as its entries and a count as
its answer. So dedup windows, FIFO groups (sequence numbers in row order) and long-poll wake-ups
(a NOTIFY after the commit) behave as for a send. Where Spark can prove that the API's
`check_entry` accepts a row and what canonical JSON it makes of it (most rows of Parquet and CSV
files, see staging.py), Spark writes the row's staging text in the JVM; every other row is
checked, and refused, by `check_entry` itself in Python. One transaction per task: COPY the
rows' backfill keys into a temporary table and claim them, COPY the rows whose key was claimed
into another, one insert (into a queue that had no backfill when the run began, the rows are
COPYed as they arrive, before the claim, and staged again only if some keys were claimed
already). Spark hands a task its rows as Arrow record batches (handed(), mapInArrow), and the
task builds its COPY text with Arrow's kernels: Python touches a row only when Spark did not
stage it or when a key repeats.

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

Nothing is written unless every row can be enqueued: a first pass counts the rows and checks
the new ones that Spark could not vouch for with `check_entry`, and refuses the run with the
reasons (a FIFO queue's rows without a dedup id, for example). When the queue had backfills
before, it looks up every row's key (read only), and a re-run, with no new row, ends there. The
second pass reads the source again, so the source must not change during a run. Into a queue
that had no backfill, where Spark vouches for every row, the first pass is skipped: the second
one's shuffle stops the run before any task writes if a row needs Python after all (see
run_backfill).

Measured with `pqs bench pipeline --history-rows 100k --backfill-kind fifo|standard` (2 cores,
fsync on; README "Figures"): 1M rows into a FIFO queue with 1,000 groups and a dedup id per row
in 26.1-27.7 s on a day the code before the plain claims took 31.0-34.7 s, into a standard queue
in 17.3-18.7 s (19.0-20.6 s before); re-runs, 0 enqueued, in 7.9-10.6 s. With the rows as
strings and staged as they arrive, on a later day: FIFO 24.3-25.2 s against 25.0-27.5 s,
standard 15.9-16.4 s against 17.2-17.4 s, re-runs 6.1-9.6 s. With the JVM on ParallelGC and pass
1 counting by the staging test alone (2026-11-25, a fast day): FIFO 18.5-19.6 s, standard 13.3 s,
re-runs 5.0-6.5 s; after the default bench's 10M-row history, FIFO 20.4-21.3 s. Without the
count pass (a queue with no backfill before), on another fast day: 20.3-22.5 s after that
history, re-runs 4.8-5.5 s (README "Figures": where the CPU goes, and what did not help).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import itertools
import json
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Literal

from app.domain import QueueAttributes, SendEntry
from app.errors import PqsError
from app.ids import random_uuid_hex
from app.pipeline.session import PipelineError
from app.pipeline.staging import copy_text, staged_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from app.db.rows import Conn
    from app.domain import Queue
    from app.pipeline.progress import Progress

FORMATS = ("parquet", "csv", "json")
SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
EXAMPLES = 5
# The error a vouched pass 2 stops with when a row needs Python after all (see run_backfill).
UNVOUCHED = "pqs-backfill: a row needs the API's checks in Python"
COPY_CHUNK_ROWS = 20_000  # lines per write to a COPY stream
# A backfill's tasks (in each pass) per core Spark has: the default of --partitions. A task of the
# pass that enqueues spends most of its time in PostgreSQL's insert, one backend at a time, so
# while the last task runs alone a core idles; smaller tasks shorten that tail. Measured (README,
# "seventh round"), `pqs bench pipeline` on 2 cores, alternating: 1M FIFO rows in 34.3-35.1 s
# with 4 tasks, 30.2-33.2 s with 12.
TASKS_PER_CORE = 6
KEY_PREFIX = "\\\\x"  # a bytea's hex digits follow; COPY text doubles the backslash
# What a task of pass 2 and of pass 1 answers (mapInArrow's output, in Spark's DDL).
WRITTEN = "enqueued long, already long, duplicates long"
CHECKED = "refused long, new long, examples array<string>, rows long"
# A task's transaction: memory for sorting and staging its rows (see backfill_session).
SESSION = {"work_mem": "128MB", "temp_buffers": "256MB"}
_ATTRIBUTES = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
# Where the test hook (Fault) fails a task: inside its transaction, after the insert, or after
# the commit.
FaultPoint = Literal["before_commit", "after_commit"]


class BackfillRefused(PipelineError):
    """Some rows cannot be enqueued; nothing was written."""


class InjectedFailure(RuntimeError):
    """The failure a test asked for (see Fault)."""


@dataclass(frozen=True)
class Fault:
    """A test hook: the first attempt of task 0 (when it has rows) fails at `when`, before or
    after its commit. It first appends "<when> <messages it enqueued>" to the file `record`: the
    task runs in a Spark Python worker, so a file is how a test learns that the failure happened."""

    when: FaultPoint
    record: str

    def inject(self, when: FaultPoint, enqueued: int) -> None:
        """Record the failure and raise it, if it is asked for at `when`."""
        if when != self.when:
            return
        with Path(self.record).open("a", encoding="utf-8") as record:
            record.write(f"{when} {enqueued}\n")
        raise InjectedFailure(f"injected failure {when.replace('_', ' ')} (test)")


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

    def mapped(self) -> frozenset[str]:
        """The columns that are not part of a default body."""
        return frozenset(c for c in (self.group_id, self.dedup_id, self.attributes) if c)


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


def records(
    spark: SparkSession, source: str, fmt: str, mapping: Mapping, attrs: QueueAttributes | None = None
) -> tuple[DataFrame, bool]:
    """The source as one JSON object per row (`record`, nulls kept), with the columns Spark
    needs for placing rows: `group_id` (FIFO), `identity` (hex SHA-256) and the row's place in
    FIFO order (`position`, then `position_text`); with `attrs`, also the row's staging text
    where Spark can make it (`staged`, `dedup_key`: see staging.py; null: Python checks the row),
    and whether Python checks it (`python`). Also whether Spark can stage any row at all (False:
    every row goes to Python)."""
    from pyspark.sql import functions as F

    def value(name: str) -> Column:
        if fmt == "json":
            return F.get_json_object("record", f"$['{name}']")
        return F.col(f"`{name}`").cast("string")

    nothing = F.lit(None).cast("string")
    staged: tuple[Column, Column, Column] | None = None
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
        if attrs is not None and mapping.attributes is None and (mapping.body is None or not mapping.body_text):
            staged = staged_columns(raw, mapping.body, mapping.group_id, mapping.dedup_id, mapping.mapped(), attrs)
        record = F.to_json(F.struct(*[F.col(f"`{c}`") for c in raw.columns]), {"ignoreNullFields": "false"})
        frame = raw.select(
            record.alias("record"),
            *[F.col(f"`{c}`") for c in mapping.columns()],
            *((staged[0].alias("staged"), staged[1].alias("dedup_key"), staged[2].alias("python")) if staged else ()),
        )
    if staged is None:
        frame = frame.withColumn("staged", nothing).withColumn("dedup_key", nothing).withColumn("python", F.lit(True))
    identity = F.sha2(value(mapping.key), 256) if mapping.key else F.sha2(F.col("record"), 256)
    if mapping.order_by is None:
        position: list[Column] = [F.monotonically_increasing_id(), nothing]
    elif fmt == "parquet":
        position = [F.col(f"`{mapping.order_by}`"), nothing]
    else:
        # Text: numbers in numeric order, anything else (ISO times, say) in text order.
        position = [value(mapping.order_by).cast("double"), value(mapping.order_by)]
    frame = frame.select(
        "record",
        (value(mapping.group_id) if mapping.group_id else nothing).alias("group_id"),
        identity.alias("identity"),
        position[0].alias("position"),
        position[1].alias("position_text"),
        "staged",
        "dedup_key",
        "python",
    )
    return frame, staged is not None


def placed(rows: DataFrame, fifo: bool, partitions: int, *, staged: bool = True, vouched: bool = False) -> DataFrame:
    """Rows split into tasks so that identical rows (same identity) meet in one task: FIFO by
    group (a group's rows then stay in one task, in their order), standard by identity. Only
    what the tasks need travels: `record` only for the rows Python stages, and the backfill key
    of a row's first occurrence (`key0`, see _keys). Without `staged` (pass 1, which only
    checks), not the staging text either but whether Python stages the row (`python`): Spark
    then does not build the text (measured: about 1.8 of the 6 CPU-seconds of the map side of
    1M FIFO rows).

    `vouched`: every row must be one Spark stages; a row that needs Python fails the map side
    of the shuffle with UNVOUCHED, before any task of the rows' side has started (a stage's
    tasks start only once the stage before it is complete)."""
    from pyspark.sql import functions as F

    first = F.sha2(F.concat(F.unhex("identity"), F.unhex(F.lit("00" * 8))), 256)
    # (the test reuses the staging text the row needs anyway: a filter on `python` would make
    # Spark compute the body's JSON twice)
    text = F.coalesce("staged", F.raise_error(F.lit(UNVOUCHED))) if vouched else F.col("staged")
    carried = [text.alias("staged"), F.col("dedup_key")] if staged else [F.col("python")]
    slim = rows.select(
        F.concat(F.lit(KEY_PREFIX), first).alias("key0"),
        "identity",
        *carried,
        F.when(F.col("python"), F.col("record")).alias("record"),
        "group_id",
        "position",
        "position_text",
    )
    if fifo:
        return slim.repartition(partitions, "group_id").sortWithinPartitions("position", "position_text")
    return slim.repartition(partitions, "identity")


def handed(spread: DataFrame, staged: bool) -> DataFrame:
    """The placed rows as a task reads them, in their order: `key0`, `identity`, `record`
    (null but for a row Python stages) and, with `staged` (rows placed with their staging
    text), the staging text and dedup key Spark made (null for a row Python stages). The tasks
    get them as Arrow record batches (mapInArrow): column by column, no Python object per row,
    and a task builds its COPY text with Arrow's kernels (_copy_lines). Measured, 1M FIFO rows
    handed over and made into COPY text, no database, warm: 9.9 CPU-s of JVM and 6.5 of Python
    as one UTF-8 string per row, 8.0 and 1.6 as Arrow."""
    return spread.select("key0", "identity", "record", *(("staged", "dedup_key") if staged else ()))


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
        mapped=mapping.mapped(),
        look_up=_backfilled_before(database_url, queue.id),
    )
    parts = partitions or TASKS_PER_CORE * max(1, spark.sparkContext.defaultParallelism)
    rows, spark_stages = records(spark, source, fmt, mapping, queue.attributes)
    write = partial(_write_rows, task)
    if spark_stages and not task.look_up and not mapping.key:
        # Into a queue no backfill had enqueued into, when Spark vouches for every row there is
        # nothing for a first pass to look up or check: pass 2 runs at once, and the shuffle's
        # map side stops it, before any row is written, if a row needs Python after all; then
        # the run goes on as below. Saves a read of the source (the count pass: 0.9-2.1 s of a
        # FIFO backfill of 1M rows here).
        try:
            with progress.step(f"backfill {queue.name}: enqueue the rows (Spark vouches for them all)"):
                outcomes = handed(placed(rows, queue.fifo, parts, vouched=True), staged=True).mapInArrow(write, WRITTEN)
                return _result(queue.name, outcomes.collect())
        except Exception as exc:  # Spark's error classes differ by version and deployment
            if UNVOUCHED not in str(exc):
                raise
            progress.note(f"backfill {queue.name}: some rows need the API's checks in Python; checking every row first")
    spread = placed(rows, queue.fifo, parts)
    checking = placed(rows, queue.fifo, parts, staged=False)
    # Pass 1 checks, with the API's check_entry, the new rows (key not claimed yet) that Spark
    # did not stage: when the queue had backfills before, it looks up every row's key (read only;
    # a re-run, with no new row, ends there) and counts the rows as it goes, else it counts them
    # first and checks the rows Spark did not stage. Pass 2 enqueues.
    with progress.step(f"backfill {queue.name}: count rows and check them"):
        total = in_python = 0
        if not task.look_up:
            counted = rows.agg(F.count(F.lit(1)).alias("rows"), F.count(F.when(F.col("python"), 1)).alias("python"))
            first = counted.first()
            assert first is not None
            total, in_python = int(first["rows"]), int(first["python"])
        if mapping.key:
            repeated = rows.groupBy("identity").count().where(F.col("count") > 1).count()
            if repeated:
                raise BackfillRefused(
                    f"{repeated:,} values of the key column {mapping.key!r} are not unique; nothing was written"
                )
        summaries: list[tuple[Any, ...]] = []
        if task.look_up or in_python:
            looked_at = checking if task.look_up else checking.where(F.col("python"))
            checked = handed(looked_at, staged=False).mapInArrow(partial(_check, task), CHECKED)
            summaries = [tuple(s) for s in checked.collect()]
        if task.look_up:
            total = sum(s[3] for s in summaries)
    refused = sum(s[0] for s in summaries)
    if refused:
        examples = [e for s in summaries for e in s[2]][:EXAMPLES]
        raise BackfillRefused(
            f"{refused:,} of {total:,} rows cannot be enqueued into {queue.name}; nothing was written. "
            + "; ".join(examples)
        )
    if task.look_up and not sum(s[1] for s in summaries):
        return BackfillResult(queue=queue.name, rows=total, already=total)
    with progress.step(f"backfill {queue.name}: enqueue {total:,} rows (those not there yet)"):
        return _result(queue.name, handed(spread, staged=True).mapInArrow(write, WRITTEN).collect())


def _result(queue: str, outcomes: Sequence[Sequence[int]]) -> BackfillResult:
    """A run's result from its tasks' (enqueued, already there, duplicates by dedup id): a
    task's rows are the three together."""
    return BackfillResult(
        queue=queue,
        rows=sum(sum(o) for o in outcomes),
        enqueued=sum(o[0] for o in outcomes),
        already=sum(o[1] for o in outcomes),
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


def python_staged(task: _Task, text: str) -> tuple[str, str | None]:
    """A row Spark did not stage, checked by check_entry: (staged, dedup_key) as staging.py
    makes them (PqsError or PipelineError when the API would refuse it)."""
    from app.service.messages import dedup_scope_key

    entry, (dedup_id, delay, body_json) = _entry(task, text)
    scope_key = dedup_scope_key(task.attributes, entry.group_id)
    attributes = _ATTRIBUTES.encode(entry.attributes) if entry.attributes else "{}"
    fields = (entry.group_id, dedup_id, scope_key, body_json.decode(), attributes)
    staged = "\t".join([*(copy_text(f) for f in fields), str(delay)])
    return staged, None if dedup_id is None else f"{scope_key}\t{dedup_id}"


def _key(key0: str, identity: str, seen: dict[str, int]) -> str:
    """A row's backfill key as COPY text: SHA-256 of its identity and of its occurrence number
    among the task's rows of that identity so far (8 bytes, big-endian; all of them are in this
    task, see placed()). Spark computed it for a first occurrence (`key0`); rows repeated
    whole are rare, their keys are computed here. `seen` counts the identities."""
    occurrence = seen.get(identity, 0)
    seen[identity] = occurrence + 1
    if not occurrence:
        return key0
    return KEY_PREFIX + hashlib.sha256(bytes.fromhex(identity) + occurrence.to_bytes(8, "big")).hexdigest()


def _keys(key0: pa.ChunkedArray, identity: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    """The backfill keys of a task's rows (COPY text), in their order: `key0` unless an identity
    repeats (a row repeated whole, rare), then counted by _key."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pc.count_distinct(identity).as_py() == len(identity):
        return key0
    seen: dict[str, int] = {}
    return pa.array(
        [_key(k, i, seen) for k, i in zip(key0.to_pylist(), identity.to_pylist(), strict=True)], pa.string()
    )


def _repeats(dedup: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """Whether each row's dedup key is an earlier row's ("t"/"f"; as in a send's batch, a repeat is
    answered as a duplicate, not inserted); None when no key repeats (the rule)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keyed = len(dedup) - dedup.null_count
    if not keyed or pc.count_distinct(dedup).as_py() == keyed:
        return None
    seen: set[str] = set()
    flags: list[str] = []
    for key in dedup.to_pylist():
        flags.append("t" if key is not None and key in seen else "f")
        if key is not None:
            seen.add(key)
    return pa.array(flags, pa.string())


def _copy_lines(*columns: pa.Array | pa.Scalar) -> memoryview:
    """COPY text of rows: the text columns (a scalar: the same for every row) joined by tabs, a
    line each, made by Arrow's kernels; a view of the result's bytes. As large strings (64-bit
    offsets): rows of bodies up to a queue's largest can pass 2 GB in one chunk."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wide = pa.large_string()
    joined = pc.binary_join_element_wise(*(c.cast(wide) for c in columns), pa.scalar("\t", wide))
    lines = pc.binary_join_element_wise(joined, pa.scalar("", wide), pa.scalar("\n", wide))  # a line, its break
    _, offsets, data = lines.buffers()
    at = memoryview(offsets).cast("q")
    return memoryview(data)[at[lines.offset] : at[lines.offset + len(lines)]]


def _positions(start: int, count: int) -> pa.Array:
    import pyarrow as pa

    return pa.array(range(start, start + count), pa.int64())


def _key_text(keys: pa.ChunkedArray | pa.Array) -> Iterator[memoryview]:
    """The task's keys as COPY text (position, key), in chunks."""
    import pyarrow as pa

    for start in range(0, len(keys), COPY_CHUNK_ROWS):
        part = keys.slice(start, COPY_CHUNK_ROWS)
        if isinstance(part, pa.ChunkedArray):
            part = part.combine_chunks()
        yield _copy_lines(_positions(start, len(part)).cast(pa.string()), part)


def _stage_text(positions: pa.Array, staged: pa.Array, repeat: pa.Array | None) -> Iterator[memoryview]:
    """The staging table's COPY text of rows, in chunks: position, a new message id, the row's
    staged text, and whether an earlier row of these has its dedup key (_repeats; None: none)."""
    import pyarrow as pa

    for start in range(0, len(positions), COPY_CHUNK_ROWS):
        count = min(COPY_CHUNK_ROWS, len(positions) - start)
        # one draw of random ids for a chunk, as a send's batch, as 32 hex digits each
        offsets = pa.py_buffer(array("i", range(0, 32 * count + 1, 32)).tobytes())
        ids = pa.StringArray.from_buffers(count, offsets, pa.py_buffer(random_uuid_hex(count).encode()))
        flags = pa.scalar("f") if repeat is None else repeat.slice(start, count)
        yield _copy_lines(positions.slice(start, count).cast(pa.string()), ids, staged.slice(start, count), flags)


class _Rows:
    """A task's rows as Spark hands them over (handed(), Arrow record batches), kept as Arrow
    arrays: key0 and identity (for the backfill keys), and with staging text, every row's
    staged text and dedup key (a row Spark did not stage is staged by python_staged as it
    arrives) or, without (pass 1), the records Python checks."""

    def __init__(self, task: _Task) -> None:
        self.task = task
        self.count = 0
        self.columns: dict[str, list[pa.Array]] = collections.defaultdict(list)

    def add(self, batch: pa.RecordBatch) -> None:
        """Keep a batch's rows."""
        for name in ("key0", "identity", "record"):
            self.columns[name].append(batch.column(name))
        if "staged" in batch.schema.names:
            staged, dedup = self._filled(batch)
            self.columns["staged"].append(staged)
            self.columns["dedup_key"].append(dedup)
        self.count += batch.num_rows

    def _filled(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
        """The batch's staged text and dedup keys, those of the rows Spark did not stage made by
        python_staged (checked in pass 1: a refusal now means the source changed during the run)."""
        import pyarrow as pa

        staged, dedup = batch.column("staged"), batch.column("dedup_key")
        if not staged.null_count:
            return staged, dedup
        texts, keys = staged.to_pylist(), dedup.to_pylist()
        for i, record in enumerate(batch.column("record").to_pylist()):
            if texts[i] is None:
                texts[i], keys[i] = python_staged(self.task, record)
        return pa.array(texts, pa.string()), pa.array(keys, pa.string())

    def column(self, name: str) -> pa.ChunkedArray:
        import pyarrow as pa

        return pa.chunked_array(self.columns[name], pa.string())

    def arriving(self, batches: Iterable[pa.RecordBatch]) -> Iterator[memoryview]:
        """Keep the batches as they arrive, and yield each one's staging-table COPY text (no
        repeats marked: see repeated())."""
        for batch in batches:
            start = self.count
            self.add(batch)
            yield from _stage_text(_positions(start, batch.num_rows), self.columns["staged"][-1], None)

    def keys(self) -> pa.ChunkedArray | pa.Array:
        return _keys(self.column("key0"), self.column("identity"))

    def repeated(self) -> bool:
        """Whether a dedup key repeats among the rows."""
        return _repeats(self.column("dedup_key")) is not None

    def stage_text(self, ords: Sequence[int]) -> Iterator[memoryview]:
        """The staging table's COPY text of the rows at `ords` (in order), taken a chunk at a time."""
        import pyarrow as pa

        positions = pa.array(ords, pa.int64())
        staged = self.column("staged").cast(pa.large_string())
        repeat = _repeats(self.column("dedup_key").take(positions))
        for start in range(0, len(positions), COPY_CHUNK_ROWS):
            part = positions.slice(start, COPY_CHUNK_ROWS)
            flags = None if repeat is None else repeat.slice(start, len(part))
            yield from _stage_text(part, staged.take(part).combine_chunks(), flags)


def _check(task: _Task, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Pass 1, per task, over the rows Spark did not stage (and, with `look_up`, the others):
    check the new ones (key not claimed yet) with the API's rules; a batch of one row (CHECKED):
    refused, new rows, a few reasons, rows read. `batches` are handed() without staged text."""
    import pyarrow as pa

    rows = _Rows(task)
    for batch in batches:
        rows.add(batch)
    new = asyncio.run(_new_rows(task, rows.keys())) if task.look_up and rows.count else range(rows.count)
    refused = 0
    examples: list[str] = []
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
    summary = {"refused": [refused], "new": [len(new)], "examples": [examples], "rows": [rows.count]}
    yield pa.RecordBatch.from_pydict(summary, schema=_arrow_schema(CHECKED))


def _arrow_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a task's answer (the Spark DDL of its columns: long, array<string>)."""
    import pyarrow as pa

    types = {"long": pa.int64(), "array<string>": pa.list_(pa.string())}
    return pa.schema([(name, types[kind]) for name, kind in (c.strip().split(" ", 1) for c in ddl.split(","))])


async def _new_rows(task: _Task, keys: pa.ChunkedArray | pa.Array) -> Sequence[int]:
    """Positions of the rows whose backfill key is not claimed yet (a read-only look)."""
    import psycopg

    from app.pipeline.exports import SQL

    conn = await psycopg.AsyncConnection.connect(task.database_url)
    async with conn, conn.transaction():
        await conn.execute(SQL["backfill_keys_stage"].sql)
        async with conn.cursor().copy(SQL["backfill_keys_copy"].sql) as copy:
            for chunk in _key_text(keys):
                await copy.write(chunk)
        row = await (await conn.execute(SQL["backfill_keys_new"].sql, {"queue_id": task.queue_id})).fetchone()
        assert row is not None
        ords: list[int] = row[0]
        return ords


def _write_rows(task: _Task, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Pass 2, per task, in one transaction; a batch of one row (WRITTEN): enqueued, already
    there, duplicates by dedup id. `batches` are handed() with staged text."""
    import pyarrow as pa
    from pyspark import TaskContext

    context = TaskContext.get()
    first_try = context is not None and context.attemptNumber() == 0 and context.partitionId() == 0
    arriving = (b for b in batches if b.num_rows)
    first = next(arriving, None)
    outcome = (0, 0, 0)
    if first is not None:
        fault = task.fault if first_try else None
        outcome = asyncio.run(_enqueue(task, itertools.chain((first,), arriving), fault))
    yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64()) for n in outcome], schema=_arrow_schema(WRITTEN))


async def _claim(conn: Conn, queue_id: int, count: int = 0) -> list[int]:
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


async def _enqueue(task: _Task, batches: Iterable[pa.RecordBatch], fault: Fault | None) -> tuple[int, int, int]:
    """A task's transaction: claim the keys of its rows (handed() batches) and enqueue the rows
    whose key it claimed; (enqueued, already there, duplicates by dedup id)."""
    import psycopg
    from psycopg.rows import dict_row

    from app.db import messages as mdb
    from app.db.queues import queue_get
    from app.pipeline.exports import SQL

    conn = await psycopg.AsyncConnection.connect(task.database_url, row_factory=dict_row, autocommit=True)
    async with conn:
        async with conn.transaction():
            # As a send: hold the queue (key-share) so that it is not deleted under the task.
            queue = await queue_get(conn, task.queue, for_send=True)
            if queue is None or queue.id != task.queue_id:
                raise PipelineError(f"queue {task.queue} was deleted during the backfill")
            await conn.execute(SQL["backfill_session"].sql, SESSION)
            rows = _Rows(task)
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
                for chunk in _key_text(rows.keys()):
                    await copy.write(chunk)
            ords = await _claim(conn, queue.id, rows.count if streamed else 0)
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
                enqueued = await mdb.message_enqueue_staged(conn, queue.id, queue.fifo, task.dedup_window, None)
            if fault is not None:
                fault.inject("before_commit", enqueued)
        if enqueued:
            # As after a send's commit: wake long-polling receivers in every service process.
            await mdb.queue_wake(conn, queue.id)
        if fault is not None:
            fault.inject("after_commit", enqueued)
    return enqueued, already, rows.count - already - enqueued
