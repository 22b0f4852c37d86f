"""Results of a run: each scenario's figures, its ratio to the baseline and the target it is held
to (met or missed); printed as a rich table and written as JSON."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

# The targets, as multiples of the baseline's commits/s at the same client count.
RATIO_TARGETS = {
    "consume fifo": 0.33,
    "consume standard": 0.5,
    "send batch=10": 1.5,
    "send batch=1000": 3.0,
    "roundtrip": 0.15,
}
# Issue 20's targets through the SQS endpoint, as multiples of the REST figure of the same run.
SQS_OVER_REST_TARGETS = {"consume fifo": 0.8, "send batch=10": 0.8}
BACKLOG_P99_RATIO_MAX = 1.5
BACKLOG_P99_MS_MAX = 10.0
WAKE_P99_MS_MAX = 20.0
FAIRNESS_FRACTION_MAX = 0.10


@dataclass
class Goal:
    """What a scenario is compared against, and whether it got there."""

    description: str
    value: float | None
    met: bool | None


@dataclass
class ScenarioResult:
    """One row of the report."""

    name: str
    scenario: str
    params: dict[str, Any]
    messages: int
    seconds: float
    throughput: float | None
    latency_ms: dict[str, dict[str, float | int]]
    primary: str  # the latency step shown in the table
    rss_mb: float | None = None
    cpu_percent: dict[str, float] = field(default_factory=dict)
    errors: int = 0
    last_error: str = ""
    baseline_tps: float | None = None
    ratio: float | None = None
    goal: Goal | None = None
    summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    api: str = "rest"  # the API it drove: rest, or sqs (the SQS endpoint)
    round: int = 0  # which of `--rounds` REST/SQS pairs it belongs to


def ratio_key(result: ScenarioResult) -> str:
    """The RATIO_TARGETS key of a throughput scenario ('consume fifo', 'send batch=10', ...)."""
    if result.scenario == "roundtrip":
        return "roundtrip"
    return result.name


def judge(result: ScenarioResult, baseline_tps: float | None) -> None:
    """Fill in the ratio to the baseline and the goal of `result`."""
    if result.throughput is not None and baseline_tps and result.scenario not in ("baseline", "soak"):
        result.baseline_tps = round(baseline_tps, 1)
        result.ratio = round(result.throughput / baseline_tps, 3)
    target = RATIO_TARGETS.get(ratio_key(result))
    if target is not None:
        met = None if result.ratio is None else result.ratio >= target
        result.goal = Goal(f">= {target}x base", result.ratio, met)
        return
    if result.scenario == "backlog":
        ratio = result.extra.get("p99_ratio")
        worst = result.extra.get("worst_p99_ms")
        met = None if ratio is None or worst is None else ratio <= BACKLOG_P99_RATIO_MAX and worst <= BACKLOG_P99_MS_MAX
        result.goal = Goal(f"p99 <= {BACKLOG_P99_MS_MAX:g} ms, ratio <= {BACKLOG_P99_RATIO_MAX}", ratio, met)
    elif result.scenario == "wake":
        p99 = result.latency_ms.get("wake", {}).get("p99")
        result.goal = Goal(f"p99 <= {WAKE_P99_MS_MAX:g} ms", p99, None if p99 is None else p99 <= WAKE_P99_MS_MAX)
    elif result.scenario == "fairness":
        fraction = result.extra.get("big_fraction")
        finished = result.extra.get("small_groups_finished")
        met = None if fraction is None else bool(finished) and fraction < FAIRNESS_FRACTION_MAX
        result.goal = Goal(f"big drained < {FAIRNESS_FRACTION_MAX:.0%}", fraction, met)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(results: list[ScenarioResult], title: str) -> Table:
    """The summary table, one row per scenario."""
    out = Table(title=title, title_justify="left")
    for name, justify in (
        ("scenario", "left"),
        ("msg/s", "right"),
        ("x base", "right"),
        ("latency", "left"),
        ("p50 ms", "right"),
        ("p95 ms", "right"),
        ("p99 ms", "right"),
        ("RSS MB", "right"),
        ("CPU % gen/svc/pg", "right"),
        ("errors", "right"),
        ("target", "left"),
        ("result", "left"),
    ):
        out.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in results:
        lat = r.latency_ms.get(r.primary, {})
        cpu = "/".join(f"{r.cpu_percent[k]:.0f}" for k in ("generator", "service", "postgres") if k in r.cpu_percent)
        if r.goal is None or r.goal.met is None:
            verdict = "" if r.goal is None else "[yellow]n/a[/]"
        else:
            verdict = "[green]met[/]" if r.goal.met else "[red]missed[/]"
        out.add_row(
            f"{r.name} round {r.round + 1}" if r.round else r.name,
            _fmt(r.throughput, 0),
            _fmt(r.ratio, 2),
            r.primary,
            _fmt(lat.get("p50"), 2),
            _fmt(lat.get("p95"), 2),
            _fmt(lat.get("p99"), 2),
            _fmt(r.rss_mb, 0),
            cpu,
            str(r.errors) if r.errors else "",
            f"{r.goal.description} {verdict}" if r.goal else "",
            r.summary,
        )
    return out


def compare_apis(results: list[ScenarioResult]) -> None:
    """Put in each SQS result its throughput over the REST result of the same name and round
    (`extra["sqs_over_rest"]`), and hold every SQS result of a name to its target
    (SQS_OVER_REST_TARGETS) by the median of that name's ratios: one pair is one sample of a
    machine whose speed drifts by the minute, several pairs taken in turn are a figure."""
    by_pair = {(r.name, r.round): r for r in results if r.api == "rest"}
    ratios: dict[str, list[float]] = {}
    for r in results:
        other = by_pair.get((r.name, r.round))
        if r.api != "sqs" or other is None:
            continue
        ratio = round(r.throughput / other.throughput, 3) if other.throughput and r.throughput is not None else None
        r.extra["sqs_over_rest"] = ratio
        if ratio is not None:
            ratios.setdefault(r.name, []).append(ratio)
    for r in results:
        target = SQS_OVER_REST_TARGETS.get(r.name)
        if r.api != "sqs" or target is None or "sqs_over_rest" not in r.extra:
            continue
        figure = round(statistics.median(ratios[r.name]), 3) if r.name in ratios else None
        r.goal = Goal(f">= {target}x REST", figure, None if figure is None else figure >= target)


def api_summary(results: list[ScenarioResult]) -> dict[str, dict[str, Any]]:
    """Per scenario run through both APIs: the median REST and SQS msg/s, every round's SQS/REST
    ratio, their median (the figure held to the target) and whether it is met."""
    summary: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r.name for r in results if r.api == "sqs" and "sqs_over_rest" in r.extra):
        rest = [r.throughput for r in results if r.name == name and r.api == "rest" and r.throughput is not None]
        sqs = [r for r in results if r.name == name and r.api == "sqs"]
        ratios = [r.extra["sqs_over_rest"] for r in sqs if r.extra.get("sqs_over_rest") is not None]
        goal = sqs[0].goal
        summary[name] = {
            "rest_msg_s": statistics.median(rest) if rest else None,
            "sqs_msg_s": statistics.median(t) if (t := [r.throughput for r in sqs if r.throughput]) else None,
            "ratios": ratios,
            "median_ratio": round(statistics.median(ratios), 3) if ratios else None,
            "target": goal.description if goal is not None else None,
            "met": goal.met if goal is not None else None,
        }
    return summary


def api_table(results: list[ScenarioResult]) -> Table:
    """Each scenario through both APIs: msg/s (medians over the rounds), every round's SQS/REST,
    their median and its target."""
    out = Table(title="SQS over REST, same run (medians over the rounds)", title_justify="left")
    for name in ("scenario", "REST msg/s", "SQS msg/s", "rounds' SQS/REST", "SQS/REST", "target"):
        out.add_column(name, justify="right" if "/" in name else "left")
    for name, row in api_summary(results).items():
        target = ""
        if row["met"] is not None:
            target = f"{row['target']} " + ("[green]met[/]" if row["met"] else "[red]missed[/]")
        out.add_row(
            name,
            _fmt(row["rest_msg_s"], 0),
            _fmt(row["sqs_msg_s"], 0),
            " ".join(f"{x:.2f}" for x in row["ratios"]),
            _fmt(row["median_ratio"], 2),
            target,
        )
    return out


def print_report(console: Console, report: dict[str, Any], results: list[ScenarioResult]) -> None:
    """The header lines and the table."""
    machine, db, svc = report["machine"], report["database"], report["service"]
    console.print(
        f"[bold]pqs bench[/]  cores={machine['cores']}  PostgreSQL {db.get('version')}  fsync={db.get('fsync')}"
        f"  synchronous_commit={db.get('synchronous_commit')}  workers={svc.get('workers')}"
        f"  clients={report['settings']['clients']}"
    )
    for run in report["baseline"]["runs"]:
        console.print(f"baseline ({run['tool']}): {run['clients']} clients -> {run['tps']:,.0f} INSERT commits/s")
    rest = [r for r in results if r.api != "sqs"]
    sqs = [r for r in results if r.api == "sqs"]
    console.print(table(rest, "results (x base: msg/s over the baseline at the same client count)"))
    if sqs:
        console.print(table(sqs, "through the SQS endpoint (AWS JSON 1.0, every request signed with SigV4)"))
        console.print(api_table(results))
    for r in results:
        if r.errors:
            console.print(f"[yellow]{escape(r.name)}: {r.errors} errors, last: {escape(r.last_error)}[/]")


def write_json(path: Path, report: dict[str, Any], results: list[ScenarioResult]) -> None:
    """The report and every result, as JSON."""
    data = {**report, "sqs_over_rest": api_summary(results), "scenarios": [asdict(r) for r in results]}
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
