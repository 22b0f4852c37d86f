"""The report's files: report.json (every figure), report.md (for people) and two PNG charts,
throughput.png (messages finished per bucket, per queue) and latency.png (wait and processing
time percentiles per bucket, a row of two panels per queue, each on its own scale and unit, so
that a dead-letter queue's long waits do not flatten the others).

Time axes span the history's buckets (report.py: bucket_seconds) and no more, with matplotlib's
date ticks chosen for that span (minutes for an hour, hours for a day, days for a month). A
chart or panel with fewer than MIN_BUCKETS buckets of data says so in words instead of drawing
a lone point."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.pipeline.latency import EXACT_VALUES, RELATIVE_ERROR

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Queues drawn one by one in the charts (the busiest); the throughput chart sums the rest as
# "other queues", the latency chart names how many it leaves out.
CHART_QUEUES = 8
# A line needs two points; with fewer buckets of data a chart says so instead.
MIN_BUCKETS = 2
PERCENTILE_KEYS = ("p50", "p95", "p99")
# Units for a latency panel: the largest that the panel's largest value holds at least twice
# (90 s reads as 90 s, 3 h as 3 h, 0.8 s as 800 ms).
UNITS = (("days", 86_400.0), ("h", 3_600.0), ("min", 60.0), ("s", 1.0), ("ms", 0.001))
BUCKET_NAMES = {1: "second", 60: "minute", 3600: "hour", 86_400: "day", 604_800: "week"}


def write_report(report: dict[str, Any], directory: Path) -> list[Path]:
    """Write every file of `report` into `directory`; the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / "report.json", directory / "report.md", directory / "throughput.png"]
    paths.append(directory / "latency.png")
    paths[0].write_text(json.dumps(report, indent=2) + "\n")
    paths[1].write_text(markdown(report))
    throughput_figure(report).savefig(paths[2])
    latency_figure(report).savefig(paths[3])
    return paths


def bucket_name(seconds: int) -> str:
    """A bucket width in words: "minute", "15 minutes", "6 hours"."""
    for size, unit in sorted(BUCKET_NAMES.items(), reverse=True):
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    return f"{seconds} seconds"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"


def _triple(p: dict[str, float | None]) -> str:
    return " / ".join(_num(p[k]) for k in PERCENTILE_KEYS)


