"""The progress a user sees: named steps counted up front, a count that never changes or goes
back, never an unknown total; rows, rows per second and the time elapsed."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from pyspark.sql import Row, SparkSession
from rich.console import Console

from app.pipeline.archive import run_archive
from app.pipeline.backfill import Mapping, run_backfill
from app.pipeline.progress import Progress
from app.pipeline.report import run_report
from tests.pipeline.history import Finished, add_history
from tests.pipeline.test_backfill import make_queue, write_parquet

pytestmark = pytest.mark.xdist_group("pipeline")

LIVE = re.compile(r"(archive|report|backfill) step (\S+)/(\S+): ")
# (a frame of the live line has no line break of its own: it may come right before a line)
FINISHED = re.compile(r"(archive|report|backfill) (\d+)/(\d+) ([^:\n]+): ([^\n]*)\n")


def terminal() -> tuple[Progress, Console]:
    """A Progress drawing its live line as on a terminal, every frame recorded."""
    console = Console(file=io.StringIO(), force_terminal=True, width=200, record=True)
    return Progress(console), console


def test_the_steps_are_counted_up_front_and_the_count_never_changes(
    spark: SparkSession, db_url: str, tmp_path: Path
) -> None:
    make_queue(db_url, "jobs.fifo")
    rows = [{"g": f"g{i % 3}", "d": f"d{i}", "body": Row(n=i)} for i in range(40)]
    source = write_parquet(spark, tmp_path / "in.parquet", rows)
    add_history(db_url, [Finished(sent=i) for i in range(6)])
    progress, console = terminal()

    with progress:
        mapping = Mapping(body="body", group_id="g", dedup_id="d")
        run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=mapping)
        run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=mapping)  # the re-run: nothing new
        run_archive(spark, db_url, str(tmp_path / "archive"), progress, prune=True)
        run_report(spark, progress, tmp_path / "report", archive=str(tmp_path / "archive"))
    shown = console.export_text()

    live = LIVE.findall(shown)
    assert {title for title, _, _ in live} == {"archive", "report", "backfill"}, shown
    # Frame by frame: a known total per run, fixed; the step number never goes back within a run.
    runs: list[list[tuple[str, int, int]]] = []
    for title, number, total in live:
        assert number.isdigit() and total.isdigit(), f"an unknown count: {title} step {number}/{total}"
        step = (title, int(number), int(total))
        if not runs or runs[-1][-1][0] != title or step[1] < runs[-1][-1][1]:
            runs.append([])
        runs[-1].append(step)
    assert [(r[0][0], r[0][2]) for r in runs] == [("backfill", 4), ("backfill", 3), ("archive", 3), ("report", 6)]
    for run in runs:
        assert {total for _, _, total in run} == {run[0][2]}
        assert [n for _, n, _ in run] == sorted(n for _, n, _ in run)
    assert "?" not in "".join(line for line in shown.splitlines() if LIVE.search(line))
    assert re.search(r"backfill step 2/4: enqueue, Spark checking each row .* 0:00:\d\d", shown)

    # One line per step as it ends, in order, each with its rows and rows per second when it counts them.
    finished = FINISHED.findall(shown)
    assert [(t, int(n), int(total), name) for t, n, total, name, _ in finished] == [
        ("backfill", 1, 4, "read the source"),
        ("backfill", 2, 4, "enqueue, Spark checking each row"),
        ("backfill", 3, 4, "count and check rows"),
        ("backfill", 4, 4, "enqueue rows"),
        ("backfill", 1, 3, "read the source"),
        ("backfill", 2, 3, "count and check rows"),
        ("backfill", 3, 3, "enqueue rows"),
        ("archive", 1, 3, "find new history"),
        ("archive", 2, 3, "write Parquet, read it back"),
        ("archive", 3, 3, "prune PostgreSQL"),
        ("report", 1, 6, "read the history"),
        ("report", 2, 6, "figures per queue"),
        ("report", 3, 6, "busiest groups"),
        ("report", 4, 6, "receive counts, errors"),
        ("report", 5, 6, "throughput and latency over time"),
        ("report", 6, 6, "write the files"),
    ]
    told = {(t, name): what for t, _, _, name, what in finished}
    one_pass = told[("backfill", "enqueue, Spark checking each row")]
    assert re.fullmatch(r"40 rows in \d+\.\d s \([\d,]+ rows/s\)", one_pass)
    assert told[("backfill", "enqueue rows")] == "skipped, every row was enqueued before"
    assert re.fullmatch(r"6 rows in \d+\.\d s \([\d,]+ rows/s\)", told[("archive", "write Parquet, read it back")])
    assert re.fullmatch(r"6 rows in \d+\.\d s \([\d,]+ rows/s\)", told[("archive", "prune PostgreSQL")])
    assert re.fullmatch(r"6 rows in \d+\.\d s \([\d,]+ rows/s\)", told[("report", "read the history")])


def test_a_step_out_of_the_plan_order_is_a_programming_error() -> None:
    progress = Progress(Console(file=io.StringIO()))
    progress.plan("archive", ["one", "two"])
    with progress.step("two"):
        pass

    with pytest.raises(ValueError, match="not one of the steps still to come"), progress.step("one"):
        pass
