"""`pqs pipeline archive`: message history -> Parquet, partitioned by queue and day.

Layout: `<archive>/queue=<name>/day=<yyyy-mm-dd>/batch=<n>/part-*.parquet` (days in UTC). Each
batch is one range of history ids (exports.py), written with dynamic partition overwrite: Spark
replaces exactly the partitions the batch's rows fall in, all of which carry the batch's number,
so writing a pending batch again replaces what an interrupted attempt left and duplicates
nothing, and no other batch is touched. A batch is committed (the watermark moves) only after
its files are committed and read back with as many rows as its id range holds in PostgreSQL.
A re-run archives only what is past the watermark: nothing, when history has not grown.

`prune` then deletes the rows of committed batches from PostgreSQL, each batch in one
transaction, and only after reading its rows back from the archive once more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app.pipeline import exports
from app.pipeline.jdbc import JdbcSource, jdbc_source, read_partitioned
from app.pipeline.progress import Progress
from app.pipeline.session import PipelineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

# Ids per batch: bounds a batch's Spark job, and the size of one prune transaction.
MAX_BATCH_IDS = 5_000_000
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
        DateType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    columns = [
        ("id", LongType()),
        ("queue_id", IntegerType()),
        ("message_id", StringType()),
        ("sequence_number", LongType()),
        ("group_id", StringType()),
        ("dedup_id", StringType()),
        ("sent_at", TimestampType()),
        ("first_received_at", TimestampType()),
        ("last_received_at", TimestampType()),
        ("finished_at", TimestampType()),
        ("receive_count", IntegerType()),
        ("outcome", StringType()),
        ("result", StringType()),
        ("error", StringType()),
        ("queue", StringType()),
        ("day", DateType()),
        ("batch", LongType()),
    ]
    return StructType([StructField(name, kind, True) for name, kind in columns])


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
    source = jdbc_source(database_url)
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # days are UTC days
    # Timestamps as Parquet's TIMESTAMP(MICROS, adjusted to UTC), which pyarrow, pandas, DuckDB
    # and Spark all read as UTC instants; Spark's default, INT96, is read as a naive time.
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    progress.attach(spark.sparkContext)
    progress.plan("archive", [*ARCHIVE_STEPS, PRUNE_STEP] if prune else ARCHIVE_STEPS)
    parts = partitions or max(2, spark.sparkContext.defaultParallelism)
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
                    done.append(_write_batch(spark, conn, source, uri, left, parts, progress))
                mark = exports.watermark(conn, uri)
                while mark < horizon:
                    batch = exports.begin(conn, uri, mark, min(horizon, mark + max_batch_ids))
                    done.append(_write_batch(spark, conn, source, uri, batch, parts, progress))
                    mark = batch.to_id
                step.rows = sum(b.rows or 0 for b in done)
        pruned = _prune(spark, conn, uri, progress) if prune else 0
        return ArchiveResult(uri, done, exports.watermark(conn, uri), pruned)


def _write_batch(
    spark: SparkSession,
    conn: exports.Conn,
    source: JdbcSource,
    uri: str,
    batch: exports.Export,
    partitions: int,
    progress: Progress,
) -> exports.Export:
    from pyspark.sql import functions as F

    expected = exports.range_count(conn, batch.from_id, batch.to_id)
    if expected:
        rows = read_partitioned(
            spark,
            source,
            exports.history_rows_query(batch.from_id, batch.to_id),
            "id",
            batch.from_id + 1,
            batch.to_id + 1,
            partitions,
        )
        out = (
            rows.withColumnRenamed("queue_name", "queue")
            .withColumn("day", F.to_date("finished_at"))
            .withColumn("batch", F.lit(batch.id).cast("long"))
        )
        (
            out.write.mode("overwrite")
            .option("partitionOverwriteMode", "dynamic")
            .partitionBy("queue", "day", "batch")
            .parquet(uri)
        )
    written = read_archive(spark, uri, batch.id).count() if expected else 0
    if written != expected:
        raise PipelineError(
            f"archive batch {batch.id}: {written} rows in the archive, {expected} in PostgreSQL; "
            "the batch stays pending (the watermark did not move) and is written again by the next run"
        )
    exports.commit(conn, batch, written)
    progress.note(f"archive batch {batch.id}: {written:,} rows (ids {batch.from_id + 1:,}..{batch.to_id:,}), read back")
    return exports.Export(batch.id, batch.from_id, batch.to_id, written)


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
