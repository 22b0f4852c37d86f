"""`pqs bench pipeline`: the Spark pipeline's figures on this machine.

On a fresh database (embedded PostgreSQL with fsync on, or --database-url's server), it writes
N history rows with generate_series (not through HTTP: queues of both kinds, FIFO groups, every
outcome, retries and errors, over several days), then times, in one Spark session:

- archive + report of the history (target, for 10M rows: at most 60 s; the session's start is
  timed apart, as it does not grow with the history);
- backfill of M rows from a Parquet file into a queue (target, for 1M rows: at most 12 s), and
  its re-run, which must enqueue 0 (target: at most 5 s);
- the backfill's same-run baseline: its database part alone, the same statements on the same
  rows without Spark (app.bench.pipeline_floor); the table says how many times that the
  backfill took.

It prints a table and writes JSON (--output), with the CPU seconds each step used by
PostgreSQL (when the server runs on this machine), Spark's JVM and Python. The history and the
source file are made before the clock starts; the run's database and files are dropped
afterwards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from rich.console import Console
from rich.table import Table

from app.bench.config import BenchConfig
from app.bench.procs import ProcessTree, spark_cpu_seconds
from app.bench.runner import database_info, machine, redact
from app.bench.target import fresh_database, postgres_tree, server_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from app.pipeline.progress import Progress

T = TypeVar("T")
ARCHIVE_REPORT_SECONDS_MAX = 60.0
BACKFILL_SECONDS_MAX = 12.0
RERUN_SECONDS_MAX = 5.0
CHUNK_ROWS = 1_000_000

# Finished messages as acks, dead letters, expiry and purges write them. Queue q (1..queues) is
# FIFO when even; ids are dense and increase with time, as real history's do.
_HISTORY = """
INSERT INTO message_history (queue_id, queue_name, message_id, sequence_number, group_id, dedup_id, sent_at,
                             first_received_at, last_received_at, finished_at, receive_count, outcome,
                             result, error)
SELECT s.q,
       'bench-q' || s.q || CASE WHEN s.q %% 2 = 0 THEN '.fifo' ELSE '' END,
       gen_random_uuid(), s.i,
       CASE WHEN s.q %% 2 = 0 THEN 'g' || (s.i %% %(groups)s) END,
       CASE WHEN s.q %% 2 = 0 THEN 'd' || s.i END,
       s.sent,
       CASE WHEN s.outcome = 'purged' THEN NULL ELSE s.sent + s.wait END,
       CASE WHEN s.outcome = 'purged' THEN NULL ELSE s.sent + s.wait + s.retry END,
       s.sent + s.wait + s.retry + s.work,
       CASE WHEN s.outcome = 'purged' THEN 0 ELSE s.receives END,
       s.outcome::history_outcome,
       CASE WHEN s.outcome = 'acked' THEN '{"ok": true}'::jsonb END,
       CASE WHEN s.receives > 1 OR s.outcome = 'dead_lettered'
            THEN jsonb_build_object('message',
                                    (ARRAY['timeout', 'connection reset', 'bad input', 'quota'])[1 + s.i %% 4])
       END
