"""Runs a bench: set up the target, measure the baseline, run the chosen scenarios in order (a
failing one becomes a row with its error, the others still run), then print and write the
report. Ctrl-C stops the run; the service and the run's database are cleaned up either way."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import platform
import re
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import psutil
import psycopg
import uvloop
from rich.console import Console

from app.bench import baseline, latency, scenarios, soak
from app.bench.client import Api, Meter
from app.bench.config import BenchConfig
from app.bench.context import Context, Display
from app.bench.report import ScenarioResult, compare_apis, judge, print_report, write_json
from app.bench.target import Target, open_target

_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")
SQS_MAX_BATCH = 10
# Scenarios quoted as a ratio to the baseline: they need it in the same run.
NEEDS_BASELINE = {"send", "consume", "roundtrip"}
SETTINGS_SHOWN = (
    "server_version",
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "shared_buffers",
    "max_connections",
    "wal_level",
    "checkpoint_timeout",
    "max_wal_size",
)


def run(config: BenchConfig, console: Console | None = None) -> dict[str, Any]:
    """Run the bench; the report as written to JSON (also when interrupted: partial)."""
    # A pipe gets the whole table, not one squeezed into 80 columns.
    console = console or (Console() if Console().is_terminal else Console(width=170))
    results: list[ScenarioResult] = []
    report: dict[str, Any] = {
        "pqs_bench": 1,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": [redact(arg) for arg in sys.argv],
        "machine": machine(),
        "settings": _settings(config),
        "baseline": {"runs": []},
    }
    interrupted = False
    display = Display(console)
    try:
        with display, open_target(config, display.say) as target:
            report["database"] = database_info(target.database_url, target.embedded)
            report["service"] = {
                "url": target.base_url,
                "started_by_bench": target.started_service,
                "workers": target.workers if target.started_service else _worker_count(target),
            }
            # uvloop: about a third less of the generator's CPU per request than asyncio's own loop
            # (measured against a trivial ASGI app), CPU the service and PostgreSQL then have.
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(_run_scenarios(config, target, display, results, report))
    except KeyboardInterrupt:
        interrupted = True
    report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    report["interrupted"] = interrupted
    report.setdefault("database", {})
    report.setdefault("service", {})
    compare_apis(results)
    if results:
        print_report(console, report, results)
    if config.output:
        write_json(config.output, report, results)
        console.print(f"results written to {config.output}")
    if interrupted:
        raise KeyboardInterrupt
    return {**report, "scenarios": [dataclasses.asdict(r) for r in results]}


async def _run_scenarios(
    config: BenchConfig,
    target: Target,
    display: Display,
    results: list[ScenarioResult],
    report: dict[str, Any],
) -> None:
    api = Api(target.base_url, config.http, target.api_key)
    ctx = Context(config=config, target=target, api=api, display=display)
    try:
        base_tps: float | None = None
        if "baseline" in config.scenarios or NEEDS_BASELINE & set(config.scenarios):
            runs = await _baseline(ctx, results)
            report["baseline"] = {
                "tool": runs[0].tool if runs else None,
                "seconds": config.duration,
                "statement": baseline.INSERT,
                "runs": [dataclasses.asdict(r) for r in runs],
            }
            base_tps = next((r.tps for r in runs if r.clients == config.ratio_clients), None)
            report["baseline"]["ratio_clients"] = config.ratio_clients
        for name, start in plan(ctx):
            try:
                result = await start()
            except Exception as exc:  # one failing scenario must not lose the others' figures
                result = ScenarioResult(
                    name=name,
                    scenario=name.split()[0],
                    params={},
                    messages=0,
                    seconds=0.0,
                    throughput=None,
                    latency_ms={},
                    primary="",
                    errors=1,
                    last_error=repr(exc)[:500],
                    summary="[red]failed[/]",
                )
            judge(result, base_tps)
            results.append(result)
            display.say(_line(result))
        await ctx.cleanup()
    finally:
        await api.close()
        if ctx.sqs is not None:
            await ctx.sqs.close()


def plan(ctx: Context) -> list[tuple[str, Callable[[], Awaitable[ScenarioResult]]]]:
    """The scenarios of this run in their fixed order, each with its variants."""
    config = ctx.config
    chosen = set(config.scenarios)
    steps: list[tuple[str, Callable[[], Awaitable[ScenarioResult]]]] = []

    def add(name: str, start: Callable[[], Awaitable[ScenarioResult]]) -> None:
        steps.append((name, start))

    # Each shape through each API asked for, back to back, `rounds` times: the machine's speed
    # drifts by the minute, so an SQS figure is compared with the REST figure taken beside it,
    # and the APIs take turns going first (REST, SQS, then SQS, REST...) so that a drift within a
    # round favours neither.
    def in_turn(round_no: int) -> tuple[str, ...]:
        return config.apis if round_no % 2 == 0 else config.apis[::-1]

    if "send" in chosen:
        for batch in config.send_batches:
            for round_no in range(config.rounds):
                for api in in_turn(round_no):
                    if api == scenarios.SQS and batch > SQS_MAX_BATCH:
                        continue  # SQS batches hold at most 10 messages
                    start = partial(scenarios.send, ctx, batch, api)
                    add(f"send batch={batch}", partial(_in_round, start, round_no))
    if "consume" in chosen:
        for kind in config.consume_kinds:
            for round_no in range(config.rounds):
                for api in in_turn(round_no):
                    add(f"consume {kind}", partial(_in_round, partial(scenarios.consume, ctx, kind, api), round_no))
    if "roundtrip" in chosen:
        add("roundtrip", lambda: scenarios.roundtrip(ctx, config.roundtrip_kind))
    if "wake" in chosen:
        add("wake", lambda: latency.wake(ctx))
    if "backlog" in chosen:
        for kind in config.backlog_kinds:
            add(f"backlog {kind}", lambda k=kind: latency.backlog(ctx, k))  # type: ignore[misc]
    if "fairness" in chosen:
        add("fairness", lambda: latency.fairness(ctx))
    if "soak" in chosen:
        add("soak", lambda: soak.soak(ctx))
    return steps


async def _in_round(start: Callable[[], Awaitable[ScenarioResult]], round_no: int) -> ScenarioResult:
    result = await start()
    result.round = round_no
    return result


async def _baseline(ctx: Context, results: list[ScenarioResult]) -> list[baseline.BaselineRun]:
    config = ctx.config
    url = ctx.target.database_url
    await asyncio.to_thread(baseline.prepare, url)
    runs = []
    for clients in config.all_baseline_clients():
        meter = Meter()
        cpu = ctx.cpu.start()
        async with ctx.display.track(f"baseline {clients} clients", config.duration, meter):
            run = await asyncio.to_thread(baseline.measure, url, clients, config.duration)
            meter.done = round(run.tps * run.seconds)
        runs.append(run)
        result = ScenarioResult(
            name=f"baseline c={clients}",
            scenario="baseline",
            params={"clients": clients, "tool": run.tool},
            messages=meter.done,
            seconds=run.seconds,
            throughput=round(run.tps, 1),
            latency_ms={},
            primary="",
            summary=f"{run.tool}: INSERT commits/s",
        )
        ctx.finish(result, meter, cpu)
        results.append(result)
        ctx.display.say(_line(result))
    return runs


def _line(result: ScenarioResult) -> str:
    rate = f"{result.throughput:,.0f} msg/s" if result.throughput is not None else ""
    lat = result.latency_ms.get(result.primary, {})
    p99 = f"  {result.primary} p99 {lat['p99']:.1f} ms" if "p99" in lat else ""
    ratio = f"  {result.ratio:.2f}x baseline" if result.ratio is not None and result.scenario != "baseline" else ""
    errors = f"  {result.errors} errors" if result.errors else ""
    name = f"{result.name} (SQS)" if result.api == "sqs" else result.name
    name += f" round {result.round + 1}" if result.round else ""
    return f"{name}: {rate}{ratio}{p99}{errors}  {result.summary}".replace("[red]", "").replace("[/]", "")


def machine() -> dict[str, Any]:
    """The machine the run was on."""
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory_mb": round(psutil.virtual_memory().total / 2**20),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def database_info(database_url: str, embedded: bool) -> dict[str, Any]:
    """Version and the settings that decide commit speed."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        info: dict[str, Any] = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in SETTINGS_SHOWN
        }
    info["version"] = info.pop("server_version")
    info["embedded"] = embedded
    return info


def _worker_count(target: Target) -> int | None:
    if target.service is None:
        return None
    return max(1, len(target.service.worker_pids()) - 1)


def _settings(config: BenchConfig) -> dict[str, Any]:
    data = dataclasses.asdict(config)
    data.pop("extra_env", None)
    if data["database_url"]:
        data["database_url"] = redact(data["database_url"])
    return {k: str(v) if isinstance(v, os.PathLike) else v for k, v in data.items()}


def redact(text: str) -> str:
    """A URL's password replaced by ***, so the JSON file can be shared."""
    return _PASSWORD.sub(r"\1***@", text)
