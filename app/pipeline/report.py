"""`pqs pipeline report`: service-level figures from the history, per queue and for each queue's
busiest groups, computed by Spark from the archive (or straight from PostgreSQL).

Definitions (times in seconds, UTC):
- counts by outcome, and the dead-letter rate: dead_lettered / all finished messages;
- over time: the history's span (first to last `finished_at`) cut into buckets of one width,
  chosen from the span (BUCKETS: a minute for an hour, a quarter hour for a day, six hours for a
  month), and per queue and bucket the messages finished and their latency percentiles;
- wait time: first receive - send, over messages received at least once (a dead-letter queue's
  messages keep their first send time, so their waits include the time spent in their source);
- processing time: ack - last receive, over acked messages;
- p50 / p95 / p99 with `percentile_approx` (accuracy 10,000: exact on small inputs, where it is
  the smallest value with at least p of the values at or below it, as `percentile_disc`);
- receive counts: how many messages finished after 0, 1, 2 ... receives;
- errors: history keeps one error per message, the last one a consumer reported (the error's
  "message" field when it has one, else the error JSON as text), so an error is counted once
  per message, not per failed attempt. A message dead-lettered carries that error into the
  dead-letter queue, whose row then repeats it: such a row (same message id and error as a
  dead-lettered row of another queue) is counted apart, as carried in, not as the DLQ's own.
  The rest are split by how the message ended: `failures` (it ended without an ack:
  dead-lettered, expired or purged, with its last error) and `recovered` (acked after an error).

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
TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss'Z'"
# Bucket widths over time, in seconds; the report takes the narrowest that cuts the history's
# span into at most MAX_BUCKETS (a chart of an hour then has minutes, one of a month six hours).
BUCKETS = (1, 10, 60, 300, 900, 3600, 21600, 86400, 604800)
MAX_BUCKETS = 200
# Group keys an aggregation with percentiles keeps in a hash map per task (see compute).
HASHED_KEYS = 65_536
# The error tables of a queue and which rows each counts (see the module docstring).
ERROR_KINDS = ("failures", "recovered", "carried")
# The history's columns the figures read.
HISTORY_COLUMNS = (
    "queue",
    "queue_id",
    "message_id",
    "group_id",
    "sent_at",
    "first_received_at",
    "last_received_at",
    "finished_at",
    "receive_count",
    "outcome",
    "error",
)
# The steps of a run, as its progress shows them.
REPORT_STEPS = [
    "read the history",
    "figures per queue",
    "busiest groups",
    "receive counts, errors",
    "throughput and latency over time",
    "write the files",
]


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
    # PostgreSQL is read once, into a cache of the columns the figures need, which every figure
    # then reads ("read the history" fills it); an archive's Parquet is read by each figure, for
    # the few columns it needs, which costs less than a cache of them.
    columns = rows.withColumnRenamed("queue_name", "queue").select(*HISTORY_COLUMNS)
    return columns.cache(), "postgresql"


def _seconds(later: str, earlier: str) -> Column:
    from pyspark.sql import functions as F

    return (F.unix_micros(F.col(later)) - F.unix_micros(F.col(earlier))) / F.lit(1_000_000.0)


def bucket_seconds(span_seconds: float) -> int:
    """The bucket width for a history spanning `span_seconds` (see BUCKETS)."""
    return next((b for b in BUCKETS if span_seconds / b <= MAX_BUCKETS), BUCKETS[-1])


def facts(rows: DataFrame) -> DataFrame:
    """One narrow row per finished message, what every figure but the errors is computed from.
    Spark reads for each figure only the columns it needs of these (and of the history)."""
    from pyspark.sql import functions as F

    return rows.select(
        "queue",
        "group_id",
        "outcome",
        "receive_count",
        "finished_at",
        _seconds("first_received_at", "sent_at").alias("wait_s"),
        F.when(F.col("outcome") == "acked", _seconds("finished_at", "last_received_at")).alias("processing_s"),
    )


def errors(rows: DataFrame) -> DataFrame:
    """The rows with an error (a tenth, as a rule), with its text and which error table it counts
    in (ERROR_KINDS). A row carries its error in when a dead-lettered row of another queue has the
    same message id and error: the dead-letter queue's copy of the message kept its source's last
    error. The rows of a message id and error meet in one window (one shuffle of these rows)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    same = Window.partitionBy("message_id", "error")
    dead_in = F.collect_set(F.when(F.col("outcome") == "dead_lettered", F.col("queue_id"))).over(same)
    kind = (
        F.when(F.size(F.array_remove(dead_in, F.col("queue_id"))) > 0, "carried")
        .when(F.col("outcome") == "acked", "recovered")
        .otherwise("failures")
    )
    return rows.where(F.col("error").isNotNull()).select(
        "queue",
        "outcome",
        F.coalesce(F.get_json_object("error", "$.message"), F.col("error")).alias("error_text"),
        kind.alias("error_kind"),
    )


def _latencies() -> list[Column]:
    from pyspark.sql import functions as F

    return [
        F.percentile_approx("wait_s", list(PERCENTILES), ACCURACY).alias("wait"),
        F.percentile_approx("processing_s", list(PERCENTILES), ACCURACY).alias("processing"),
    ]


def _metrics() -> list[Column]:
    from pyspark.sql import functions as F

    return [
        F.count(F.lit(1)).alias("total"),
        *(F.sum((F.col("outcome") == o).cast("long")).alias(o) for o in OUTCOMES),
        *_latencies(),
    ]


def _latency(row: Any) -> dict[str, Any]:
    return {"wait_seconds": _percentiles(row["wait"]), "processing_seconds": _percentiles(row["processing"])}


