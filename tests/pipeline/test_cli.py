"""`pqs pipeline ...` from the command line (in-process: the commands use the running session)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from app.cli import app
from tests.pipeline.history import Finished, add_history, history_count
from tests.pipeline.test_backfill import counts, make_queue, write_jsonl

pytestmark = pytest.mark.xdist_group("pipeline")
ROOT = Path(__file__).resolve().parents[2]


def test_backfill_archive_and_report_commands(spark: SparkSession, db_url: str, tmp_path: Path) -> None:
    make_queue(db_url, "jobs.fifo")
    source = write_jsonl(tmp_path / "in.jsonl", [{"g": "g1", "d": f"d{i}", "n": i} for i in range(3)])
    runner = CliRunner()
    base = ["--database-url", db_url]

    done = runner.invoke(
        app, ["pipeline", "backfill", source, "--queue", "jobs.fifo", "--group-id", "g", "--dedup-id", "d", *base]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.output.strip().splitlines()[-1])["enqueued"] == 3

    refused = runner.invoke(app, ["pipeline", "backfill", source, "--queue", "jobs.fifo", *base])
    assert refused.exit_code == 1
    assert "error: jobs.fifo is a FIFO queue: map a column to group ids (--group-id)" in refused.output
    missing = runner.invoke(app, ["pipeline", "backfill", source, "--queue", "nope", *base])
    assert missing.exit_code == 1 and "queue nope does not exist" in missing.output
    assert counts(db_url) == (3, 3)

    add_history(db_url, [Finished(queue="jobs.fifo", group_id="g1"), Finished(queue="jobs.fifo", group_id="g2")])
    archive = str(tmp_path / "archive")
    archived = runner.invoke(app, ["pipeline", "archive", "--archive", archive, "--prune", *base])
    assert archived.exit_code == 0, archived.output
    assert "archived 2 rows in 1 batch(es)" in archived.output and "pruned 2 rows" in archived.output
    assert history_count(db_url) == 0

    output = tmp_path / "report"
    reported = runner.invoke(app, ["pipeline", "report", "--archive", archive, "--output", str(output)])
    assert reported.exit_code == 0, reported.output
    assert "2 messages in 1 queues" in reported.output
    assert json.loads((output / "report.json").read_text())["queues"]["jobs.fifo"]["total"] == 2


# Each command with arguments that need no database: the set-up fails before anything connects.
COMMANDS = {
    "archive": ["archive", "--database-url", "postgresql://nobody@db.invalid/pqs"],
    "report": ["report", "--archive", "{tmp}/archive", "--output", "{tmp}/report"],
    "backfill": [
        "backfill",
        "{tmp}/in.jsonl",
        "--queue",
        "jobs",
        "--database-url",
        "postgresql://nobody@db.invalid/pqs",
    ],
}
# Makes `import pyspark...` raise ImportError in the child, as when the extra is not installed.
WITHOUT_PYSPARK = "import sys; sys.modules['pyspark'] = None; from app.cli import main; main()"
SET_UP_ERRORS = {
    "jdbc-jar": "error: PQS_JDBC_JAR=/missing/postgresql.jar is not a file",
    "java": "error: Spark needs Java 17: `apt-get install -y openjdk-17-jre-headless` (or set JAVA_HOME)",
    "pyspark": "error: PySpark is not installed: pip install -e '.[pipeline]'",
}


@pytest.mark.parametrize(
    ("command", "missing"),
    [(command, "jdbc-jar") for command in COMMANDS] + [("report", "java"), ("report", "pyspark")],
)
def test_a_set_up_error_is_one_line_and_exit_code_1(command: str, missing: str, tmp_path: Path) -> None:
    # A subprocess: in this process a Spark session is running, and the commands would use it
    # instead of starting one (where the set-up is checked).
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PQS_JDBC_JAR")}
    runner = [sys.executable, "-m", "app.cli"]
    if missing == "jdbc-jar":
        env["PQS_JDBC_JAR"] = "/missing/postgresql.jar"
    elif missing == "java":
        env["PATH"] = str(tmp_path / "no-java")
    else:
        runner = [sys.executable, "-c", WITHOUT_PYSPARK]
    args = [a.format(tmp=tmp_path) for a in COMMANDS[command]]
    # Inputs that pass the checks made before Spark starts: the set-up is what fails.
    (tmp_path / "in.jsonl").write_text('{"n": 1}\n')
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "part-0.parquet").write_bytes(b"PAR1")

    done = subprocess.run([*runner, "pipeline", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.strip() == SET_UP_ERRORS[missing] and "Traceback" not in done.stderr + done.stdout


def _inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """Bad inputs of a backfill: (its arguments, the one line it answers)."""
    (tmp / "empty.csv").write_bytes(b"")
    (tmp / "binary.csv").write_bytes(b"id,text\n1,\xff\xfe\x00bad\n")
    (tmp / "text.parquet").write_text("id,text\n1,hello\n")
    (tmp / "notes.csv").write_text("id,text\n1,hello\n")
    (tmp / "nothing").mkdir()
    return {
        "missing": ([f"{tmp}/missing.csv"], f"error: {tmp}/missing.csv: no such file or directory"),
        "empty": ([f"{tmp}/empty.csv"], f"error: {tmp}/empty.csv: empty, nothing to backfill"),
        "empty directory": (
            [f"{tmp}/nothing", "--format", "csv"],
            f"error: {tmp}/nothing: no files to read in this directory",
        ),
        "not utf-8": (
            [f"{tmp}/binary.csv"],
            f"error: {tmp}/binary.csv is not utf-8 text (byte 10: invalid start byte):"
            " state its encoding with --encoding",
        ),
        "not parquet": (
            [f"{tmp}/text.parquet"],
            f"error: {tmp}/text.parquet is not a Parquet file: give its format with --format (csv, json)",
        ),
        "encoding": (
            [f"{tmp}/notes.csv", "--encoding", "klingon"],
            "error: unsupported encoding 'klingon': one of utf-8, utf-16, utf-16-le, utf-16-be, latin-1, cp1252, ascii",
        ),
        "format": (
            [f"{tmp}/notes.txt"],
            f"error: cannot tell the format of {tmp}/notes.txt from its name: give --format (parquet, csv, json)",
        ),
    }


@pytest.mark.parametrize(
    "case", ["missing", "empty", "empty directory", "not utf-8", "not parquet", "encoding", "format"]
)
def test_a_bad_backfill_input_is_one_line_and_exit_code_1(case: str, db_url: str, tmp_path: Path) -> None:
    # A subprocess, to see all it prints: the input is checked before Spark starts.
    make_queue(db_url, "jobs")
    args, line = _inputs(tmp_path)[case]
    command = [
        sys.executable,
        "-m",
        "app.cli",
        "pipeline",
        "backfill",
        *args,
        "--queue",
        "jobs",
        "--database-url",
        db_url,
    ]

    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.strip() == line and done.stdout == ""
    assert counts(db_url) == (0, 0)


def test_a_malformed_csv_is_one_error_line(db_url: str, tmp_path: Path) -> None:
    make_queue(db_url, "jobs")
    source = tmp_path / "rows.csv"
    source.write_text("id,text\nn1,hello\nn2,a,b,c\n")
    command = [sys.executable, "-m", "app.cli", "pipeline", "backfill", str(source), "--queue", "jobs",
               "--database-url", db_url, "--master", "local[1]"]  # fmt: skip

    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)

    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"error: {source}: cannot be read: [MALFORMED_CSV_RECORD] Malformed CSV record: n2,a,b,c"
    assert "Traceback" not in done.stderr and " at org.apache" not in done.stderr, done.stderr[-3000:]
    assert "WARNING: Using incubator modules" not in done.stderr  # the JVM's start-up notice
    assert counts(db_url) == (0, 0)


@pytest.mark.parametrize("case", ["missing", "a file", "no parquet"])
def test_a_report_of_no_archive_is_one_line_and_exit_code_1(case: str, tmp_path: Path) -> None:
    """`pqs pipeline report --archive` of a path that holds no archive is an error, not a report
    of "0 messages in 0 queues"; told before Spark starts."""
    (tmp_path / "file").write_text("not an archive\n")
    (tmp_path / "empty" / "queue=q").mkdir(parents=True)
    (tmp_path / "empty" / "queue=q" / "notes.txt").write_text("x\n")
    archive, line = {
        "missing": (
            f"{tmp_path}/nonexistent",
            "no such directory (run `pqs pipeline archive` first, or give --archive)",
        ),
        "a file": (f"{tmp_path}/file", "an archive is a directory of Parquet files, not a file"),
        "no parquet": (
            f"file://{tmp_path}/empty",
            "no Parquet files in this directory, nothing archived"
            " (run `pqs pipeline archive` first, or give --archive)",
        ),
    }[case]
    output = tmp_path / "report"
    command = [sys.executable, "-m", "app.cli", "pipeline", "report", "--archive", archive, "--output", str(output)]

    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.strip() == f"error: {archive}: {line}" and done.stdout == ""
    assert not output.exists()


# Reads a source as a user who may not read it: as root (which reads every file) the check runs in
# a child that gives up root first, after its imports (which read this checkout and the venv).
AS_NOBODY = """
import os, sys
from app.pipeline.backfill.source import check_source, java_encoding
from app.pipeline.session import PipelineError
java_encoding("utf-8")  # loads the codecs while this interpreter's files can still be read
if os.geteuid() == 0:
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
try:
    check_source(sys.argv[1], "csv")
