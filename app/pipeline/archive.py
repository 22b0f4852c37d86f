"""`pqs pipeline archive`: message history -> Parquet, partitioned by queue and day.

Layout: `<archive>/queue=<name>/day=<yyyy-mm-dd>/batch=<n>/part-<task>.parquet` (days in UTC).
Each batch is one range of history ids (exports.py), cut into Spark tasks that each read their
own range from PostgreSQL into Arrow and write its files with pyarrow (archive_files.py): a
file's name says its batch and task, so a task tried again replaces its files and duplicates
nothing. Before a pending batch is written again, what an interrupted attempt left of it (its
`batch=<n>` directories) is removed; no other batch is touched. A batch is committed (the
watermark moves) only after its files are written and read back, by Spark, with as many rows as
its id range holds in PostgreSQL. A re-run archives only what is past the watermark: nothing,
when history has not grown.

`prune` then deletes the rows of committed batches from PostgreSQL, each batch in one
transaction, and only after reading its rows back from the archive once more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app.pipeline import archive_files, exports
from app.pipeline.progress import Progress
from app.pipeline.session import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

# Ids per batch: bounds a batch's Spark job, and the size of one prune transaction.
MAX_BATCH_IDS = 5_000_000
# Ids per task at most: a task holds its rows in memory (some 300 bytes a row in Arrow, twice
# while it sorts them by partition), and its range covers fewer days, so fewer files.
MAX_TASK_IDS = 500_000
# The steps of a run, as its progress shows them; PRUNE_STEP with --prune.
ARCHIVE_STEPS = ["find new history", "write Parquet, read it back"]
PRUNE_STEP = "prune PostgreSQL"


@dataclass(frozen=True)
class ArchiveResult:
    """What a run did."""

    archive: str
    batches: list[exports.Export] = field(default_factory=list)
    watermark: int = 0
    pruned: int = 0

    @property
    def rows(self) -> int:
        """Rows written by this run."""
        return sum(b.rows or 0 for b in self.batches)


def archive_uri(path: str) -> str:
    """The archive as a URI: a plain path is a local directory; hdfs://, s3a://, file: ... stay."""
    if "://" in path or path.startswith("file:"):
        return path.rstrip("/")
    return Path(path).resolve().as_uri()


def archive_schema() -> StructType:
    """The archive's rows, partition columns included (typed: a queue called "123" stays text)."""
    from pyspark.sql.types import (
        DataType,
        DateType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    types: dict[str, DataType] = {
        "int32": IntegerType(),
        "int64": LongType(),
        "string": StringType(),
        "timestamp": TimestampType(),
        "date": DateType(),
    }
    columns = [*archive_files.FILE_COLUMNS, *archive_files.PARTITION_COLUMNS]
    return StructType([StructField(name, types[kind], True) for name, kind in columns])


def read_archive(spark: SparkSession, uri: str, batch: int | None = None) -> DataFrame:
    """The archive's rows (of one batch: its partitions only are read). An archive without
    files reads as no rows."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    try:
        rows = spark.read.schema(archive_schema()).parquet(uri)
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" not in str(exc):
            raise
        rows = spark.createDataFrame([], archive_schema())
    return rows if batch is None else rows.where(F.col("batch") == int(batch))


def run_archive(
    spark: SparkSession,
    database_url: str,
    archive: str,
    progress: Progress,
    *,
    prune: bool = False,
    partitions: int | None = None,
    max_batch_ids: int = MAX_BATCH_IDS,
    horizon_timeout: float = 60.0,
) -> ArchiveResult:
    """Archive history past the watermark; with `prune`, then delete archived rows."""
    uri = archive_uri(archive)
    progress.attach(spark.sparkContext)
    progress.plan("archive", [*ARCHIVE_STEPS, PRUNE_STEP] if prune else ARCHIVE_STEPS)
    done: list[exports.Export] = []
    with exports.connect(database_url) as conn:
        with progress.step(ARCHIVE_STEPS[0]):
            exports.lock_archive(conn, uri)
            left = exports.pending(conn, uri)
            horizon = exports.history_horizon(conn, horizon_timeout)
            mark = exports.watermark(conn, uri)
        if left is None and mark >= horizon:
            progress.skip(ARCHIVE_STEPS[1], "no history past the watermark")
        else:
            with progress.step(ARCHIVE_STEPS[1]) as step:
                if left is not None:
                    progress.note(
                        f"batch {left.id} (ids {left.from_id + 1}..{left.to_id}) was left pending: writing it again"
                    )
                    archive_files.remove_batch(uri, left.id)
                    done.append(_write_batch(spark, conn, database_url, uri, left, partitions, progress))
                mark = exports.watermark(conn, uri)
                while mark < horizon:
                    batch = exports.begin(conn, uri, mark, min(horizon, mark + max_batch_ids))
                    done.append(_write_batch(spark, conn, database_url, uri, batch, partitions, progress))
                    mark = batch.to_id
                step.rows = sum(b.rows or 0 for b in done)
        pruned = _prune(spark, conn, uri, progress) if prune else 0
        return ArchiveResult(uri, done, exports.watermark(conn, uri), pruned)


def _write_batch(
    spark: SparkSession,
    conn: exports.Conn,
    database_url: str,
    uri: str,
    batch: exports.Export,
    partitions: int | None,
    progress: Progress,
) -> exports.Export:
    expected = exports.range_count(conn, batch.from_id, batch.to_id)
    if expected:
        tasks = batch_tasks(database_url, uri, batch, partitions or spark.sparkContext.defaultParallelism)
        spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(archive_files.write_tasks).collect()
    archived = read_archive(spark, uri, batch.id).count() if expected else 0
    if archived != expected:
        raise PipelineError(
            f"archive batch {batch.id}: {archived} rows in the archive, {expected} in PostgreSQL; "
            "the batch stays pending (the watermark did not move) and is written again by the next run"
        )
    exports.commit(conn, batch, archived)
    ids = f"ids {batch.from_id + 1:,}..{batch.to_id:,}"
    progress.note(f"archive batch {batch.id}: {archived:,} rows ({ids}), read back")
    return exports.Export(batch.id, batch.from_id, batch.to_id, archived)


def batch_tasks(database_url: str, uri: str, batch: exports.Export, partitions: int) -> list[archive_files.Task]:
    """The batch's id range cut into at least `partitions` tasks of at most MAX_TASK_IDS ids."""
    ids = batch.to_id - batch.from_id
    count = max(1, partitions, -(-ids // MAX_TASK_IDS))
    step = -(-ids // count)
    bounds = [(batch.from_id + i * step, min(batch.to_id, batch.from_id + (i + 1) * step)) for i in range(count)]
    return [
        archive_files.Task(database_url, uri, batch.id, index, low, high)
        for index, (low, high) in enumerate(bounds)
        if low < high
    ]


def _prune(spark: SparkSession, conn: exports.Conn, uri: str, progress: Progress) -> int:
    deleted = 0
    with progress.step(PRUNE_STEP) as step:
        for batch in exports.unpruned(conn, uri):
            archived = read_archive(spark, uri, batch.id).count()
            if archived != batch.rows:
                raise PipelineError(
                    f"archive batch {batch.id} holds {archived} rows in {uri}, {batch.rows} when it was committed: "
                    "its rows stay in PostgreSQL"
                )
            deleted += exports.prune(conn, batch)
        step.rows = deleted
    return deleted
