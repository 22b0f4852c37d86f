"""The database's own figure: single-row INSERT commits per second with C clients, measured with
pgbench when there is one (the pgserver wheel ships it), else with an equivalent psycopg loop."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from app.db.embedded import bin_dir

TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS pqs_bench_baseline (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v int NOT NULL)"
)
INSERT = "INSERT INTO pqs_bench_baseline (v) VALUES (1);"
_TPS = re.compile(r"^tps = ([0-9.]+)", re.MULTILINE)


@dataclass(frozen=True)
class BaselineRun:
    """One measurement: `tps` commits per second with `clients` connections."""

    clients: int
    tps: float
    seconds: float
    tool: str


def pgbench_path() -> str | None:
    """pgbench from the pgserver wheel (same major version as the embedded server), or on PATH."""
    directory = bin_dir()
    if directory is not None and (directory / "pgbench").is_file():
        return str(directory / "pgbench")
    return shutil.which("pgbench")


def prepare(database_url: str) -> None:
    """Create the baseline table (empty) in the run's database."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(TABLE_DDL)
        conn.execute("TRUNCATE pqs_bench_baseline")


def run_pgbench(pgbench: str, database_url: str, clients: int, seconds: int) -> BaselineRun:
    """`pgbench -n -c C -j min(C,2) -T D -f insert.sql <url>`; its `tps = X` line."""
    with tempfile.TemporaryDirectory(prefix="pqs-bench-") as tmp:
        script = Path(tmp) / "insert.sql"
        script.write_text(INSERT + "\n")
        script.chmod(0o644)
        command = [pgbench, "-n", "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds)]
        command += ["-f", str(script), database_url]
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    match = _TPS.search(done.stdout)
    if done.returncode != 0 or not match:
        raise RuntimeError(f"pgbench failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return BaselineRun(clients=clients, tps=float(match.group(1)), seconds=float(seconds), tool="pgbench")


def run_psycopg(database_url: str, clients: int, seconds: float) -> BaselineRun:
    """The same load without pgbench: C threads, each an autocommit connection inserting a row per
    statement until the time is up."""
    counts = [0] * clients
    start_gate = threading.Barrier(clients + 1)
    deadline = [0.0]
    errors: list[BaseException] = []

    def client(index: int) -> None:
        try:
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute("SELECT 1")
                start_gate.wait(timeout=30)
                n = 0
                while time.monotonic() < deadline[0]:
                    conn.execute(INSERT)
                    n += 1
                counts[index] = n
        except BaseException as exc:  # reported below; a thread must not die silently
            errors.append(exc)
            start_gate.abort()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    deadline[0] = time.monotonic() + 3600  # replaced once everyone is connected
    with contextlib.suppress(threading.BrokenBarrierError):
        start_gate.wait(timeout=30)
    started = time.monotonic()
    deadline[0] = started + seconds
    for thread in threads:
        thread.join(timeout=seconds + 30)
    elapsed = time.monotonic() - started
    if errors:
        raise RuntimeError(f"baseline client failed: {errors[0]!r}")
    return BaselineRun(clients=clients, tps=sum(counts) / elapsed, seconds=elapsed, tool="psycopg")


def measure(database_url: str, clients: int, seconds: float) -> BaselineRun:
    """pgbench when available (and working), else the psycopg loop."""
    pgbench = pgbench_path()
    if pgbench:
        try:
            return run_pgbench(pgbench, database_url, clients, max(1, round(seconds)))
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            pass  # e.g. a pgbench of another major version that cannot read the URL: use psycopg
    return run_psycopg(database_url, clients, seconds)