except PipelineError as exc:
    print(f"error: {exc}")
    sys.exit(1)
"""


@pytest.mark.parametrize("case", ["file", "directory", "behind a directory"])
def test_an_unreadable_source_is_one_line(case: str) -> None:
    # Not under tmp_path: pytest's own directory is root's alone (0700), which would hide every case.
    base = Path(tempfile.mkdtemp(prefix="pqs-unreadable-"))
    try:
        base.chmod(0o755)
        source = base / "rows"
        if case == "file":
            source.write_text("id,text\n1,hello\n")
            source.chmod(0)
        else:
            source.mkdir()
            (source / "part.csv").write_text("id,text\n1,hello\n")
            source.chmod(0 if case == "directory" else 0o700)
        argument = source if case != "behind a directory" else source / "part.csv"

        command = [sys.executable, "-c", AS_NOBODY, str(argument)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)

        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stdout.strip() == f"error: {argument}: cannot be read (permission denied)"
    finally:
        (base / "rows").chmod(0o755)  # for a run that is not root's, which rmtree needs
        shutil.rmtree(base)


def test_a_jvm_that_cannot_start_says_why(tmp_path: Path) -> None:
    # The JVM's stderr passes through a filter (app/pipeline/session.py) that drops exactly one
    # line, the incubator-module notice (checked absent in test_a_malformed_csv_is_one_error_line
    # and tests/pipeline/test_cluster.py); what else the JVM says still shows.
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "part-0.parquet").write_bytes(b"PAR1")
    command = [sys.executable, "-m", "app.cli", "pipeline", "report", "--archive", str(tmp_path / "archive"),
               "--output", str(tmp_path / "report"), "--conf", "spark.driver.extraJavaOptions=-Xss1zz"]  # fmt: skip

    failed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert failed.returncode == 1
    assert "Invalid thread stack size: -Xss1zz" in failed.stderr, failed.stderr[-3000:]
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the Spark driver's JVM did not start (its messages are above)"), failed.stderr
    assert "Traceback" not in failed.stderr