FROM (
    SELECT i,
           1 + floor(%(queues)s * power(random(), 2))::int AS q,
           %(start)s::timestamptz + make_interval(secs => (i - 1) * %(spacing)s::float8) AS sent,
           make_interval(secs => -ln(1 - random()) * 2) AS wait,
           make_interval(secs => CASE WHEN r.receives > 1 THEN 30 * (r.receives - 1) ELSE 0 END) AS retry,
           make_interval(secs => 0.05 + random() * random() * 5) AS work,
           r.receives,
           CASE WHEN r.u < 0.03 THEN 'dead_lettered' WHEN r.u < 0.05 THEN 'expired'
                WHEN r.u < 0.06 THEN 'purged' ELSE 'acked' END AS outcome
    -- "0 * i" makes the LATERAL depend on the row: uncorrelated, PostgreSQL would draw its
    -- random() once for all rows, and every row would have the same outcome and receive count.
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i,
         LATERAL (SELECT random() + 0 * i AS u, 1 + floor(-ln(1 - random()) * 0.4 + 0 * i)::int AS receives) AS r
) s
"""


@dataclass(frozen=True)
class PipelineBenchConfig:
    """The shape of a pipeline bench run."""

    history_rows: int = 10_000_000
    backfill_rows: int = 1_000_000
    backfill_kind: str = "fifo"
    queues: int = 10
    groups: int = 1_000
    days: int = 7
    master: str = "local[*]"
    driver_memory: str = "2g"
    database_url: str | None = None
    data_dir: Path = Path(".pqs/bench")
    output: Path | None = Path("bench-results.json")


@dataclass
class Figure:
    """One timed step."""

    name: str
    rows: int
    seconds: float
    target: str = ""
    met: bool | None = None
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)
    # CPU seconds the step used: postgres (when local), jvm, python (see CpuMeter)
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)


def run(
    config: PipelineBenchConfig, console: Console | None = None, spark: SparkSession | None = None
) -> dict[str, Any]:
    """Run the pipeline bench; the report as written to JSON. With `spark`, that session is
    used (its start is then not measured)."""
    from app.pipeline.progress import Progress

    console = console or (Console() if Console().is_terminal else Console(width=170))
    figures: list[Figure] = []
    report: dict[str, Any] = {
        "pqs_bench": 1,
        "scenario": "pipeline",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "settings": {k: str(v) for k, v in dataclasses.asdict(config).items()},
    }
    if config.database_url:
        report["settings"]["database_url"] = redact(config.database_url)
    work = config.data_dir / "pipeline-run"
    shutil.rmtree(work, ignore_errors=True)
    server, embedded = server_url(BenchConfig(database_url=config.database_url, data_dir=config.data_dir))
    try:
        with fresh_database(server) as url, Progress(console) as progress:
            report["database"] = database_info(url, embedded)
            _history(url, config, progress)
            with _session(config, spark, figures) as session:
                _measure(session, url, config, work, progress, figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    report["figures"] = [dataclasses.asdict(f) for f in figures]
    console.print(table(figures, report))
    if config.output:
        config.output.write_text(json.dumps(report, indent=2, default=str) + "\n")
        console.print(f"results written to {config.output}")
    return report


def _history(url: str, config: PipelineBenchConfig, progress: Progress, chunk_rows: int = CHUNK_ROWS) -> None:
    """Write the history rows (not timed), in chunks of their own transactions, evenly over
    `config.days`: row i is sent (i - 1) spacings after the start, whichever chunk holds it."""
    spacing = config.days * 86_400 / max(1, config.history_rows)
    step = progress.step(f"write {config.history_rows:,} history rows (generate_series)")
    with step, psycopg.connect(url, autocommit=True) as conn:
        start = _start(conn, config.days)
        first = 1
        while first <= config.history_rows:
            last = min(config.history_rows, first + chunk_rows - 1)
            params = {"first": first, "last": last, "start": start, "spacing": spacing}
            conn.execute(_HISTORY, params | {"queues": config.queues, "groups": config.groups})
            first = last + 1
        # VACUUM as well as ANALYZE: 10M fresh rows call for an autovacuum (insert threshold),
        # which would otherwise run during the timed steps (as for `pqs bench backlog`).
        conn.execute("VACUUM (ANALYZE) message_history")
        with contextlib.suppress(psycopg.Error):  # a role that may not CHECKPOINT skips it
            conn.execute("CHECKPOINT")


def _start(conn: psycopg.Connection[Any], days: int) -> Any:
    row = conn.execute("SELECT date_trunc('hour', now()) - make_interval(days => %s)", (days,)).fetchone()
    assert row is not None
    return row[0]


@contextmanager
def _session(config: PipelineBenchConfig, spark: SparkSession | None, figures: list[Figure]) -> Iterator[SparkSession]:
    if spark is not None:
        yield spark
        return
    from app.pipeline.session import SparkOptions, start_session

    started = time.perf_counter()
    session = start_session(SparkOptions(master=config.master, driver_memory=config.driver_memory))
    figures.append(Figure("spark session start", 0, round(time.perf_counter() - started, 1)))
    try:
        yield session
    finally:
        session.stop()


@dataclass(frozen=True)
class CpuMeter:
    """CPU seconds a step used, by PostgreSQL (when it runs on this machine), Spark's JVM and
    Python (this process and Spark's Python workers): the steps are CPU-bound on 2 cores, so
    where their CPU goes says more than their seconds, which move with the machine's load."""

    postgres: ProcessTree | None

    def read(self) -> dict[str, float]:
        """A reading: CPU seconds so far."""
        reading = spark_cpu_seconds()
        if self.postgres is not None:
            reading["postgres"] = self.postgres.cpu_seconds()
        return reading


def _timed(work: Callable[[], T], cpu: CpuMeter) -> tuple[T, float, dict[str, float]]:
    """`work`'s result, its seconds and the CPU seconds it used (see CpuMeter)."""
    before = cpu.read()
    started = time.perf_counter()
    result = work()
    seconds = round(time.perf_counter() - started, 1)
    used = {name: round(value - before[name], 2) for name, value in cpu.read().items()}
    return result, seconds, used


def _measure(
    spark: SparkSession, url: str, config: PipelineBenchConfig, work: Path, progress: Progress, figures: list[Figure]
) -> None:
    from app.pipeline.archive import run_archive
    from app.pipeline.backfill import Mapping, run_backfill
    from app.pipeline.report import run_report

    cpu = CpuMeter(postgres_tree(url))
    archived, archive_s, archive_cpu = _timed(lambda: run_archive(spark, url, str(work / "archive"), progress), cpu)
    figures.append(
        Figure("archive", archived.rows, archive_s, detail={"batches": len(archived.batches)}, cpu=archive_cpu)
    )
    reported, report_s, report_cpu = _timed(
        lambda: run_report(spark, progress, work / "report", archive=str(work / "archive")), cpu
    )
    figures.append(Figure("report (from the archive)", reported[0]["messages"], report_s, cpu=report_cpu))
    total = round(archive_s + report_s, 1)
    figures.append(
        Figure(
            "archive + report",
            archived.rows,
            total,
            f"<= {ARCHIVE_REPORT_SECONDS_MAX:g} s",
            total <= ARCHIVE_REPORT_SECONDS_MAX,
        )
    )

    fifo = config.backfill_kind == "fifo"
    queue = "bench-backfill.fifo" if fifo else "bench-backfill"
    _make_queue(url, queue)
    source = _source(spark, work / "source.parquet", config, progress)
    mapping = Mapping(body="body", group_id="grp" if fifo else None, dedup_id="dedup" if fifo else None)
    first, first_s, first_cpu = _timed(lambda: run_backfill(spark, url, queue, source, progress, mapping=mapping), cpu)
    backfill = Figure(
        f"backfill ({config.backfill_kind})",
        first.rows,
        first_s,
        f"<= {BACKFILL_SECONDS_MAX:g} s",
        first_s <= BACKFILL_SECONDS_MAX and first.enqueued == config.backfill_rows,
        dataclasses.asdict(first),
        first_cpu,
    )
    figures.append(backfill)
    again, again_s, again_cpu = _timed(lambda: run_backfill(spark, url, queue, source, progress, mapping=mapping), cpu)
    figures.append(
        Figure(
            "backfill re-run",
            again.rows,
            again_s,
            f"<= {RERUN_SECONDS_MAX:g} s, 0 enqueued",
            again_s <= RERUN_SECONDS_MAX and again.enqueued == 0,
            dataclasses.asdict(again),
            again_cpu,
        )
    )
    floor = _database_part(spark, url, config, progress, cpu)
    figures.append(floor)
    if floor.seconds:
        backfill.detail["over_database_part"] = round(first_s / floor.seconds, 2)


def _database_part(
    spark: SparkSession, url: str, config: PipelineBenchConfig, progress: Progress, cpu: CpuMeter
) -> Figure:
    """The backfill's same-run baseline: its statements alone on the same rows, into a queue
    of its own (app.bench.pipeline_floor), after the backfill and its re-run."""
    from app.bench.pipeline_floor import run_database_part, task_batches
    from app.pipeline.backfill.plan import default_tasks, existing_queue

    fifo = config.backfill_kind == "fifo"
    name = "bench-floor.fifo" if fifo else "bench-floor"
    _make_queue(url, name)
    queue = existing_queue(url, name)
    at_once = spark.sparkContext.defaultParallelism
    with progress.step(f"the backfill's rows as its tasks get them: {config.backfill_rows:,} rows"):
        batches = task_batches(config.backfill_rows, config.groups, default_tasks(at_once), fifo)
    with progress.step("the backfill's statements alone (no Spark)", rows=config.backfill_rows) as step:
        enqueued, seconds, used = _timed(lambda: run_database_part(url, queue, batches, at_once), cpu)
        step.rows = enqueued
    return Figure("backfill's database part alone", enqueued, seconds, detail={"tasks_at_once": at_once}, cpu=used)


def _make_queue(url: str, name: str) -> None:
    import asyncio

    from app.db.queues import queue_insert
    from app.db.sessions import on_connection
    from app.domain import QueueAttributes

    attrs = QueueAttributes(fifo=name.endswith(".fifo"))
    asyncio.run(on_connection(url, lambda conn: queue_insert(conn, name, attrs, None)))


def _source(spark: SparkSession, path: Path, config: PipelineBenchConfig, progress: Progress) -> str:
    """The backfill's source (not timed): id, group, dedup id and a struct body of ~100 bytes."""
    from pyspark.sql import functions as F

    with progress.step(f"write the backfill source: {config.backfill_rows:,} rows (Parquet)"):
        rows = spark.range(config.backfill_rows).select(
            F.col("id"),
            F.concat(F.lit("g"), (F.col("id") % config.groups).cast("string")).alias("grp"),
            F.concat(F.lit("order-"), F.col("id").cast("string")).alias("dedup"),
            F.struct(
                F.lit("resize").alias("task"),
                F.col("id").alias("image"),
                F.lit("x" * 60).alias("note"),
            ).alias("body"),
        )
        rows.write.mode("overwrite").parquet(str(path))
    return str(path)


def table(figures: list[Figure], report: dict[str, Any]) -> Table:
    """The figures as a table."""
    db = report.get("database", {})
    out = Table(
        title=f"pqs bench pipeline  cores={report['machine']['cores']}  PostgreSQL {db.get('version')}"
        f"  fsync={db.get('fsync')}",
        title_justify="left",
    )
    for name, justify in (("step", "left"), ("rows", "right"), ("seconds", "right"), ("rows/s", "right")):
        out.add_column(name, justify=justify)  # type: ignore[arg-type]
    out.add_column("CPU-s pg/jvm/py", justify="right")
    out.add_column("target")
    out.add_column("result")
    over = next((f.detail["over_database_part"] for f in figures if "over_database_part" in f.detail), None)
    if over is not None:
        out.caption = f"the backfill took {over:.2f}x its database part alone (same rows and statements, no Spark)"
        out.caption_justify = "left"
    for f in figures:
        rate = f"{f.rows / f.seconds:,.0f}" if f.rows and f.seconds else ""
        verdict = "" if f.met is None else ("[green]met[/]" if f.met else "[red]missed[/]")
        cpu = "/".join(f"{f.cpu[k]:.1f}" if k in f.cpu else "-" for k in ("postgres", "jvm", "python")) if f.cpu else ""
        out.add_row(f.name, f"{f.rows:,}" if f.rows else "", f"{f.seconds:,.1f}", rate, cpu, f.target, verdict)
    return out
