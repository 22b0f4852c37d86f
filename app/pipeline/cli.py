"""`pqs pipeline archive|report|backfill`: the Spark jobs from the command line.

`pqs pipeline` (app/cli.py) forwards to this module only when it runs, and PySpark is imported only when
a command runs: `pqs serve` and the web app never load the pipeline."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from app.config import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from app.pipeline.progress import Progress

T = TypeVar("T")

pipeline_app = typer.Typer(
    help="Spark jobs on the message history and the queues: archive, report, backfill "
    "(needs the pipeline extra: pip install -e '.\\[pipeline]').",
    no_args_is_help=True,
    add_completion=False,
)

MasterOption = Annotated[
    str, typer.Option("--master", help="Spark master: local[*], local[N,retries], spark://..., yarn, k8s://...")
]
DatabaseOption = Annotated[
    str | None,
    typer.Option("--database-url", help="PostgreSQL (libpq URL); default PQS_DATABASE_URL, else the embedded server."),
]
MemoryOption = Annotated[str, typer.Option("--driver-memory", help="Memory of the Spark driver.")]
ConfOption = Annotated[list[str] | None, typer.Option("--conf", help="Any Spark setting, KEY=VALUE (repeatable).")]
PartitionsOption = Annotated[
    int | None, typer.Option("--partitions", min=1, help="Spark tasks (default: from the cores).")
]


def _conf(pairs: list[str] | None) -> dict[str, str]:
    conf = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--conf")
        conf[key.strip()] = value.strip()
    return conf


def _database(url: str | None) -> str:
    if url:
        return url
    from app.db.embedded import direct_database_url

    # Batch work (JDBC reads, session advisory locks) needs the server itself, not a pooler.
    return direct_database_url(Settings())


@contextmanager
def _spark(master: str, memory: str, conf: list[str] | None) -> Iterator[SparkSession]:
    from app.pipeline.session import SparkOptions, spark_session

    with spark_session(SparkOptions(master=master, driver_memory=memory, conf=_conf(conf))) as spark:
        yield spark


def _before_spark(check: Callable[[], None]) -> None:
    """Check the input before Spark starts: a wrong path is one line and exit code 1, not a JVM's
    start-up and a page of warnings."""
    from app.pipeline.session import PipelineError

    try:
        check()
    except PipelineError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _run(master: str, memory: str, conf: list[str] | None, work: Callable[[SparkSession, Progress], T]) -> T:
    """Start Spark and run a job with progress on stderr; a PipelineError, or a database that
    cannot be reached, ends the command with one line and exit code 1."""
    from psycopg import OperationalError

    from app.pipeline.progress import Progress
    from app.pipeline.session import PipelineError

    # Starting the session is inside the `try`: a missing Java, JDBC driver or PySpark is a
    # PipelineError raised there, and it is told as one line like the jobs' own errors.
    try:
        with _spark(master, memory, conf) as spark, Progress() as progress:
            return work(spark, progress)
    except PipelineError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except OperationalError as exc:
        # psycopg's first line names the server and why ("connection refused", "password
        # authentication failed"), never the password.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        typer.echo(f"error: cannot reach the database: {reason}", err=True)
        raise typer.Exit(1) from None


@pipeline_app.command()
def archive(
    path: Annotated[
        str | None, typer.Option("--archive", help="Archive directory or URI (default: PQS_DATA_DIR/archive).")
    ] = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Then delete archived rows from PostgreSQL (committed batches only).")
    ] = False,
    batch_ids: Annotated[int, typer.Option("--batch-ids", min=1, help="History ids per batch at most.")] = 5_000_000,
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions", min=1, help="Spark tasks per batch, at least (default: the cores; 500k ids a task at most)."
        ),
    ] = None,
    master: MasterOption = "local[*]",
    database_url: DatabaseOption = None,
    driver_memory: MemoryOption = "2g",
    conf: ConfOption = None,
) -> None:
    """Write the message history past the watermark to Parquet (by queue and day)."""
    from app.pipeline.archive import run_archive

    target = path or str(Settings().data_dir / "archive")
    url = _database(database_url)
    result = _run(
        master,
        driver_memory,
        conf,
        lambda spark, p: run_archive(
            spark, url, target, p, prune=prune, partitions=partitions, max_batch_ids=batch_ids
        ),
    )
    typer.echo(
        f"archived {result.rows:,} rows in {len(result.batches)} batch(es) to {result.archive}; "
        f"watermark: history id {result.watermark:,}" + (f"; pruned {result.pruned:,} rows" if prune else "")
    )


@pipeline_app.command()
def report(
    path: Annotated[
        str | None, typer.Option("--archive", help="Archive to read (default: PQS_DATA_DIR/archive).")
    ] = None,
    from_database: Annotated[
        bool, typer.Option("--from-database", help="Read message_history in PostgreSQL instead of the archive.")
    ] = False,
    output: Annotated[Path | None, typer.Option(help="Directory of the report (default: PQS_DATA_DIR/report).")] = None,
    top_groups: Annotated[int, typer.Option(min=0, help="Busiest groups per queue.")] = 10,
    top_errors: Annotated[int, typer.Option(min=0, help="Most frequent errors per queue.")] = 10,
    master: MasterOption = "local[*]",
    database_url: DatabaseOption = None,
    driver_memory: MemoryOption = "2g",
    conf: ConfOption = None,
) -> None:
    """Throughput, wait and processing times, outcomes, receive counts and errors per queue and
    for its busiest groups: report.json, report.md and PNG charts."""
    from app.pipeline.paths import check_archive_to_read
    from app.pipeline.report import ReportOptions, run_report

    settings = Settings()
    directory = output or settings.data_dir / "report"
    options = ReportOptions(top_groups=top_groups, top_errors=top_errors)
    url = _database(database_url) if from_database else None
    source = None if from_database else (path or str(settings.data_dir / "archive"))
    if source is not None:
        _before_spark(lambda: check_archive_to_read(source))
    data, paths = _run(
        master,
        driver_memory,
        conf,
        lambda spark, p: run_report(spark, p, directory, archive=source, database_url=url, options=options),
    )
    typer.echo(f"{data['messages']:,} messages in {len(data['queues'])} queues; wrote {', '.join(map(str, paths))}")


@pipeline_app.command()
def backfill(
    source: Annotated[str, typer.Argument(help="File or directory of Parquet, CSV (with a header) or JSON lines.")],
    queue: Annotated[str, typer.Option("--queue", help="The queue to enqueue into (it must exist).")],
    fmt: Annotated[
        str | None, typer.Option("--format", help="parquet, csv or json (JSON lines); default: from the name.")
    ] = None,
    body: Annotated[
        str | None, typer.Option("--body", help="Column of the body (default: the unmapped columns as an object).")
    ] = None,
    body_text: Annotated[
        bool, typer.Option("--body-text", help="A string body column is plain text, not JSON text.")
    ] = False,
    group_id: Annotated[str | None, typer.Option("--group-id", help="Column of the group id (FIFO).")] = None,
    dedup_id: Annotated[str | None, typer.Option("--dedup-id", help="Column of the dedup id.")] = None,
    attributes: Annotated[
        str | None, typer.Option("--attributes", help="Column of the attributes (object of strings).")
    ] = None,
    key: Annotated[
        str | None, typer.Option("--key", help="Column of unique row keys (default: the row's content).")
    ] = None,
    order_by: Annotated[
        str | None, typer.Option("--order-by", help="Column giving FIFO order (default: the order rows are read).")
    ] = None,
    encoding: Annotated[
        str, typer.Option("--encoding", help="Of a CSV: utf-8 (a BOM is skipped), utf-16, latin-1, cp1252, ascii.")
    ] = "utf-8",
    partitions: PartitionsOption = None,
    master: MasterOption = "local[*]",
    database_url: DatabaseOption = None,
    driver_memory: MemoryOption = "2g",
    conf: ConfOption = None,
) -> None:
    """Enqueue the rows of files into a queue exactly once, through the API's enqueue path."""
    from app.pipeline.backfill import Mapping, run_backfill
    from app.pipeline.backfill.source import check_source
    from app.pipeline.backfill.spec import source_format

    _before_spark(lambda: check_source(source, source_format(source, fmt), encoding))
    settings = Settings()
    url = _database(database_url)
    mapping = Mapping(
        body=body,
        group_id=group_id,
        dedup_id=dedup_id,
        attributes=attributes,
        key=key,
        order_by=order_by,
        body_text=body_text,
    )
    result = _run(
        master,
        driver_memory,
        conf,
        lambda spark, p: run_backfill(
            spark,
            url,
            queue,
            source,
            p,
            fmt=fmt,
            mapping=mapping,
            partitions=partitions,
            dedup_window=settings.dedup_window_seconds,
            encoding=encoding,
        ),
    )
    typer.echo(json.dumps(result.__dict__))


def main(args: list[str]) -> None:
    """Entry from `pqs pipeline ...` (arguments after `pipeline`)."""
    pipeline_app(args=args, prog_name="pqs pipeline")