def _figures(row: Any) -> dict[str, Any]:
    total = int(row["total"])
    outcomes = {o: int(row[o] or 0) for o in OUTCOMES}
    return {
        "total": total,
        "outcomes": outcomes,
        "dead_letter_rate": outcomes["dead_lettered"] / total if total else 0.0,
        **_latency(row),
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


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


def busiest_groups(base: DataFrame, top: int) -> list[Any]:
    """The figures of each queue's `top` busiest groups (most messages; of as many, the first
    group id), busiest first. Groups are counted first, so that only the busiest groups' rows
    go into the percentiles."""
    from pyspark.sql import functions as F

    grouped = base.where(F.col("group_id").isNotNull())
    counts = grouped.groupBy("queue", "group_id").agg(F.count(F.lit(1)).alias("total"))
    busiest = _top(counts, "queue", [F.desc("total"), F.asc("group_id")], top).select("queue", "group_id")
    figures = grouped.join(F.broadcast(busiest), ["queue", "group_id"], "left_semi").groupBy("queue", "group_id")
    return sorted(figures.agg(*_metrics()).collect(), key=lambda r: (r["queue"], -r["total"], r["group_id"]))


def compute(spark: SparkSession, rows: DataFrame, options: ReportOptions, progress: Progress) -> dict[str, Any]:
    """Every figure of the report, as plain data (see render.py for the files)."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.session.timeZone", "UTC")  # bucket starts are UTC
    progress.attach(spark.sparkContext)
    base = facts(rows)
    # percentile_approx keeps a digest per group key; past 128 keys in a task (Spark's default)
    # Spark sorts the task's remaining rows by key instead, which costs the buckets over time
    # (thousands of keys) more than their percentiles. A digest holds at most the values of its
    # own key, so the digests of a task together hold at most its rows'.
    threshold = "spark.sql.objectHashAggregate.sortBased.fallbackThreshold"
    before = spark.conf.get(threshold) or "128"
    spark.conf.set(threshold, str(HASHED_KEYS))
    try:
        with progress.step(REPORT_STEPS[0]) as step:
            step.rows = rows.count()
        with progress.step(REPORT_STEPS[1]):
            metrics = [*_metrics(), F.min("finished_at").alias("first"), F.max("finished_at").alias("last")]
            queue_rows = base.groupBy("queue").agg(*metrics).collect()
        first = min((r["first"] for r in queue_rows), default=None)
        last = max((r["last"] for r in queue_rows), default=None)
        width = bucket_seconds((last - first).total_seconds() if first and last else 0)
        with progress.step(REPORT_STEPS[2]):
            group_rows = busiest_groups(base, options.top_groups)
        with progress.step(REPORT_STEPS[3]):
            receive_counts = base.groupBy("queue", "receive_count").count().collect()
            errors_ = errors(rows).groupBy("queue", "error_kind", "error_text")
            counted = errors_.agg(
                F.count(F.lit(1)).alias("messages"),
                *(F.sum((F.col("outcome") == o).cast("long")).alias(o) for o in OUTCOMES),
            ).withColumn("table", F.concat_ws("/", "queue", "error_kind"))
            top = _top(counted, "table", [F.desc("messages"), F.asc("error_text")], options.top_errors)
            error_rows = top.orderBy("queue", "error_kind", "rank").collect()
        with progress.step(REPORT_STEPS[4]):
            # grouped by the bucket's number; only the buckets' starts are then formatted
            bucket = F.floor(F.unix_seconds("finished_at") / width).alias("bucket")
            start = F.timestamp_seconds(F.col("bucket") * width)
            bucket_rows = (
                base.groupBy("queue", bucket)
                .agg(F.count(F.lit(1)).alias("total"), *_latencies())
                .orderBy("queue", "bucket")
                .withColumn("start", F.date_format(start, TIME_FORMAT))
                .collect()
            )
    finally:
        spark.conf.set(threshold, before)

    queues: dict[str, dict[str, Any]] = {}
    for r in sorted(queue_rows, key=lambda r: r["queue"]):
        queues[r["queue"]] = {
            **_figures(r),
            "receive_counts": {},
            "timeline": [],
            "errors": {kind: [] for kind in ERROR_KINDS},
            "busiest_groups": [],
        }
    for r in sorted(receive_counts, key=lambda r: (r["queue"], r["receive_count"])):
        queues[r["queue"]]["receive_counts"][str(r["receive_count"])] = int(r["count"])
    for r in bucket_rows:
        queues[r["queue"]]["timeline"].append({"start": r["start"], "messages": int(r["total"]), **_latency(r)})
    for r in error_rows:
        by_outcome = {o: int(r[o]) for o in OUTCOMES if o != "acked"} if r["error_kind"] == "failures" else {}
        entry = {"error": r["error_text"], "messages": int(r["messages"]), **by_outcome}
        queues[r["queue"]]["errors"][r["error_kind"]].append(entry)
    for r in group_rows:
        queues[r["queue"]]["busiest_groups"].append({"group_id": r["group_id"], **_figures(r)})
    return {
        "generated_at": _iso(datetime.now(UTC)),
        "messages": sum(q["total"] for q in queues.values()),
        "first_finished": _iso(first) if first else None,
        "last_finished": _iso(last) if last else None,
        "bucket_seconds": width,
        "queues": queues,
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
    progress.plan("report", REPORT_STEPS)
    rows, source = history(spark, progress, archive=archive, database_url=database_url)
    try:
        report = {"source": source, **compute(spark, rows, options or ReportOptions(), progress)}
    finally:
        rows.unpersist()
    with progress.step(REPORT_STEPS[5]):
        paths = write_report(report, output)
    return report, paths
