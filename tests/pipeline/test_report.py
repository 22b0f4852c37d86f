"""`pqs pipeline report`: every figure equals a plain SQL computation over message_history on a
small fixture, whether Spark reads the archive or PostgreSQL; the files are written. The
charts' axes are checked in test_report_charts.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from app.pipeline.archive import archive_schema, run_archive
from app.pipeline.latency import RELATIVE_ERROR
from app.pipeline.progress import Progress
from app.pipeline.report import ReportOptions, compute, run_report
from tests.pipeline.history import Finished, add_history

pytestmark = pytest.mark.xdist_group("pipeline")

HOUR = 3600.0
PCT = "ARRAY[0.5, 0.95, 0.99]"
WAIT = "extract(epoch FROM first_received_at - sent_at)::float8"
PROCESSING = "extract(epoch FROM finished_at - last_received_at)::float8"
ERROR_TEXT = "coalesce(error->>'message', error::text)"
# Which error table a row counts in: carried in with a dead-lettered message (the same message id
# and error as a dead-lettered row of another queue), else by how the message ended.
ERROR_KIND = """CASE WHEN h.error IS NULL THEN NULL
    WHEN EXISTS (SELECT 1 FROM message_history d WHERE d.outcome = 'dead_lettered'
                 AND d.message_id = h.message_id AND d.error = h.error AND d.queue_id <> h.queue_id) THEN 'carried'
    WHEN h.outcome = 'acked' THEN 'recovered' ELSE 'failures' END"""


def bucket_text(width: int) -> str:
    """A row's bucket start as the report writes it."""
    start = f"to_timestamp(floor(extract(epoch FROM finished_at) / {width}) * {width})"
    return f"to_char({start} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"


def fixture_history() -> list[Finished]:
    """Three queues over three hours, one the dead-letter queue of another: varied waits and
    processing times, retries, dead letters (carrying their errors, or not), expiries, errors of
    two shapes, and FIFO groups of different sizes."""
    messages = []
    for i in range(23):
        outcome = "dead_lettered" if i % 7 == 3 else "expired" if i % 11 == 5 else "acked"
        messages.append(
            Finished(
                queue="jobs",
                sent=i * 431.0,
                wait=None if outcome == "expired" and i % 2 else 0.25 * i + (i % 4),
                redelivery=30.0 * (i % 3),
                processing=0.5 + (i * 37 % 13),
                receive_count=1 + i % 3,
                outcome=outcome,
                error={"message": "timeout"} if i % 3 == 1 else ({"code": 7} if i % 5 == 2 else None),
                result={"ok": True} if outcome == "acked" else None,
            )
        )
    # jobs' dead letters in their dead-letter queue: sent when first sent to jobs, with jobs' last
    # error (carried), unless a consumer of the DLQ reported one of its own (recovered there).
    for number, source in enumerate([m for m in messages if m.outcome == "dead_lettered"]):
        messages.append(
            Finished(
                queue="jobs-dlq",
                queue_id=3,
                message_id=source.message_id,
                sent=source.sent,
                wait=HOUR / 2 + 300.0 * number,
                processing=1.0,
                receive_count=1,
                error={"message": "still broken"} if number == 0 else source.error,
            )
        )
    sizes = {"g1": 6, "g2": 4, "g3": 4, "g4": 1}
    for group, size in sizes.items():
        for k in range(size):
            messages.append(
                Finished(
                    queue="mail.fifo",
                    queue_id=2,
                    group_id=group,
                    sent=HOUR * (k % 3) + 17 * k,
                    wait=2.0 + k * 1.5 + len(group),
                    processing=1.0 + k,
                    receive_count=1 if k % 4 else 2,
                    outcome="dead_lettered" if group == "g2" and k == 3 else "acked",
                    error="bounced" if k == 1 else None,
                )
            )
    return messages


