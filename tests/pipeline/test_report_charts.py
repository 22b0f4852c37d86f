"""The report's charts read well at any span: history over an hour, a day and a month, written
into message_history, its report figures computed by plain SQL (test_report.py holds Spark's
figures equal to these), drawn, and the drawn matplotlib objects checked: the time axis covers
the data and little more, its tick labels suit the span, every axis names its unit, each
queue's latency has its own scale, and too little history is said in words. The PNGs land in
PQS_CHART_DIR when it is set, for a person to look at."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import matplotlib.dates as mdates
import pytest
from matplotlib.figure import Figure

from app.pipeline.render import latency_figure, throughput_figure
from app.pipeline.report import bucket_seconds
from tests.pipeline.history import BASE, Finished, add_history, spread_history
from tests.pipeline.test_report import expected_report

HOUR, DAY = 3600.0, 86_400.0
# The span, the bucket it gets, and what every major tick label of that span looks like
# (matplotlib's concise date labels: times of day within a day, days across days).
SPANS = {
    "hour": (HOUR, 60, r"\d\d:\d\d"),
    "day": (DAY, 900, r"\d\d:\d\d|[A-Z][a-z]{2}-\d\d"),
    "month": (30 * DAY, 21_600, r"\d\d|[A-Z][a-z]{2}"),
}


def report_of(url: str, messages: list[Finished], span: float) -> dict[str, Any]:
    add_history(url, messages)
    return expected_report(url, top=3, width=bucket_seconds(span))


def drawn(figure: Figure, path: Path) -> Figure:
    """The figure written as a PNG (which draws it: tick labels are known after)."""
    chart_dir = os.environ.get("PQS_CHART_DIR")
    figure.savefig(Path(chart_dir) / path.name if chart_dir else path)
    return figure


def time_axes(figure: Figure) -> list[Any]:
    return [a for a in figure.axes if a.lines]


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.parametrize("name", list(SPANS))
def test_charts_fit_the_span(db_url: str, tmp_path: Path, name: str) -> None:
    span, width, tick = SPANS[name]
    report = report_of(db_url, spread_history(span), span)
    assert report["bucket_seconds"] == width
    first, last = _moment(report["first_finished"]), _moment(report["last_finished"])

    throughput = drawn(throughput_figure(report), tmp_path / f"throughput-{name}.png")
    latency = drawn(latency_figure(report), tmp_path / f"latency-{name}.png")

    assert len(time_axes(throughput)) == 1 and len(time_axes(latency)) == 6  # 3 queues, wait and processing
    for axes in time_axes(throughput) + time_axes(latency):
        low, high = (mdates.num2date(x, tz=UTC) for x in axes.get_xlim())
        # the buckets holding the data, and no more than a bucket beyond them on either side
        assert first - timedelta(seconds=width) <= low <= first and last <= high <= last + timedelta(seconds=2 * width)
        assert axes.get_ylim()[0] == 0
    # the bottom row of a chart shows the time (the rows above share it)
    for axes in time_axes(throughput) + time_axes(latency)[-2:]:
        low, high = (mdates.num2date(x, tz=UTC) for x in axes.get_xlim())
        labels = [t.get_text() for t in axes.get_xticklabels() if t.get_text()]
        assert 3 <= len(labels) <= 10 and len(set(labels)) == len(labels), labels
        assert all(re.fullmatch(tick, label) for label in labels), labels
        assert axes.get_xlabel() == f"time (UTC), {low:%Y-%m-%d %H:%M:%S} to {high:%Y-%m-%d %H:%M:%S}"
    bucket = {60: "minute", 900: "15 minutes", 21_600: "6 hours"}[width]
    assert time_axes(throughput)[0].get_ylabel() == f"messages per {bucket}"
    assert {line.get_label() for line in time_axes(throughput)[0].lines} == {"orders", "mail", "orders-dlq"}

    # each queue's latency on its own scale: the dead-letter queue's hours of waiting do not
    # flatten the others' sub-second ones
    units = {a.get_title(loc="left"): a.get_ylabel() for a in time_axes(latency)}
    assert units["orders-dlq: wait (first receive - send)"] == "h"
    assert units["orders: wait (first receive - send)"] in {"ms", "s"}
    assert units["mail: wait (first receive - send)"] in {"s", "min"}
    for axes in time_axes(latency):
        highest = max(max(y for y in line.get_ydata() if y == y) for line in axes.lines)  # type: ignore[union-attr]
        assert axes.get_ylim()[1] < 1.2 * highest


def test_too_little_history_is_said_in_words(db_url: str, tmp_path: Path) -> None:
    report = report_of(db_url, [Finished(queue="orders", sent=0.0), Finished(queue="orders", sent=0.3)], 0.3)

    for figure in (throughput_figure(report), latency_figure(report)):
        drawn(figure, tmp_path / "chart.png")
        assert not time_axes(figure)
        texts = [t.get_text() for a in figure.axes for t in a.texts]
        assert texts and texts[0].startswith("Too little history for a "), texts
        assert f"2 messages finished from {BASE:%Y-%m-%dT%H:%M}" in texts[0]


def test_a_queue_with_one_bucket_of_latency_says_so(db_url: str, tmp_path: Path) -> None:
    quiet = Finished(queue="rare", queue_id=9, sent=600.0)
    report = report_of(db_url, [*spread_history(HOUR, count=60), quiet], HOUR)

    figure = drawn(latency_figure(report), tmp_path / "latency.png")

    rare = [a for a in figure.axes if a.get_title(loc="left").startswith("rare: ")]
    assert len(rare) == 2 and not any(a.lines for a in rare)
    assert all(a.texts[0].get_text().startswith("too few buckets for a line: one, at ") for a in rare)
