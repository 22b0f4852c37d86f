"""The archive's tasks (app/pipeline/archive_files.py): a task tried again replaces its files,
what an interrupted run left of a pending batch is replaced, partition values are escaped."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from app.pipeline import archive_files, exports
from app.pipeline.archive import archive_uri, batch_tasks, read_archive, run_archive
from app.pipeline.progress import Progress
from tests.pipeline.history import Finished, add_history
from tests.pipeline.test_archive import HOUR, archived_ids, parquet_files

pytestmark = pytest.mark.xdist_group("pipeline")


def all_files(directory: Path) -> set[str]:
    """Every file under `directory` (hidden ones too), relative to it."""
    return {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}


def test_a_task_tried_again_replaces_its_files(spark: SparkSession, db_url: str, archive_dir: Path) -> None:
    ids = add_history(db_url, [Finished(queue=f"q{i % 3}", sent=i * HOUR) for i in range(12)])
    uri = archive_uri(str(archive_dir))
    with exports.connect(db_url) as conn:
        batch = exports.begin(conn, uri, 0, ids[-1])
    tasks = batch_tasks(db_url, uri, batch, 2)
    assert [(t.from_id, t.to_id) for t in tasks] == [(0, ids[5]), (ids[5], ids[-1])]

    assert [archive_files.write_task(t) for t in tasks] == [6, 6]
    written = all_files(archive_dir)
    # A retry of the first task, and a speculative copy of the second beside its first attempt.
    archive_files.write_task(tasks[0], attempt=1)
    archive_files.write_task(tasks[1], attempt=0)

    assert all_files(archive_dir) == written == parquet_files(archive_dir)  # no temporary file left
    assert sorted(r["id"] for r in read_archive(spark, uri, batch.id).select("id").collect()) == ids


def test_what_a_pending_batch_left_is_replaced_and_other_batches_kept(
    spark: SparkSession, db_url: str, archive_dir: Path, progress: Progress
) -> None:
    first = add_history(db_url, [Finished(queue=f"q{i % 2}", sent=i * HOUR) for i in range(6)])
    run_archive(spark, db_url, str(archive_dir), progress)
    kept = {p: (archive_dir / p).stat().st_mtime_ns for p in parquet_files(archive_dir)}
    later = add_history(db_url, [Finished(queue=f"q{i % 3}", sent=i * HOUR) for i in range(6, 15)])
    uri = archive_uri(str(archive_dir))
    # An earlier run began batch 2 with the range cut into other tasks, and died: one of them
    # wrote files under a name this run's tasks do not write.
    with exports.connect(db_url) as conn:
        batch = exports.begin(conn, uri, first[-1], later[-1])
    archive_files.write_task(archive_files.Task(db_url, uri, batch.id, 7, batch.from_id, batch.to_id))
    stale = {p for p in parquet_files(archive_dir) if p.endswith("part-00007.parquet")}
    assert stale and len(archived_ids(spark, archive_dir)) == 6 + 9

    result = run_archive(spark, db_url, str(archive_dir), progress, partitions=2)

    assert [(b.id, b.rows) for b in result.batches] == [(batch.id, 9)]
    assert archived_ids(spark, archive_dir) == [*first, *later]  # each row once
    assert not stale & parquet_files(archive_dir)
    assert {p: (archive_dir / p).stat().st_mtime_ns for p in kept} == kept  # batch 1 untouched


def test_queue_names_are_escaped_in_the_path_and_read_back_as_they_are(
    spark: SparkSession, db_url: str, archive_dir: Path, progress: Progress
) -> None:
    # Not names the API accepts, but history holds whatever queue_name says.
    names = ["a/b", "x=y%z", "é ü", "plain.fifo"]
    add_history(db_url, [Finished(queue=name, queue_id=i + 1) for i, name in enumerate(names)])

    run_archive(spark, db_url, str(archive_dir), progress)

    rows = read_archive(spark, archive_uri(str(archive_dir))).select("queue", "queue_id").collect()
    assert sorted((r["queue_id"], r["queue"]) for r in rows) == list(enumerate(names, start=1))
    # Escaped as Spark escapes: the ASCII characters a path gives a meaning to, nothing else.
    assert sorted(p.name for p in archive_dir.iterdir()) == [
        "queue=a%2Fb", "queue=plain.fifo", "queue=x%3Dy%25z", "queue=é ü",
    ]  # fmt: skip