def _pct(values: list[float] | None) -> dict[str, float | None]:
    if values is None:
        return {"p50": None, "p95": None, "p99": None}
    return dict(zip(("p50", "p95", "p99"), values, strict=True))


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    outcomes = {o: row[o] for o in ("acked", "dead_lettered", "expired", "purged")}
    return {
        "total": row["total"],
        "outcomes": outcomes,
        "dead_letter_rate": outcomes["dead_lettered"] / row["total"],
        "wait_seconds": _pct(row["wait"]),
        "processing_seconds": _pct(row["processing"]),
    }


METRICS = f"""
    count(*) AS total,
    count(*) FILTER (WHERE outcome = 'acked') AS acked,
    count(*) FILTER (WHERE outcome = 'dead_lettered') AS dead_lettered,
    count(*) FILTER (WHERE outcome = 'expired') AS expired,
    count(*) FILTER (WHERE outcome = 'purged') AS purged,
    percentile_disc({PCT}) WITHIN GROUP (ORDER BY {WAIT}) AS wait,
    percentile_disc({PCT}) WITHIN GROUP (ORDER BY {PROCESSING}) FILTER (WHERE outcome = 'acked') AS processing
"""


def expected_report(url: str, top: int, width: int) -> dict[str, Any]:
    """The report's figures by plain SQL (percentile_disc for the percentiles), over time in
    buckets of `width` seconds."""
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:

        def rows(sql: str) -> list[dict[str, Any]]:
            return conn.execute(sql).fetchall()  # type: ignore[arg-type]

        queues: dict[str, Any] = {}
        for r in rows(f"SELECT queue_name AS queue, {METRICS} FROM message_history GROUP BY 1 ORDER BY 1"):
            queues[r["queue"]] = {
                **_figures(r),
                "receive_counts": {},
                "timeline": [],
                "errors": {"failures": [], "recovered": [], "carried": []},
                "busiest_groups": [],
            }
        for r in rows(
            "SELECT queue_name AS queue, receive_count, count(*) AS n FROM message_history GROUP BY 1, 2 ORDER BY 1, 2"
        ):
            queues[r["queue"]]["receive_counts"][str(r["receive_count"])] = r["n"]
        for r in rows(
            f"SELECT queue_name AS queue, {bucket_text(width)} AS start, {METRICS} FROM message_history"
            " GROUP BY 1, 2 ORDER BY 1, 2"
        ):
            queues[r["queue"]]["timeline"].append(
                {
                    "start": r["start"],
                    "messages": r["total"],
                    "wait_seconds": _pct(r["wait"]),
                    "processing_seconds": _pct(r["processing"]),
                }
            )
        for r in rows(
            f"SELECT * FROM (SELECT queue_name AS queue, kind, {ERROR_TEXT} AS error, count(*) AS n,"
            " count(*) FILTER (WHERE outcome = 'dead_lettered') AS dead_lettered,"
            " count(*) FILTER (WHERE outcome = 'expired') AS expired,"
            " count(*) FILTER (WHERE outcome = 'purged') AS purged,"
            f" row_number() OVER (PARTITION BY queue_name, kind ORDER BY count(*) DESC, {ERROR_TEXT}) AS rank"
            f" FROM (SELECT h.*, {ERROR_KIND} AS kind FROM message_history h) k"
            " WHERE kind IS NOT NULL GROUP BY 1, 2, 3) e WHERE rank <= 10 ORDER BY queue, kind, rank"
        ):
            outcomes = ("dead_lettered", "expired", "purged") if r["kind"] == "failures" else ()
            queues[r["queue"]]["errors"][r["kind"]].append(
                {"error": r["error"], "messages": r["n"], **{o: r[o] for o in outcomes}}
            )
        for r in rows(
            f"SELECT * FROM (SELECT queue_name AS queue, group_id, {METRICS},"
            " row_number() OVER (PARTITION BY queue_name ORDER BY count(*) DESC, group_id) AS rank"
            f" FROM message_history WHERE group_id IS NOT NULL GROUP BY 1, 2) g WHERE rank <= {top}"
            " ORDER BY queue, rank"
        ):
            queues[r["queue"]]["busiest_groups"].append({"group_id": r["group_id"], **_figures(r)})
        span = rows(
            "SELECT to_char(min(finished_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS first,"
            " to_char(max(finished_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS last"
            " FROM message_history"
        )[0]
    return {
        "messages": sum(q["total"] for q in queues.values()),
        "first_finished": span["first"],
        "last_finished": span["last"],
        "bucket_seconds": width,
        "queues": queues,
    }


