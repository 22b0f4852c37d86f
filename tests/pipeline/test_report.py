"""`pqs pipeline report`: every figure equals a plain SQL computation over message_history on a
small fixture, whether Spark reads the archive or PostgreSQL; the files are written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from app.pipeline.archive import run_archive
from app.pipeline.progress import Progress
from app.pipeline.report import ReportOptions, run_report
from tests.pipeline.history import Finished, add_history

pytestmark = pytest.mark.xdist_group("pipeline")

HOUR = 3600.0
PCT = "ARRAY[0.5, 0.95, 0.99]"
WAIT = "extract(epoch FROM first_received_at - sent_at)::float8"
PROCESSING = "extract(epoch FROM finished_at - last_received_at)::float8"
HOUR_TEXT = "to_char(date_trunc('hour', finished_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD\"T\"HH24:00:00\"Z\"')"
ERROR_TEXT = "coalesce(error->>'message', error::text)"


def fixture_history() -> list[Finished]:
    """Two queues over three hours: varied waits and processing times, retries, dead letters,
    expiries, errors of two shapes, and FIFO groups of different sizes."""
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


def expected_report(url: str, top: int) -> dict[str, Any]:
    """The report's figures by plain SQL (percentile_disc for the percentiles)."""
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:

        def rows(sql: str) -> list[dict[str, Any]]:
            return conn.execute(sql).fetchall()  # type: ignore[arg-type]

        queues: dict[str, Any] = {}
        for r in rows(f"SELECT queue_name AS queue, {METRICS} FROM message_history GROUP BY 1 ORDER BY 1"):
            queues[r["queue"]] = {
                **_figures(r),
                "receive_counts": {},
                "throughput_per_hour": [],
                "top_errors": [],
                "busiest_groups": [],
            }
        for r in rows(
            "SELECT queue_name AS queue, receive_count, count(*) AS n FROM message_history GROUP BY 1, 2 ORDER BY 1, 2"
        ):
            queues[r["queue"]]["receive_counts"][str(r["receive_count"])] = r["n"]
        for r in rows(
            f"SELECT queue_name AS queue, {HOUR_TEXT} AS hour, count(*) AS n FROM message_history"
            " GROUP BY 1, 2 ORDER BY 1, 2"
        ):
            queues[r["queue"]]["throughput_per_hour"].append({"hour": r["hour"], "messages": r["n"]})
        for r in rows(
            f"SELECT * FROM (SELECT queue_name AS queue, {ERROR_TEXT} AS error, count(*) AS n,"
            f" row_number() OVER (PARTITION BY queue_name ORDER BY count(*) DESC, {ERROR_TEXT}) AS rank"
            " FROM message_history WHERE error IS NOT NULL GROUP BY 1, 2) e WHERE rank <= 10 ORDER BY queue, rank"
        ):
            queues[r["queue"]]["top_errors"].append({"error": r["error"], "count": r["n"]})
        for r in rows(
            f"SELECT * FROM (SELECT queue_name AS queue, group_id, {METRICS},"
            " row_number() OVER (PARTITION BY queue_name ORDER BY count(*) DESC, group_id) AS rank"
            f" FROM message_history WHERE group_id IS NOT NULL GROUP BY 1, 2) g WHERE rank <= {top}"
            " ORDER BY queue, rank"
        ):
            queues[r["queue"]]["busiest_groups"].append({"group_id": r["group_id"], **_figures(r)})
        timeline = [
            {
                "hour": r["hour"],
                "messages": r["total"],
                "wait_seconds": _pct(r["wait"]),
                "processing_seconds": _pct(r["processing"]),
            }
            for r in rows(f"SELECT {HOUR_TEXT} AS hour, {METRICS} FROM message_history GROUP BY 1 ORDER BY 1")
        ]
    return {"messages": sum(q["total"] for q in queues.values()), "queues": queues, "timeline": timeline}


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

    expected = expected_report(db_url, top=3)
    assert_same({k: report[k] for k in expected}, expected)
    assert report["source"] == ("postgresql" if archive is None else (tmp_path / "archive").as_uri())
    # the fixture exercises what it should
    jobs = report["queues"]["jobs"]
    assert set(jobs["receive_counts"]) == {"0", "1", "2", "3"} and len(jobs["throughput_per_hour"]) == 3
    assert {e["error"] for e in jobs["top_errors"]} == {"timeout", '{"code": 7}'}
    assert [g["group_id"] for g in report["queues"]["mail.fifo"]["busiest_groups"]] == ["g1", "g2", "g3"]
    assert 0 < jobs["dead_letter_rate"] < 1

    assert [p.name for p in paths] == ["report.json", "report.md", "throughput.png", "latency.png"]
    assert json.loads(paths[0].read_text()) == report
    markdown = paths[1].read_text()
    assert "| jobs | 23 |" in markdown and "## mail.fifo" in markdown and "| g1 | 6 |" in markdown
    for png in paths[2:]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_report_of_an_empty_history(spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress) -> None:
    report, paths = run_report(spark, progress, tmp_path / "report", archive=str(tmp_path / "nothing"))

    assert report["messages"] == 0 and report["queues"] == {} and report["timeline"] == []
    assert all(p.exists() for p in paths)