# The error tables of a queue: caption, then the columns after "error" and "messages".
ERROR_TABLES = {
    "failures": (
        "Failures: messages that ended here without an ack, by the last error a consumer reported "
        "for them (one count per message, not per attempt).",
        ("dead_lettered", "expired", "purged"),
    ),
    "recovered": (
        "Recovered: messages acked here after a consumer had reported an error for them, by that "
        "error (the last one before the ack; one count per message).",
        (),
    ),
    "carried": (
        "Carried in: messages dead-lettered here from another queue, with the error they carried "
        "from it (counted as failures of that queue, not of this one).",
        (),
    ),
}


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown."""
    queues: dict[str, dict[str, Any]] = report["queues"]
    bucket = bucket_name(report["bucket_seconds"])
    span = f", finished {report['first_finished']} to {report['last_finished']}" if queues else ""
    lines = [
        "# PQS report",
        "",
        f"Generated {report['generated_at']} from {report.get('source', 'history')}: "
        f"{report['messages']:,} finished messages in {len(queues)} queues{span} (UTC).",
        "Times are in seconds: wait = first receive - send (a dead-letter queue's messages keep their "
        "first send, so their waits include the time in their source queue); processing = ack - last "
        "receive (acked messages). Percentiles are those of percentile_disc (the smallest value with at "
        f"least p of the values at or below it): exact for a queue, group or bucket of at most "
        f"{EXACT_VALUES:,} messages, within {RELATIVE_ERROR:.0%} of that value for a larger one.",
        f"Over time, messages are counted per {bucket} (the charts' buckets).",
        "",
        f"![messages finished per {bucket}](throughput.png)",
        "",
        f"![latency percentiles per {bucket}, per queue](latency.png)",
        "",
        "## Queues",
        "",
        "| queue | messages | acked | dead-lettered | expired | purged | dead-letter rate "
        f"| wait p50 / p95 / p99 | processing p50 / p95 / p99 | peak per {bucket} |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, q in queues.items():
        o = q["outcomes"]
        peak = max((b["messages"] for b in q["timeline"]), default=0)
        lines.append(
            f"| {name} | {q['total']:,} | {o['acked']:,} | {o['dead_lettered']:,} | {o['expired']:,} "
            f"| {o['purged']:,} | {q['dead_letter_rate']:.2%} | {_triple(q['wait_seconds'])} "
            f"| {_triple(q['processing_seconds'])} | {peak:,} |"
        )
    for name, q in queues.items():
        lines += ["", f"## {name}", ""]
        active = q["timeline"]
        if active:
            mean = sum(b["messages"] for b in active) / len(active)
            lines.append(
                f"Throughput: messages finished in {len(active):,} of the buckets (per {bucket}), "
                f"{mean:,.1f} in each of those on average."
            )
            lines.append("")
        lines += ["| receives | messages |", "|---:|---:|"]
        lines += [f"| {k} | {v:,} |" for k, v in q["receive_counts"].items()]
        lines += _error_tables(q["errors"])
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


def _error_tables(errors: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines: list[str] = []
    for kind, (caption, columns) in ERROR_TABLES.items():
        if not errors[kind]:
            continue
        heads = "".join(f" {c.replace('_', '-')} |" for c in columns)
        lines += ["", caption, "", f"| error | messages |{heads}", "|---|---:|" + "---:|" * len(columns)]
        for e in errors[kind]:
            cells = "".join(f" {e[c]:,} |" for c in columns)
            lines.append(f"| {_cell(e['error'])} | {e['messages']:,} |{cells}")
    return lines


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= 120 else flat[:117] + "..."


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def buckets(report: dict[str, Any]) -> list[datetime]:
    """The start of every bucket from the first finished message's to the last's (UTC)."""
    if report.get("first_finished") is None:
        return []
    width = report["bucket_seconds"]
    first, last = (_moment(report[k]).timestamp() for k in ("first_finished", "last_finished"))
    start = int(first // width) * width
    return [datetime.fromtimestamp(t, UTC) for t in range(start, int(last // width) * width + 1, width)]


def _ranked(report: dict[str, Any]) -> list[str]:
    queues: dict[str, dict[str, Any]] = report["queues"]
    return sorted(queues, key=lambda n: (-queues[n]["total"], n))


def _time_axis(axes: Axes, grid: list[datetime], width: int, label: bool = True) -> None:
    """An x axis over the buckets and no more, ticks chosen for the span, in UTC."""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=4, maxticks=9, tz=UTC)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    # the axis label states the dates of the span: no offset text beside it
    concise = mdates.ConciseDateFormatter(locator, tz=UTC, offset_formats=[""] * 6)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_formatter(concise)
    end = grid[-1] + timedelta(seconds=width)
    axes.set_xlim(grid[0], end)  # type: ignore[arg-type]
    if label:
        axes.set_xlabel(f"time (UTC), {grid[0]:%Y-%m-%d %H:%M:%S} to {end:%Y-%m-%d %H:%M:%S}")
    axes.grid(True, alpha=0.3)


def _too_little(axes: Axes, text: str, alone: bool = True) -> None:
    """Words where a chart would show a lone point (`alone`: no time axis either; a panel
    sharing its time axis with others keeps it)."""
    # (left out of the layout: a long line would squeeze the panels around it)
    words = axes.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=axes.transAxes)
    words.set_in_layout(False)
    if alone:
        axes.set_xticks([])
    axes.set_yticks([])


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def throughput_figure(report: dict[str, Any]) -> Figure:
    """Messages finished per bucket, a line per busiest queue (empty buckets are zeros)."""
    width = report["bucket_seconds"]
    bucket = bucket_name(width)
    grid = buckets(report)
    figure = _figure(11, 5)
    axes = figure.add_subplot()
    axes.set_title(f"Throughput: messages finished per {bucket} (UTC)")
    if len(grid) < MIN_BUCKETS:
        _too_little(axes, _too_little_text(report, "throughput"))
        return figure
    index = {t.strftime("%Y-%m-%dT%H:%M:%SZ"): i for i, t in enumerate(grid)}
    # a step per bucket, the last one closed at the bucket's end
    edges = [*grid, grid[-1] + timedelta(seconds=width)]
    ranked = _ranked(report)
    other = [0] * len(grid)
    for rank, name in enumerate(ranked):
        counts = [0] * len(grid)
        for b in report["queues"][name]["timeline"]:
            counts[index[b["start"]]] += b["messages"]
        if rank < CHART_QUEUES:
            axes.plot(edges, [*counts, counts[-1]], drawstyle="steps-post", label=name)  # type: ignore[arg-type]
        else:
            other = [a + b for a, b in zip(other, counts, strict=True)]
    if len(ranked) > CHART_QUEUES:
        axes.plot(edges, [*other, other[-1]], drawstyle="steps-post", label="other queues")  # type: ignore[arg-type]
    _time_axis(axes, grid, width)
    axes.set_ylabel(f"messages per {bucket}")
    axes.set_ylim(bottom=0)
    figure.legend(loc="outside right upper", fontsize="small")
    return figure


def _too_little_text(report: dict[str, Any], chart: str) -> str:
    if not report["queues"]:
        return f"No {chart} to draw: the history holds no finished message."
    return (
        f"Too little history for a {chart} chart: {report['messages']:,} messages finished "
        f"from {report['first_finished']} to {report['last_finished']}, "
        f"fewer than {MIN_BUCKETS} buckets (per {bucket_name(report['bucket_seconds'])}) to draw a line through."
    )


def latency_unit(largest: float) -> tuple[str, float]:
    """The unit to show values up to `largest` seconds in, and its size in seconds."""
    return next(((name, size) for name, size in UNITS if largest >= 2 * size), UNITS[-1])


def latency_figure(report: dict[str, Any]) -> Figure:
    """Wait and processing percentiles per bucket: a row per busiest queue, each panel on its
    own scale and unit."""
    width = report["bucket_seconds"]
    grid = buckets(report)
    ranked = _ranked(report)
    shown = ranked[:CHART_QUEUES]
    figure = _figure(12, 1.2 + 2.6 * max(1, len(shown)))
    left = f" ({len(ranked) - len(shown)} quieter queues not drawn)" if len(ranked) > len(shown) else ""
    figure.suptitle(f"Latency per queue, percentiles per {bucket_name(width)} (UTC){left}")
    if not shown or len(grid) < MIN_BUCKETS:
        _too_little(figure.add_subplot(), _too_little_text(report, "latency"))
        return figure
    index = {t.strftime("%Y-%m-%dT%H:%M:%SZ"): i for i, t in enumerate(grid)}
    middles = [t + timedelta(seconds=width / 2) for t in grid]
    panels = figure.subplots(len(shown), 2, sharex=True, squeeze=False)
    for row, name in enumerate(shown):
        timeline = report["queues"][name]["timeline"]
        for column, (key, what) in enumerate(
            (("wait_seconds", "wait (first receive - send)"), ("processing_seconds", "processing (ack - last receive)"))
        ):
            axes = panels[row][column]
            axes.set_title(f"{name}: {what}", fontsize="medium", loc="left")
            series = {p: [float("nan")] * len(grid) for p in PERCENTILE_KEYS}
            for b in timeline:
                for p in PERCENTILE_KEYS:
                    if b[key][p] is not None:
                        series[p][index[b["start"]]] = b[key][p]
            filled = sum(1 for v in series["p50"] if v == v)
            _time_axis(axes, grid, width, label=row == len(shown) - 1)
            if filled < MIN_BUCKETS:
                _too_little(axes, _panel_text(timeline, key, filled), alone=False)
                continue
            unit, size = latency_unit(max(v for v in series["p99"] if v == v))
            for p, style in zip(PERCENTILE_KEYS, ("-", "--", ":"), strict=True):
                values = [v / size for v in series[p]]
                axes.plot(middles, values, style, marker=".", markersize=4, label=p)
            axes.set_ylabel(unit)
            axes.set_ylim(bottom=0)
            if not figure.legends:
                figure.legend(loc="outside upper right", ncols=3, fontsize="small")
    return figure


def _panel_text(timeline: list[dict[str, Any]], key: str, filled: int) -> str:
    if not filled:
        return "no values (no message received)" if key == "wait_seconds" else "no values (no message acked)"
    at = next(b for b in timeline if b[key]["p50"] is not None)
    return f"too few buckets for a line: one, at {at['start']},\np50 / p95 / p99 {_triple(at[key])} s"
