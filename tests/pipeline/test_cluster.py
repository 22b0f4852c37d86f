"""`pqs pipeline` on a real Spark standalone cluster (tests/pipeline/cluster.py: a master and a
worker from the installed PySpark), against PostgreSQL over TCP, with executors in processes of
their own: the recipe of docs/pipeline.md, "On a cluster"."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.postgres import private_postgres
from tests.faults.service import free_port
from tests.pipeline.cluster import standalone_cluster
from tests.pipeline.conftest import TEST_JVM_OPTIONS
from tests.pipeline.history import Finished, add_history, history_count
from tests.pipeline.test_backfill import counts, make_queue, write_jsonl

# Its own JVMs, no shared Spark session: it runs on the worker that holds the fault tests (a
# group xdist starts first), beside the pipeline group rather than after it on one worker, which
# made that worker the run's longest.
pytestmark = pytest.mark.xdist_group("faults")
ROOT = Path(__file__).resolve().parents[2]
COMMAND_SECONDS = 180


def test_archive_report_and_backfill_run_on_a_standalone_cluster(tmp_path: Path) -> None:
    with (
        standalone_cluster(tmp_path / "spark") as cluster,
        private_postgres(tcp_port=free_port()) as (_, url),
    ):
        cluster.wait_for_worker()  # the two start side by side
        make_queue(url, "jobs")
        source = write_jsonl(tmp_path / "in.jsonl", [{"n": i} for i in range(20)])
        add_history(url, [Finished(sent=i) for i in range(5)])
        # Only the environment says which Python the executors run; the driver listens on
        # loopback, where the executors of this one-machine cluster find it.
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PQS_DATA_DIR": str(tmp_path / "data")}
        on_cluster = [
            "--master", cluster.master, "--database-url", url, "--driver-memory", "512m",
            "--conf", "spark.executor.memory=512m", "--conf", "spark.driver.host=127.0.0.1",
            # a few rows: few tasks (Spark's default is 200 per shuffle, the pipeline's 16)
            "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.default.parallelism=2",
            # the executors' JVMs compile as the driver's (tests/pipeline/conftest.py: quick_jvms)
            "--conf", f"spark.executor.defaultJavaOptions={TEST_JVM_OPTIONS}",
        ]  # fmt: skip

        def pqs(*args: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                [sys.executable, "-m", "app.cli", "pipeline", *args, *on_cluster],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=COMMAND_SECONDS,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
            assert "WARNING: Using incubator modules" not in done.stderr  # the JVM's start-up notice
            return done

        archive, report = str(tmp_path / "archive"), tmp_path / "report"
        backfilled = pqs("backfill", source, "--queue", "jobs", "--partitions", "2")
        assert json.loads(backfilled.stdout.strip().splitlines()[-1])["enqueued"] == 20
        assert "5 messages in 1 queues" in pqs("report", "--from-database", "--output", str(report)).stdout
        archived = pqs("archive", "--archive", archive, "--prune", "--partitions", "2")
        assert "archived 5 rows in 1 batch(es)" in archived.stdout
        # Not a terminal: a line per step, counted out of the run's steps, with rows and rows/s.
        assert "archive 1/3 find new history: " in archived.stderr
        written = r"archive 2/3 write Parquet, read it back: 5 rows in [\d.]+ s \([\d,]+ rows/s\)"
        assert re.search(written, archived.stderr)

        assert counts(url) == (20, 20) and history_count(url) == 0
        assert json.loads((report / "report.json").read_text())["queues"]["jobs"]["total"] == 5
        # Each command was an application of the cluster, its tasks run by an executor the
        # worker started as a process of its own (a directory per executor, with its output).
        # The worker writes each executor's command at the top of its stderr.
        executors = sorted(cluster.work_dir.glob("app-*/*/stderr"))
        assert len({e.parent.parent for e in executors}) == 3, executors
        for said in (e.read_text(errors="replace") for e in executors):
            assert "CoarseGrainedExecutorBackend" in said and TEST_JVM_OPTIONS in said, said[:3000]
