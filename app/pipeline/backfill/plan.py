"""run_backfill, on Spark's driver: the source read as records, rows placed into tasks so that
identical rows meet, and the two passes (check, then enqueue). See the package docstring."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from app.pipeline.backfill.rows import KEY_PREFIX
from app.pipeline.backfill.source import check_source, csv_line_separator, java_encoding, read_error
from app.pipeline.backfill.spec import BackfillRefused, BackfillResult, Mapping, Task, check_mapping, source_format
from app.pipeline.backfill.task import CHECKED, EXAMPLES, WRITTEN, check_rows, write_rows
from app.pipeline.session import PipelineError
from app.pipeline.staging import staged_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from app.domain import Queue, QueueAttributes
    from app.pipeline.backfill.faults import Fault
    from app.pipeline.progress import Progress

# The error a vouched pass 2 stops with when a row needs Python after all (see run_backfill).
UNVOUCHED = "pqs-backfill: a row needs the API's checks in Python"

# A backfill's tasks (in each pass) per core Spark has: the default of --partitions. A task of the
# pass that enqueues spends most of its time in PostgreSQL's insert, one backend at a time, so
# while the last task runs alone a core idles; smaller tasks shorten that tail.
TASKS_PER_CORE = 6
# Spark's nullValue for CSV: a text no field holds (the API refuses NUL in a body anyway), so that
# only a field with nothing in it is null; Spark reads one as NO_VALUE, then as null.
NO_VALUE = "\u0000"
# The steps of a run, as its progress shows them (ONE_PASS into a queue that never had a backfill).
READ = "read the source"
ONE_PASS = "enqueue, Spark checking each row"
CHECK = "count and check rows"
ENQUEUE = "enqueue rows"


def records(
    spark: SparkSession,
    source: str,
    fmt: str,
    mapping: Mapping,
    attrs: QueueAttributes | None = None,
    encoding: str = "utf-8",
    line_separator: str | None = None,
    located: bool = False,
) -> tuple[DataFrame, bool]:
    """The source as one JSON object per row (`record`, nulls kept), with the columns Spark
    needs for placing rows: `group_id` (FIFO), `identity` (hex SHA-256) and the row's place in
    FIFO order (`position`, then `position_text`); with `attrs`, also the row's staging text
    where Spark can make it (`staged`, `dedup_key`: see staging.py; null: Python checks the row),
    and whether Python checks it (`python`). Also whether Spark can stage any row at all (False:
    every row goes to Python). With `located`, also where each row is in the source (`_pqs_file`,
    `_pqs_place`: see _with_places); only for saying where refused rows are (it costs a sort)."""
    from pyspark.sql import functions as F

    def value(name: str) -> Column:
        if fmt == "json":
            return F.get_json_object("record", f"$['{name}']")
        return F.col(f"`{name}`").cast("string")

    nothing = F.lit(None).cast("string")
    staged: tuple[Column, Column, Column] | None = None
    if fmt == "json":
        # Lines as they are: Spark's schema inference would drop null fields and merge shapes.
        lines = spark.read.text(source)
        if located:
            lines = _with_places(lines, fmt)
        frame = lines.where(F.trim("value") != "").withColumnRenamed("value", "record")
    else:
        reader = spark.read.option("mode", "FAILFAST")
        if fmt == "csv":
            # RFC 4180: a header line, quotes doubled inside quoted fields, line breaks inside
            # quoted fields (multiLine: a record may span lines, as free text exports have it),
            # kept as they are when the records' own line ending is known; every value is text,
            # in the stated encoding. "" is the empty text and a field with nothing in it null
            # (Spark would read both as null with its default nullValue, the empty text).
            reader = (
                reader.option("header", "true")
                .option("escape", '"')
                .option("multiLine", "true")
                .option("encoding", java_encoding(encoding))
                .option("nullValue", NO_VALUE)
            )
            raw = (reader.option("lineSep", line_separator) if line_separator else reader).csv(source)
        else:
            raw = reader.parquet(source)
        missing = [c for c in mapping.columns() if c not in raw.columns]
        if missing:
            raise PipelineError(f"{source} has no column {', '.join(missing)} (its columns: {', '.join(raw.columns)})")
        if attrs is not None and mapping.attributes is None and (mapping.body is None or not mapping.body_text):
            staged = staged_columns(raw, mapping.body, mapping.group_id, mapping.dedup_id, mapping.mapped(), attrs)
        record = F.to_json(F.struct(*[F.col(f"`{c}`") for c in raw.columns]), {"ignoreNullFields": "false"})
        if located:
            raw = _with_places(raw, fmt)
        frame = raw.select(
            *(("_pqs_file", "_pqs_place") if located else ()),
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
        *(("_pqs_file", "_pqs_place") if located else ()),
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


def _with_places(raw: DataFrame, fmt: str) -> DataFrame:
    """`raw` (as Spark read it) with where each row is in its file: `_pqs_file` (Spark's URI) and
    `_pqs_place`, the row index of Parquet (from 0), the line of JSON lines or CSV. A CSV record
    may span lines: its line is the one it starts on, counted from the header's line and the
    line breaks inside the records before it (RFC 4180's quoted values); a blank line between
    records is not seen. Lines are counted in the order a file is read: by the start of the
    block a task reads (a CSV file is one block), then the order within it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    columns = raw.columns
    framed = raw.select(
        "*",
        F.col("_metadata.file_path").alias("_pqs_file"),
        F.col("_metadata.file_block_start").alias("_pqs_block"),
        *((F.col("_metadata.row_index").alias("_pqs_index"),) if fmt == "parquet" else ()),
        F.monotonically_increasing_id().alias("_pqs_order"),
    )
    in_file = Window.partitionBy("_pqs_file").orderBy("_pqs_block", "_pqs_order")
    if fmt == "parquet":
        place = F.col("_pqs_index")
    elif fmt == "json":
        place = F.row_number().over(in_file)
    else:
        breaks = [F.coalesce(F.size(F.split(F.col(f"`{c}`"), "\\r\\n|\\r|\\n")) - 1, F.lit(0)) for c in columns]
        before = F.sum(F.lit(1) + sum(breaks, F.lit(0))).over(in_file.rowsBetween(Window.unboundedPreceding, -1))
        place = F.lit(2) + F.coalesce(before, F.lit(0))
    return framed.withColumn("_pqs_place", place).drop("_pqs_block", "_pqs_order", "_pqs_index")


def placed(rows: DataFrame, fifo: bool, partitions: int, *, staged: bool = True, vouched: bool = False) -> DataFrame:
    """Rows split into tasks so that identical rows (same identity) meet in one task: FIFO by
    group (a group's rows then stay in one task, in their order), standard by identity. Only
    what the tasks need travels: `record` only for the rows Python stages, and the backfill key
    of a row's first occurrence (`key0`, see rows._keys). Without `staged` (pass 1, which only
    checks), not the staging text either but whether Python stages the row (`python`): Spark
    then does not build the text, a large part of the map side's work; nor are a group's rows
    sorted, as a check does not depend on their order (keys of identical rows do not either).

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
        grouped = slim.repartition(partitions, "group_id")
        return grouped.sortWithinPartitions("position", "position_text") if staged else grouped
    return slim.repartition(partitions, "identity")


def handed(spread: DataFrame, staged: bool) -> DataFrame:
    """The placed rows as a task reads them, in their order: `key0`, `identity`, `record`
    (null but for a row Python stages) and, with `staged` (rows placed with their staging
    text), the staging text and dedup key Spark made (null for a row Python stages). The tasks
    get them as Arrow record batches (mapInArrow): column by column, no Python object per row,
    and a task builds its COPY text with Arrow's kernels (rows.copy_lines): less work for the JVM
    than a UTF-8 string per row, and far less for Python."""
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
    encoding: str = "utf-8",
) -> BackfillResult:
    """Enqueue every row of `source` into `queue_name` once, however often this runs. A CSV is
    read as RFC 4180 in `encoding` (app/pipeline/backfill/source.py: ENCODINGS); a source Spark
    cannot parse is a PipelineError saying where."""
    try:
        return _backfill(spark, database_url, queue_name, source, progress, fmt, mapping, partitions, dedup_window,
                         fault, encoding)  # fmt: skip
    except PipelineError:
        raise
    except Exception as exc:  # Spark's exception classes differ by version and deployment
        told = read_error(exc, source)
        if told is None:
            raise
        raise told from None


def _backfill(
    spark: SparkSession,
    database_url: str,
    queue_name: str,
    source: str,
    progress: Progress,
    fmt: str | None,
    mapping: Mapping | None,
    partitions: int | None,
    dedup_window: int,
    fault: Fault | None,
    encoding: str,
) -> BackfillResult:
    from pyspark.sql import functions as F

    mapping = mapping or Mapping()
    fmt = source_format(source, fmt)
    check_source(source, fmt, encoding)
    queue = existing_queue(database_url, queue_name)
    check_mapping(queue, mapping, fmt)
    progress.attach(spark.sparkContext)
    look_up = _backfilled_before(database_url, queue.id)
    # Into a queue no backfill had enqueued into, Spark may vouch for every row (see below): the
    # run then tries to enqueue in one pass first, and has both passes to fall back on.
    one_pass = fmt != "json" and not mapping.key and not look_up
    progress.plan("backfill", [READ, ONE_PASS, CHECK, ENQUEUE] if one_pass else [READ, CHECK, ENQUEUE])
    task = Task(
        database_url=database_url,
        queue=queue.name,
        queue_id=queue.id,
        attributes=queue.attributes,
        mapping=mapping,
        parse_string_body=fmt != "json" and not mapping.body_text,
        dedup_window=dedup_window,
        fault=fault,
        mapped=mapping.mapped(),
        look_up=look_up,
    )
    parts = partitions or default_tasks(spark.sparkContext.defaultParallelism)
    with progress.step(READ):
        separator = csv_line_separator(source, encoding) if fmt == "csv" else None
        rows, spark_stages = records(spark, source, fmt, mapping, queue.attributes, encoding, separator)
    write = partial(write_rows, task)
    if one_pass and not spark_stages:
        progress.skip(ONE_PASS, "Spark cannot stage these rows: each is checked in Python")
    if one_pass and spark_stages:
        # Into a queue no backfill had enqueued into, when Spark vouches for every row there is
        # nothing for a first pass to look up or check: pass 2 runs at once, and the shuffle's
        # map side stops it, before any row is written, if a row needs Python after all; then
        # the run goes on as below. Saves a read of the source (the count pass).
        try:
            with progress.step(ONE_PASS) as step:
                outcomes = handed(placed(rows, queue.fifo, parts, vouched=True), staged=True).mapInArrow(write, WRITTEN)
                result = _result(queue.name, outcomes.collect())
                step.rows = result.rows
            progress.skip(CHECK, "Spark checked every row")
            progress.skip(ENQUEUE, "every row is in the queue")
            return result
        except Exception as exc:  # Spark's error classes differ by version and deployment
            if UNVOUCHED not in str(exc):
                raise
            progress.note(f"backfill {queue.name}: some rows need the API's checks in Python; checking every row first")
    spread = placed(rows, queue.fifo, parts)
    checking = placed(rows, queue.fifo, look_up_tasks(parts, spark, task.look_up), staged=False)
    # Pass 1 checks, with the API's check_entry, the new rows (key not claimed yet) that Spark
    # did not stage: when the queue had backfills before, it looks up every row's key (read only;
    # a re-run, with no new row, ends there) and counts the rows as it goes, else it counts them
    # first and checks the rows Spark did not stage. Pass 2 enqueues.
    with progress.step(CHECK) as step:
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
            checked = handed(looked_at, staged=False).mapInArrow(partial(check_rows, task), CHECKED)
            summaries = [tuple(s) for s in checked.collect()]
        if task.look_up:
            total = sum(s[3] for s in summaries)
        step.rows = total
    refused = sum(s[0] for s in summaries)
    if refused:
        examples = [(e, row) for s in summaries for e, row in zip(s[2], s[4], strict=True)][:EXAMPLES]
        with progress.step(f"backfill {queue.name}: find the refused rows in {source}"):
            located, _ = records(spark, source, fmt, mapping, None, encoding, separator, located=True)
            where = places(located, [row for _, row in examples], fmt)
        raise BackfillRefused(
            f"{refused:,} of {total:,} rows cannot be enqueued into {queue.name}; nothing was written. "
            + "; ".join(f"{where.get(row, source)}: {e}" for e, row in examples)
        )
    if task.look_up and not sum(s[1] for s in summaries):
        progress.skip(ENQUEUE, "every row was enqueued before")
        return BackfillResult(queue=queue.name, rows=total, already=total)
    with progress.step(ENQUEUE, rows=total) as step:
        result = _result(queue.name, handed(spread, staged=True).mapInArrow(write, WRITTEN).collect())
        step.rows = result.rows
    return result


def default_tasks(parallelism: int) -> int:
    """A backfill's tasks in each pass, by default, on a session of `parallelism` cores."""
    return TASKS_PER_CORE * max(1, parallelism)


def look_up_tasks(parts: int, spark: SparkSession, look_up: bool) -> int:
    """Tasks of pass 1: with `look_up`, one per core Spark has (at most `parts`). Each task's
    look-up (backfill_keys_new) reads the queue's keys, however few of them it has (a join
    against the whole queue's: its 1M keys cost a task about as much as its own 83k), so the
    reading grows with the tasks, not the rows; six per core read them six times over. Without a
    look-up, the check never reaches PostgreSQL, and keeps pass 2's tasks."""
    if not look_up:
        return parts
    return min(parts, max(1, spark.sparkContext.defaultParallelism))


def places(located: DataFrame, identities: list[str], fmt: str) -> dict[str, str]:
    """Where the first row of each identity is in the source: "<file>, line N" (CSV, JSON lines)
    or "<file>, row index N" (Parquet), a local file by its path."""
    from urllib.parse import unquote, urlparse

    from pyspark.sql import functions as F

    first = (
        located.where(F.col("identity").isin(identities))
        .groupBy("identity")
        .agg(F.min(F.struct("_pqs_file", "_pqs_place")).alias("at"))
    )
    what = "row index" if fmt == "parquet" else "line"
    found = {}
    for row in first.collect():
        uri = urlparse(row["at"]["_pqs_file"])
        file = unquote(uri.path) if uri.scheme == "file" else row["at"]["_pqs_file"]
        found[row["identity"]] = f"{file}, {what} {row['at']['_pqs_place']}"
    return found


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


def existing_queue(database_url: str, name: str) -> Queue:
    from app.db.queues import queue_get
    from app.db.sessions import on_connection

    queue = asyncio.run(on_connection(database_url, lambda conn: queue_get(conn, name)))
    if queue is None:
        raise PipelineError(f"queue {name} does not exist (create it first: pqs queue create {name})")
    return queue


def _backfilled_before(database_url: str, queue_id: int) -> bool:
    from app.pipeline.exports import SQL, connect

    with connect(database_url) as conn:
        row = conn.execute(SQL["backfill_keys_any"].sql, {"queue_id": queue_id}).fetchone()
    return bool(row and row["any"])
