"""The report's files: report.json (every figure), report.md (for people) and two PNG charts,
throughput.png (messages per hour, per queue) and latency.png (wait and processing time
percentiles per hour, all queues)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

# Queues drawn one by one in the throughput chart; the rest are summed as "other queues".
CHART_QUEUES = 8


def write_report(report: dict[str, Any], directory: Path) -> list[Path]:
    """Write every file of `report` into `directory`; the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / "report.json", directory / "report.md", directory / "throughput.png"]
    paths.append(directory / "latency.png")
    paths[0].write_text(json.dumps(report, indent=2) + "\n")
    paths[1].write_text(markdown(report))
    throughput_chart(report, paths[2])
    latency_chart(report, paths[3])
    return paths


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"


def _triple(p: dict[str, float | None]) -> str:
    return " / ".join(_num(p[k]) for k in ("p50", "p95", "p99"))


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown."""
    queues: dict[str, dict[str, Any]] = report["queues"]
    hours = [t["hour"] for t in report["timeline"]]
    span = f", hours {hours[0]} to {hours[-1]}" if hours else ""
    lines = [
        "# PQS report",
        "",
        f"Generated {report['generated_at']} from {report.get('source', 'history')}: "
        f"{report['messages']:,} finished messages in {len(queues)} queues{span} (UTC).",
        "Times are in seconds: wait = first receive - send; processing = ack - last receive (acked messages).",
        "",
        "![messages per hour](throughput.png)",
        "",
        "![latency percentiles per hour](latency.png)",
        "",
        "## Queues",
        "",
        "| queue | messages | acked | dead-lettered | expired | purged | dead-letter rate "
        "| wait p50 / p95 / p99 | processing p50 / p95 / p99 | peak msg/hour |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, q in queues.items():
        o = q["outcomes"]
        peak = max((h["messages"] for h in q["throughput_per_hour"]), default=0)
        lines.append(
            f"| {name} | {q['total']:,} | {o['acked']:,} | {o['dead_lettered']:,} | {o['expired']:,} "
            f"| {o['purged']:,} | {q['dead_letter_rate']:.2%} | {_triple(q['wait_seconds'])} "
            f"| {_triple(q['processing_seconds'])} | {peak:,} |"
        )
    for name, q in queues.items():
        lines += ["", f"## {name}", ""]
        active = q["throughput_per_hour"]
        if active:
            mean = sum(h["messages"] for h in active) / len(active)
            lines.append(f"Throughput: {len(active):,} active hours, {mean:,.1f} messages per active hour on average.")
            lines.append("")
        lines += ["| receives | messages |", "|---:|---:|"]
        lines += [f"| {k} | {v:,} |" for k, v in q["receive_counts"].items()]
        if q["top_errors"]:
            lines += ["", "| top errors | count |", "|---|---:|"]
            lines += [f"| {_cell(e['error'])} | {e['count']:,} |" for e in q["top_errors"]]
        if q["busiest_groups"]:
            lines += [
                "",
                "| busiest groups | messages | acked | dead-lettered | dead-letter rate | wait p50 / p95 / p99 "
                "| processing p50 / p95 / p99 |",
                "|---|---:|---:|---:|---:|---:|---:|",
            ]
            for g in q["busiest_groups"]:
                lines.append(
                    f"| {_cell(g['group_id'])} | {g['total']:,} | {g['outcomes']['acked']:,} "
                    f"| {g['outcomes']['dead_lettered']:,} | {g['dead_letter_rate']:.2%} "
                    f"| {_triple(g['wait_seconds'])} | {_triple(g['processing_seconds'])} |"
                )
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= 120 else flat[:117] + "..."


def _hour(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _hours(texts: list[str]) -> list[float]:
    """Hours as matplotlib date numbers (days since 1970-01-01, its default epoch), shown as dates
    by axes with xaxis_date()."""
    return [_hour(t).timestamp() / 86_400 for t in texts]


def throughput_chart(report: dict[str, Any], path: Path) -> None:
    """Messages finished per hour, one line per busiest queue."""
    from matplotlib.figure import Figure

    queues: dict[str, dict[str, Any]] = report["queues"]
    ranked = sorted(queues, key=lambda n: -queues[n]["total"])
    figure = Figure(figsize=(11, 5), dpi=100)
    axes = figure.add_subplot()
    other: dict[str, int] = {}
    for index, name in enumerate(ranked):
        series = queues[name]["throughput_per_hour"]
        if index < CHART_QUEUES:
            axes.plot(_hours([h["hour"] for h in series]), [h["messages"] for h in series], marker=".", label=name)
        else:
            for h in series:
                other[h["hour"]] = other.get(h["hour"], 0) + h["messages"]
    if other:
        hours = sorted(other)
        axes.plot(_hours(hours), [other[h] for h in hours], marker=".", label="other queues")
    axes.set_title("Throughput: messages finished per hour (UTC)")
    axes.set_ylabel("messages / hour")
    axes.set_ylim(bottom=0)
    axes.xaxis_date()
    axes.grid(True, alpha=0.3)
    if ranked:
        axes.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(path)


def latency_chart(report: dict[str, Any], path: Path) -> None:
    """Wait and processing time percentiles per hour, all queues together."""
    from matplotlib.figure import Figure

    timeline = report["timeline"]
    hours = _hours([t["hour"] for t in timeline])
    figure = Figure(figsize=(11, 7), dpi=100)
    for row, (key, title) in enumerate(
        (("wait_seconds", "Wait: first receive - send"), ("processing_seconds", "Processing: ack - last receive"))
    ):
        axes = figure.add_subplot(2, 1, row + 1)
        for p in ("p50", "p95", "p99"):
            values = [t[key][p] for t in timeline]
            axes.plot(hours, [float("nan") if v is None else v for v in values], marker=".", label=p)
        axes.set_title(f"{title} (seconds, per hour, UTC)")
        axes.set_ylabel("seconds")
        axes.xaxis_date()
        axes.grid(True, alpha=0.3)
        axes.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(path)
