"""`pqs pipeline archive`: history to Parquet by queue and day, once; pending batches written
again without duplicates; prune only what the archive holds."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import PythonException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from app.pipeline import archive, exports
from app.pipeline.archive import archive_uri, read_archive, run_archive
from app.pipeline.jdbc import jdbc_source, read_partitioned
from app.pipeline.progress import Progress
from app.pipeline.session import PipelineError
from tests.pipeline.history import Finished, add_history, history_count

pytestmark = pytest.mark.xdist_group("pipeline")

HOUR = 3600.0


def parquet_files(directory: Path) -> set[str]:
    """Every Parquet file under `directory`, relative to it."""
    return {str(p.relative_to(directory)) for p in directory.rglob("*.parquet")}


def archived_ids(spark: SparkSession, directory: Path) -> list[int]:
    return sorted(r["id"] for r in read_archive(spark, archive_uri(str(directory))).select("id").collect())


def test_archive_writes_each_row_once_by_queue_and_day(
    spark: SparkSession, db_url: str, archive_dir: Path, progress: Progress
) -> None:
    # BASE is 2026-01-05 10:00 UTC: every 6 hours over three days, plus one FIFO message
    jobs = [Finished(queue="jobs", sent=i * 6 * HOUR) for i in range(7)]
    ids = add_history(db_url, [*jobs, Finished(queue="mail.fifo", queue_id=2, group_id="g1", sent=60)])

    first = run_archive(spark, db_url, str(archive_dir), progress)

    assert first.rows == 8 and [b.rows for b in first.batches] == [8] and first.watermark == ids[-1]
    days = {
        (r["queue"], str(r["day"])): r["count"]
        for r in read_archive(spark, first.archive).groupBy("queue", "day").count().collect()
    }
    assert days == {("jobs", "2026-01-05"): 3, ("jobs", "2026-01-06"): 4, ("mail.fifo", "2026-01-05"): 1}
    assert (archive_dir / "queue=jobs" / "day=2026-01-06" / "batch=1").is_dir()
    row = read_archive(spark, first.archive).where(F.col("queue") == "mail.fifo").first()
    assert row is not None and row["group_id"] == "g1" and row["outcome"] == "acked" and row["receive_count"] == 1
    files = parquet_files(archive_dir)
    # Instants, as every reader takes them: microseconds adjusted to UTC, not INT96.
    schema = pq.read_schema(archive_dir / sorted(files)[0])
    for column in ("sent_at", "first_received_at", "last_received_at", "finished_at"):
        assert schema.field(column).type == pa.timestamp("us", tz="UTC"), (column, schema.field(column).type)

    again = run_archive(spark, db_url, str(archive_dir), progress)

    assert again.rows == 0 and again.batches == [] and again.watermark == ids[-1]
    assert parquet_files(archive_dir) == files

    later = add_history(db_url, [Finished(queue="jobs", sent=30 * HOUR)])
    third = run_archive(spark, db_url, str(archive_dir), progress)

    assert [(b.id, b.from_id, b.to_id, b.rows) for b in third.batches] == [(2, ids[-1], later[0], 1)]
    assert archived_ids(spark, archive_dir) == [*ids, *later]
    assert history_count(db_url) == 9  # nothing pruned without --prune


# Every column as PostgreSQL renders it, in archive_schema()'s order, for comparing with the archive.
HISTORY_COLUMNS = (
    "id, queue_id, message_id::text, sequence_number, group_id, dedup_id, sent_at, first_received_at,"
    " last_received_at, finished_at, receive_count, outcome::text, result::text, error::text, queue_name"
)


def test_archive_holds_each_value_as_postgresql_has_it(
    spark: SparkSession, db_url: str, archive_dir: Path, progress: Progress
) -> None:
    # Times to the microsecond, before 1970 and far ahead (JDBC reads them in binary), nulls,
    # JSON of both kinds.
    messages = [
        Finished(sent=0.000001, wait=0.123456, redelivery=30.000001, processing=0.999999, receive_count=2),
        Finished(queue="mail.fifo", queue_id=2, group_id="g1", sent=-60 * 365.25 * 24 * HOUR - 0.5),
        Finished(sent=150 * 365.25 * 24 * HOUR + 0.654321, wait=None, outcome="purged"),
        Finished(outcome="dead_lettered", error={"message": "bad input", "code": 7}, result=None),
        Finished(result={"ok": True, "items": [1, 2.5, "x"]}),
    ]
    ids = add_history(db_url, messages)
    with psycopg.connect(db_url) as conn:
        expected = conn.execute(f"SELECT {HISTORY_COLUMNS} FROM message_history ORDER BY id").fetchall()

    run_archive(spark, db_url, str(archive_dir), progress)

    # pyarrow, not Spark: its instants are UTC-aware datetimes, compared with psycopg's as such.
    columns = [f.name for f in archive.archive_schema().fields if f.name not in ("day", "batch")]
    table = pq.ParquetDataset(archive_dir).read(columns=columns).select(columns).sort_by("id")
    assert [tuple(r.values()) for r in table.to_pylist()] == expected and len(expected) == len(ids)


def test_an_interrupted_batch_is_written_again_without_duplicates(
    spark: SparkSession, db_url: str, archive_dir: Path, progress: Progress
) -> None:
    ids = add_history(db_url, [Finished(queue=f"q{i % 3}", sent=i * HOUR) for i in range(12)])
    uri = archive_uri(str(archive_dir))
    # An earlier run recorded batch 1 and died while writing it: half its rows are on disk.
    with exports.connect(db_url) as conn:
        batch = exports.begin(conn, uri, 0, ids[-1])
    half = read_partitioned(spark, jdbc_source(db_url), exports.history_rows_query(0, ids[5]), "id", 1, ids[5] + 1, 2)
    (
        half.withColumnRenamed("queue_name", "queue")
        .withColumn("day", F.to_date("finished_at"))
        .withColumn("batch", F.lit(batch.id).cast("long"))
        .write.partitionBy("queue", "day", "batch")
        .parquet(uri)
    )
    assert len(archived_ids(spark, archive_dir)) == 6

    result = run_archive(spark, db_url, str(archive_dir), progress)

    assert [(b.id, b.rows) for b in result.batches] == [(batch.id, 12)]
    assert archived_ids(spark, archive_dir) == ids


def test_prune_deletes_archived_rows_only(
    spark: SparkSession, db_url: str, archive_dir: Path, progress: Progress
) -> None:
    ids = add_history(db_url, [Finished(sent=i) for i in range(5)])

    result = run_archive(spark, db_url, str(archive_dir), progress, prune=True)

    assert result.pruned == 5 and history_count(db_url) == 0
    later = add_history(db_url, [Finished(sent=100), Finished(sent=101)])
    again = run_archive(spark, db_url, str(archive_dir), progress)
    assert again.pruned == 0 and history_count(db_url) == 2
    assert archived_ids(spark, archive_dir) == [*ids, *later]
    with psycopg.connect(db_url) as conn, pytest.raises(psycopg.errors.CheckViolation, match="append-only"):
        conn.execute("DELETE FROM message_history")


def test_prune_keeps_rows_whose_archive_files_are_gone(
    spark: SparkSession, db_url: str, archive_dir: Path, progress: Progress
) -> None:
    add_history(db_url, [Finished(queue="a", sent=1), Finished(queue="b", sent=2)])
    run_archive(spark, db_url, str(archive_dir), progress)
    shutil.rmtree(archive_dir / "queue=b")

    with pytest.raises(PipelineError, match=r"holds 1 rows .* 2 when it was committed"):
        run_archive(spark, db_url, str(archive_dir), progress, prune=True)

    assert history_count(db_url) == 2


@contextmanager
def short_read_back(archive_dir: Path) -> Iterator[None]:
    """The read-back after a write finds one row fewer than PostgreSQL holds (a file lost, a
    store that lists late)."""
    real = archive.read_archive

    def short(spark: SparkSession, uri: str, batch: int | None = None) -> DataFrame:
        rows = real(spark, uri, batch)
        lowest = rows.agg(F.min("id")).first()
        return rows.where(F.col("id") != (lowest[0] if lowest else 0))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(archive, "read_archive", short)
        yield


@contextmanager
def blocked_partition(archive_dir: Path) -> Iterator[None]:
    """A plain file where queue q1's partition directory goes: the task that writes q1's rows
    fails (the files other tasks wrote stay: a partial write)."""
    blocker = archive_dir / "queue=q1"
    archive_dir.mkdir()
    blocker.write_text("not a directory")
    try:
        yield
    finally:
        blocker.unlink()


@pytest.mark.parametrize(
    ("fault", "error", "message"),
    [
        (short_read_back, PipelineError, "11 rows in the archive, 12 in PostgreSQL; the batch stays pending"),
        (blocked_partition, PythonException, "Not a directory"),
    ],
    ids=["short-read-back", "failed-write"],
)
def test_a_failed_write_leaves_the_batch_pending_and_the_watermark_where_it_was(
    spark: SparkSession,
    db_url: str,
    archive_dir: Path,
    progress: Progress,
    fault: Callable[[Path], AbstractContextManager[None]],
    error: type[Exception],
    message: str,
) -> None:
    ids = add_history(db_url, [Finished(queue=f"q{i % 3}", sent=i * HOUR) for i in range(12)])
    uri = archive_uri(str(archive_dir))

    with fault(archive_dir), pytest.raises(error, match=message):
        run_archive(spark, db_url, str(archive_dir), progress)

    with exports.connect(db_url) as conn:
        left = exports.pending(conn, uri)
        assert exports.watermark(conn, uri) == 0 and exports.unpruned(conn, uri) == []
    assert left is not None and (left.from_id, left.to_id, left.rows) == (0, ids[-1], None)

    result = run_archive(spark, db_url, str(archive_dir), progress, prune=True)

    assert [(b.id, b.rows) for b in result.batches] == [(left.id, 12)] and result.watermark == ids[-1]
    assert archived_ids(spark, archive_dir) == ids  # each row once
    assert result.pruned == 12 and history_count(db_url) == 0
