"""`pqs bench [SCENARIO ...] [options]`: the command line of the bench (app.cli forwards to it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.bench.config import (
    APIS,
    HTTP_CLIENTS,
    KINDS,
    PIPELINE,
    SCENARIOS,
    STANDARD_SET,
    BenchConfig,
    parse_ints,
    quick,
)

HELP = (
    "Benchmark PQS over its HTTP API against the database's own INSERT commit rate.\n\n"
    f"SCENARIO: {', '.join(SCENARIOS)}, or all (default: {' '.join(STANDARD_SET)}).\n\n"
    f"`pqs bench {PIPELINE}` (alone) times the Spark pipeline instead: archive + report of "
    "--history-rows history rows, backfill of --backfill-rows rows and its re-run.\n\n"
    "Without --url the bench starts an embedded PostgreSQL (fsync on) in --data-dir (or uses "
    "PQS_DATABASE_URL / --database-url), creates a fresh database, and starts `pqs serve` on a free "
    "127.0.0.1 port; all of it is stopped and dropped at the end."
)

bench_app = typer.Typer(add_completion=False, help=HELP)


def _ints(value: str | None, name: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        return parse_ints(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=name) from None


@bench_app.command(help=HELP)
def bench(
    scenario: Annotated[list[str] | None, typer.Argument(help="Scenarios to run.", show_default=False)] = None,
    clients: Annotated[int, typer.Option(min=1, max=256, help="Concurrent HTTP clients.")] = 16,
    duration: Annotated[float, typer.Option(min=0.5, max=3600, help="Seconds per measurement.")] = 10.0,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="Worker processes of the started service (as `pqs serve`: 1).")
    ] = 1,
    url: Annotated[str | None, typer.Option(help="A running service (127.0.0.1) instead of starting one.")] = None,
    database_url: Annotated[
        str | None,
        typer.Option(help="Its database (with --url); without --url: the server to create the run's database on."),
    ] = None,
    data_dir: Annotated[Path, typer.Option(help="Data directory of the embedded PostgreSQL.")] = Path(".pqs/bench"),
    output: Annotated[Path, typer.Option(help="JSON file of the results.")] = Path("bench-results.json"),
    baseline_clients: Annotated[
        str | None, typer.Option(help="Baseline client counts, e.g. 1,4,16 (always includes --clients).")
    ] = None,
    batch: Annotated[str, typer.Option(help="send: batch sizes.")] = "1,10,1000",
    kind: Annotated[
        str | None, typer.Option(help="fifo|standard for send, consume, roundtrip (default: consume both).")
    ] = None,
    groups: Annotated[int, typer.Option(min=1, help="consume fifo / backlog fifo: message groups.")] = 1000,
    backlog: Annotated[str, typer.Option(help="consume: messages preloaded.")] = "100k",
    receive_batch: Annotated[int, typer.Option(min=1, max=100, help="consume: max_messages per receive.")] = 10,
    waiters: Annotated[int, typer.Option(min=1, max=200, help="wake: long-polling receivers.")] = 10,
    samples: Annotated[int, typer.Option(min=1, max=10_000, help="wake: messages sent.")] = 200,
    interval_ms: Annotated[float, typer.Option(min=1, max=10_000, help="wake: ms between sends.")] = 50.0,
    sizes: Annotated[str, typer.Option(help="backlog: queue sizes, e.g. 10000,1000000,10000000.")] = "10k,1M",
    backlog_kind: Annotated[str, typer.Option(help="backlog: fifo|standard|both.")] = "both",
    backlog_clients: Annotated[int, typer.Option(min=1, max=64, help="backlog: clients.")] = 2,
    fairness_backlog: Annotated[str, typer.Option(help="fairness: messages in the big group.")] = "100k",
    fairness_groups: Annotated[int, typer.Option(min=1, help="fairness: small groups (10 messages each).")] = 1000,
    soak_minutes: Annotated[float | None, typer.Option(min=0.1, max=24 * 60, help="soak: minutes (adds soak).")] = None,
    soak_rate: Annotated[int, typer.Option(min=1, help="soak: messages sent per second.")] = 500,
    soak_interval: Annotated[float, typer.Option(min=1, help="soak: seconds between samples.")] = 10.0,
    body_bytes: Annotated[int, typer.Option(min=30, max=1_000_000, help="Size of a message body.")] = 100,
    http: Annotated[str, typer.Option(help="Load generator's HTTP client: lean|httpx.")] = "lean",
    api: Annotated[
        str,
        typer.Option(
            help="send, consume: through the REST API, the SQS endpoint (SigV4, JSON), or both: rest|sqs|both."
        ),
    ] = "rest",
    rounds: Annotated[
        int,
        typer.Option(
            min=1,
            max=50,
            help="send, consume: run each shape this many times through each API, the APIs taking turns; "
            "SQS/REST is the median of the rounds' ratios.",
        ),
    ] = 1,
    quick_run: Annotated[bool, typer.Option("--quick", help="A smoke run of about a minute.")] = False,
    history_rows: Annotated[str, typer.Option(help="pipeline: history rows archived and reported.")] = "10M",
    backfill_rows: Annotated[str, typer.Option(help="pipeline: rows backfilled.")] = "1M",
    backfill_kind: Annotated[str, typer.Option(help="pipeline: fifo|standard queue to backfill.")] = "fifo",
    master: Annotated[str, typer.Option(help="pipeline: Spark master.")] = "local[*]",
) -> None:
    """Run the benchmark."""
    if PIPELINE in (scenario or []):
        if scenario != [PIPELINE]:
            raise typer.BadParameter(f"{PIPELINE} runs on its own", param_hint="SCENARIO")
        if backfill_kind not in KINDS:
            raise typer.BadParameter(f"expected one of {', '.join(KINDS)}", param_hint="--backfill-kind")
        _pipeline(
            history_rows=(_ints(history_rows, "--history-rows") or (1,))[0],
            backfill_rows=(_ints(backfill_rows, "--backfill-rows") or (1,))[0],
            backfill_kind=backfill_kind,
            master=master,
            database_url=database_url,
            data_dir=data_dir,
            output=output,
        )
        return
    chosen = _scenarios(scenario or [])
    if soak_minutes is not None and "soak" not in chosen:
        chosen = (*chosen, "soak")
    for name, value, allowed in (
        ("--kind", kind, KINDS),
        ("--backlog-kind", backlog_kind, (*KINDS, "both")),
        ("--http", http, HTTP_CLIENTS),
        ("--api", api, tuple(APIS)),
    ):
        if value is not None and value not in allowed:
            raise typer.BadParameter(f"expected one of {', '.join(allowed)}", param_hint=name)
    config = BenchConfig(
        scenarios=chosen,
        clients=clients,
        duration=duration,
        workers=workers,
        url=url,
        database_url=database_url,
        data_dir=data_dir,
        output=output,
        baseline_clients=_ints(baseline_clients, "--baseline-clients") or (clients,),
        send_batches=_ints(batch, "--batch") or (),
        send_kind=kind or "standard",
        consume_kinds=(kind,) if kind else ("fifo", "standard"),
        groups=groups,
        backlog=(_ints(backlog, "--backlog") or (100_000,))[0],
        receive_batch=receive_batch,
        roundtrip_kind=kind or "standard",
        wake_waiters=waiters,
        wake_samples=samples,
        wake_interval=interval_ms / 1000,
        backlog_sizes=_ints(sizes, "--sizes") or (),
        backlog_kinds=KINDS if backlog_kind == "both" else (backlog_kind,),
        backlog_clients=backlog_clients,
        fairness_big=(_ints(fairness_backlog, "--fairness-backlog") or (100_000,))[0],
        fairness_groups=fairness_groups,
        soak_minutes=soak_minutes if soak_minutes is not None else 5.0,
        soak_rate=soak_rate,
        soak_interval=soak_interval,
        body_bytes=body_bytes,
        http=http,
        apis=APIS[api],
        rounds=rounds,
    )
    if any(b > 1000 for b in config.send_batches):
        raise typer.BadParameter("at most 1000", param_hint="--batch")
    if quick_run:
        config = quick(config)
    from app.bench.runner import run
    from app.bench.target import BenchError

    try:
        run(config)
    except BenchError as exc:
        typer.echo(f"pqs bench: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("pqs bench: interrupted", err=True)
        raise typer.Exit(130) from None


def _pipeline(**settings: object) -> None:
    from app.bench.pipeline import PipelineBenchConfig, run
    from app.bench.target import BenchError
    from app.pipeline.session import PipelineError

    try:
        run(PipelineBenchConfig(**settings))  # type: ignore[arg-type]
    except (BenchError, PipelineError) as exc:
        typer.echo(f"pqs bench: {exc}", err=True)
        raise typer.Exit(1) from None


def _scenarios(names: list[str]) -> tuple[str, ...]:
    if not names:
        return STANDARD_SET
    chosen: list[str] = []
    for name in names:
        if name == "all":
            chosen += SCENARIOS
        elif name in SCENARIOS:
            chosen.append(name)
        else:
            raise typer.BadParameter(f"unknown scenario {name!r}", param_hint="SCENARIO")
    return tuple(s for s in SCENARIOS if s in chosen)


def main(args: list[str]) -> None:
    """Entry from `pqs bench ...` (arguments after `bench`)."""
    bench_app(args=args, prog_name="pqs bench")
