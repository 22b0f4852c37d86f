"""`pqs pipeline report`: service-level figures from the history, per queue and for each queue's
busiest groups, computed by Spark from the archive (or straight from PostgreSQL).

Definitions (times in seconds; hours are UTC hours of `finished_at`):
- counts by outcome, and the dead-letter rate: dead_lettered / all finished messages;
- throughput: messages finished per hour;
- wait time: first receive - send, over messages received at least once;
- processing time: ack - last receive, over acked messages;
- p50 / p95 / p99 with `percentile_approx` (accuracy 10,000: exact on small inputs, where it is
  the smallest value with at least p of the values at or below it, as `percentile_disc`);
- receive counts: how many messages finished after 0, 1, 2 ... receives;
- top errors: the error's "message" field when it has one, else the error JSON as text.

render.py turns the result into report.json, report.md and PNG charts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.pipeline import exports
from app.pipeline.archive import archive_uri, read_archive
from app.pipeline.jdbc import jdbc_source, read_partitioned
from app.pipeline.progress import Progress
from app.pipeline.render import write_report

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

OUTCOMES = ("acked", "dead_lettered", "expired", "purged")
PERCENTILES = (0.5, 0.95, 0.99)
ACCURACY = 10_000
# ISO 8601 in UTC, formatted by Spark in the session's time zone (set to UTC below).
HOUR_FORMAT = "yyyy-MM-dd'T'HH:00:00'Z'"


@dataclass(frozen=True)
class ReportOptions:
    """What to report on and how much."""

    top_groups: int = 10
    top_errors: int = 10


def history(
    spark: SparkSession, progress: Progress, *, archive: str | None = None, database_url: str | None = None
) -> tuple[DataFrame, str]:
    """The history to report on, and where it came from: the archive, or PostgreSQL."""
    if archive is not None:
        uri = archive_uri(archive)
        return read_archive(spark, uri), uri
    assert database_url is not None
    with exports.connect(database_url) as conn:
        low, high = exports.id_bounds(conn)
    rows = read_partitioned(
        spark,
        jdbc_source(database_url),
        exports.history_rows_query(low - 1, high),
        "id",
        low,
        high + 1,
        max(2, spark.sparkContext.defaultParallelism),
    )
    return rows.withColumnRenamed("queue_name", "queue"), "postgresql"


def _seconds(later: str, earlier: str) -> Column:
    from pyspark.sql import functions as F

    return (F.unix_micros(F.col(later)) - F.unix_micros(F.col(earlier))) / F.lit(1_000_000.0)


def facts(rows: DataFrame) -> DataFrame:
    """One narrow row per finished message: what every figure is computed from."""
    from pyspark.sql import functions as F

    return rows.select(
        "queue",
        "group_id",
        "outcome",
        "receive_count",
        _seconds("first_received_at", "sent_at").alias("wait_s"),
        F.when(F.col("outcome") == "acked", _seconds("finished_at", "last_received_at")).alias("processing_s"),
        F.date_format(F.date_trunc("hour", "finished_at"), HOUR_FORMAT).alias("hour"),
        F.coalesce(F.get_json_object("error", "$.message"), F.col("error")).alias("error_text"),
    )


def _metrics() -> list[Column]:
    from pyspark.sql import functions as F

    return [
        F.count(F.lit(1)).alias("total"),
        *(F.sum((F.col("outcome") == o).cast("long")).alias(o) for o in OUTCOMES),
        F.percentile_approx("wait_s", list(PERCENTILES), ACCURACY).alias("wait"),
        F.percentile_approx("processing_s", list(PERCENTILES), ACCURACY).alias("processing"),
    ]


def _figures(row: Any) -> dict[str, Any]:
    total = int(row["total"])
    outcomes = {o: int(row[o] or 0) for o in OUTCOMES}
    return {
        "total": total,
        "outcomes": outcomes,
        "dead_letter_rate": outcomes["dead_lettered"] / total if total else 0.0,
        "wait_seconds": _percentiles(row["wait"]),
        "processing_seconds": _percentiles(row["processing"]),
    }


def _percentiles(values: list[float] | None) -> dict[str, float | None]:
    keys = [f"p{round(p * 100)}" for p in PERCENTILES]
    if values is None:
        return dict.fromkeys(keys)
    return {k: float(v) for k, v in zip(keys, values, strict=True)}


def _top(frame: DataFrame, partition: str, order: list[Column], limit: int) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rank = F.row_number().over(Window.partitionBy(partition).orderBy(*order))
    return frame.withColumn("rank", rank).where(F.col("rank") <= limit)


def compute(spark: SparkSession, rows: DataFrame, options: ReportOptions, progress: Progress) -> dict[str, Any]:
    """Every figure of the report, as plain data (see render.py for the files)."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.session.timeZone", "UTC")  # hours are UTC hours
    progress.attach(spark.sparkContext)
    base = facts(rows).cache()
    try:
        with progress.step("report: per queue"):
            per_queue = {r["queue"]: _figures(r) for r in base.groupBy("queue").agg(*_metrics()).collect()}
        with progress.step(f"report: busiest {options.top_groups} groups per queue"):
            groups = base.where(F.col("group_id").isNotNull()).groupBy("queue", "group_id").agg(*_metrics())
            busiest = _top(groups, "queue", [F.desc("total"), F.asc("group_id")], options.top_groups)
            group_rows = busiest.orderBy("queue", "rank").collect()
        with progress.step("report: receive counts, throughput, errors"):
            receive_counts = base.groupBy("queue", "receive_count").count().collect()
            hourly = base.groupBy("queue", "hour").count().orderBy("queue", "hour").collect()
            errors = base.where(F.col("error_text").isNotNull()).groupBy("queue", "error_text").count()
            top_errors = _top(errors, "queue", [F.desc("count"), F.asc("error_text")], options.top_errors)
            error_rows = top_errors.orderBy("queue", "rank").collect()
        with progress.step("report: latency over time"):
            timeline_rows = (
                base.groupBy("hour")
                .agg(
                    F.count(F.lit(1)).alias("messages"),
                    F.percentile_approx("wait_s", list(PERCENTILES), ACCURACY).alias("wait"),
                    F.percentile_approx("processing_s", list(PERCENTILES), ACCURACY).alias("processing"),
                )
                .orderBy("hour")
                .collect()
            )
    finally:
        base.unpersist()

    queues: dict[str, dict[str, Any]] = {}
    for name in sorted(per_queue):
        queues[name] = {
            **per_queue[name],
            "receive_counts": {},
            "throughput_per_hour": [],
            "top_errors": [],
            "busiest_groups": [],
        }
    for r in sorted(receive_counts, key=lambda r: (r["queue"], r["receive_count"])):
        queues[r["queue"]]["receive_counts"][str(r["receive_count"])] = int(r["count"])
    for r in hourly:
        queues[r["queue"]]["throughput_per_hour"].append({"hour": r["hour"], "messages": int(r["count"])})
    for r in error_rows:
        queues[r["queue"]]["top_errors"].append({"error": r["error_text"], "count": int(r["count"])})
    for r in group_rows:
        queues[r["queue"]]["busiest_groups"].append({"group_id": r["group_id"], **_figures(r)})
    timeline = [
        {
            "hour": r["hour"],
            "messages": int(r["messages"]),
            "wait_seconds": _percentiles(r["wait"]),
            "processing_seconds": _percentiles(r["processing"]),
        }
        for r in timeline_rows
    ]
    return {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "messages": sum(q["total"] for q in queues.values()),
        "queues": queues,
        "timeline": timeline,
    }


def run_report(
    spark: SparkSession,
    progress: Progress,
    output: Path,
    *,
    archive: str | None = None,
    database_url: str | None = None,
    options: ReportOptions | None = None,
) -> tuple[dict[str, Any], list[Path]]:
    """Compute the report from the archive (or PostgreSQL) and write its files into `output`."""
    rows, source = history(spark, progress, archive=archive, database_url=database_url)
    report = {"source": source, **compute(spark, rows, options or ReportOptions(), progress)}
    with progress.step("report: files"):
        paths = write_report(report, output)
    return report, paths