def assert_same(actual: Any, expected: Any, where: str = "report") -> None:
    """Equal, floats to a microsecond."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), where
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, abs=1e-6), where
    else:
        assert actual == expected, where


@pytest.mark.parametrize("source", ["archive", "database"])
def test_report_figures_match_plain_sql(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress, source: str
) -> None:
    add_history(db_url, fixture_history())
    archive = None
    if source == "archive":
        run_archive(spark, db_url, str(tmp_path / "archive"), progress)
        archive = str(tmp_path / "archive")

    report, paths = run_report(
        spark,
        progress,
        tmp_path / "report",
        archive=archive,
        database_url=None if archive else db_url,
        options=ReportOptions(top_groups=3),
    )

    # the history spans under three hours: minutes fit (at most 200 buckets)
    expected = expected_report(db_url, top=3, width=60)
    assert_same({k: report[k] for k in expected}, expected)
    assert report["source"] == ("postgresql" if archive is None else (tmp_path / "archive").as_uri())
    # the fixture exercises what it should
    jobs, dlq = report["queues"]["jobs"], report["queues"]["jobs-dlq"]
    assert set(jobs["receive_counts"]) == {"0", "1", "2", "3"} and len(jobs["timeline"]) == 23
    assert {e["error"] for e in jobs["errors"]["failures"]} == {"timeout", '{"code": 7}'}
    assert {e["error"] for e in jobs["errors"]["recovered"]} == {"timeout", '{"code": 7}'}
    assert [e["messages"] for e in dlq["errors"]["carried"]] == [1, 1] and not dlq["errors"]["failures"]
    assert dlq["errors"]["recovered"] == [{"error": "still broken", "messages": 1}]
    assert [g["group_id"] for g in report["queues"]["mail.fifo"]["busiest_groups"]] == ["g1", "g2", "g3"]
    assert 0 < jobs["dead_letter_rate"] < 1

    assert [p.name for p in paths] == ["report.json", "report.md", "throughput.png", "latency.png"]
    assert json.loads(paths[0].read_text()) == report
    markdown = paths[1].read_text()
    assert "| jobs | 23 |" in markdown and "## mail.fifo" in markdown and "| g1 | 6 |" in markdown
    assert "Failures: messages that ended here without an ack" in markdown
    assert "exact for a queue, group or bucket of at most 1,000 messages, within 1% of" in markdown
    assert "Carried in: messages dead-lettered here from another queue" in markdown
    for png in paths[2:]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_report_of_an_empty_history(spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress) -> None:
    report, paths = run_report(spark, progress, tmp_path / "report", archive=str(tmp_path / "nothing"))

    assert report["messages"] == 0 and report["queues"] == {} and report["first_finished"] is None
    assert all(p.exists() for p in paths)


def test_busiest_groups_of_as_many_messages_go_by_group_id(spark: SparkSession, progress: Progress) -> None:
    """Groups are counted before their figures are computed: of groups with as many messages,
    the first group id is the busier, at the cut-off of the top N and in the order shown."""
    sizes: dict[str, dict[str | None, int]] = {
        "a.fifo": {"g3": 3, "g2": 2, "g1": 2, "g0": 1},
        "b.fifo": {"gB": 2, "gA": 2},
        "plain": {None: 5},
    }
    history = [
        Finished(queue=queue, queue_id=number, group_id=group, sent=10.0 * k, wait=1.0 + k)
        for number, (queue, groups) in enumerate(sizes.items(), start=1)
        for group, size in groups.items()
        for k in range(size)
    ]
    # the archive's columns, in its schema's order: id, then the history row's with the queue's
    # name last, the message id as text, no result nor error; then day and batch
    archived = []
    for i, m in enumerate(history, start=1):
        queue_id, queue, message_id, *times, receive_count, outcome, _, _ = m.row(i)
        archived.append((i, queue_id, str(message_id), *times, receive_count, outcome, None, None, queue, None, 1))
    rows = spark.createDataFrame(archived, archive_schema())

    report = compute(spark, rows, ReportOptions(top_groups=2), progress)

    busiest = {q: [(g["group_id"], g["total"]) for g in f["busiest_groups"]] for q, f in report["queues"].items()}
    assert busiest == {"a.fifo": [("g3", 3), ("g1", 2)], "b.fifo": [("gA", 2), ("gB", 2)], "plain": []}
    g3 = report["queues"]["a.fifo"]["busiest_groups"][0]
    assert g3["wait_seconds"] == {"p50": 2.0, "p95": 3.0, "p99": 3.0} and g3["outcomes"]["acked"] == 3


def _disc(url: str, where: str) -> dict[str, dict[str, float]]:
    """percentile_disc of wait and processing over the history rows `where` says."""
    sql = (
        f"SELECT percentile_disc({PCT}) WITHIN GROUP (ORDER BY {WAIT}) AS wait,"
        f" percentile_disc({PCT}) WITHIN GROUP (ORDER BY {PROCESSING}) FILTER (WHERE outcome = 'acked') AS processing"
        f" FROM message_history WHERE {where}"
    )
    with psycopg.connect(url) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return {"wait_seconds": _pct(row[0]), "processing_seconds": _pct(row[1])}  # type: ignore[dict-item]


def test_percentiles_exact_up_to_the_limit_within_one_percent_beyond(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    """A key (queue, group, bucket) of at most 1,000 messages has exact percentiles; a
    larger one's are within RELATIVE_ERROR of percentile_disc. The values crowd into a few
    percent, so a logarithmic bin holds many of them: a group at the limit read from bins
    instead of its values, or a rank off by one, would show."""
    sizes = {"at-limit": 1_000, "over": 1_200}  # the limit the docs promise: 1,000 messages
    history = [
        Finished(
            queue="q.fifo",
            group_id=group,
            sent=0.0,  # every message in one bucket of a second
            wait=1.0 + (k * 7919 % 1009) * 0.0001,
            processing=2.0 + (k * 104729 % 1013) * 0.0002,
            outcome="expired" if k % 10 == 3 else "acked",
        )
        for group, size in sizes.items()
        for k in range(size)
    ]
    add_history(db_url, history)

    report, _ = run_report(
        spark, progress, tmp_path / "report", database_url=db_url, options=ReportOptions(top_groups=2)
    )

    queue = report["queues"]["q.fifo"]
    groups = {g["group_id"]: g for g in queue["busiest_groups"]}
    (bucket,) = queue["timeline"]
    assert bucket["messages"] == queue["total"] == sum(sizes.values())
    exact = _disc(db_url, "group_id = 'at-limit'")
    assert {k: groups["at-limit"][k] for k in exact} == exact
    inexact = 0
    for where, figures in [("true", queue), ("true", bucket), ("group_id = 'over'", groups["over"])]:
        for metric, expected in _disc(db_url, where).items():
            for p, value in expected.items():
                assert value is not None
                actual = figures[metric][p]
                assert abs(actual - value) <= RELATIVE_ERROR * value * (1 + 1e-9), (where, metric, p)
                inexact += actual != value
    assert inexact > 0  # the larger keys' figures come from logarithmic bins
