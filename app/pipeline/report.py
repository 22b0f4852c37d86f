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
- p50 / p95 / p99: the smallest value with at least p of the values at or below it, as
  `percentile_disc`, exact for a queue, group or bucket of at most 1,000 messages and within 1%
  of that value for a larger one (read from histograms: latency.py);
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

from app.pipeline import exports, latency
from app.pipeline.archive import archive_uri, read_archive
from app.pipeline.jdbc import jdbc_source, read_partitioned
from app.pipeline.progress import Progress
from app.pipeline.render import write_report

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

OUTCOMES = ("acked", "dead_lettered", "expired", "purged")
# Bucket widths over time, in seconds; the report takes the narrowest that cuts the history's
# span into at most MAX_BUCKETS (a chart of an hour then has minutes, one of a month six hours).
BUCKETS = (1, 10, 60, 300, 900, 3600, 21600, 86400, 604800)
MAX_BUCKETS = 200
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


def _micros(later: str, earlier: str) -> Column:
    from pyspark.sql import functions as F

    return F.unix_micros(F.col(later)) - F.unix_micros(F.col(earlier))


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
        _micros("first_received_at", "sent_at").alias("wait_us"),
        F.when(F.col("outcome") == "acked", _micros("finished_at", "last_received_at")).alias("processing_us"),
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


def _counts() -> list[Column]:
    from pyspark.sql import functions as F

    return [
        F.count(F.lit(1)).alias("total"),
        *(F.sum((F.col("outcome") == o).cast("long")).alias(o) for o in OUTCOMES),
    ]


def _outcomes(row: Any) -> dict[str, int]:
    return {o: int(row[o] or 0) for o in OUTCOMES}


def _figures(total: int, outcomes: dict[str, int], latency: dict[str, Any]) -> dict[str, Any]:
    return {
        "total": total,
        "outcomes": outcomes,
        "dead_letter_rate": outcomes["dead_lettered"] / total if total else 0.0,
        **latency,
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _top(frame: DataFrame, partition: str, order: list[Column], limit: int) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rank = F.row_number().over(Window.partitionBy(partition).orderBy(*order))
    return frame.withColumn("rank", rank).where(F.col("rank") <= limit)


def busiest_groups(base: DataFrame, top: int) -> list[Any]:
    """Each queue's `top` busiest groups (most messages; of as many, the first group id), busiest
    first, with their counts by outcome; their latencies come with the others' (latency_values)."""
    from pyspark.sql import functions as F

    grouped = base.where(F.col("group_id").isNotNull())
    counts = grouped.groupBy("queue", "group_id").agg(*_counts())
    busiest = _top(counts, "queue", [F.desc("total"), F.asc("group_id")], top).collect()
    return sorted(busiest, key=lambda r: (r["queue"], -r["total"], r["group_id"]))


def latency_values(bucketed: DataFrame, buckets: DataFrame, groups: DataFrame) -> DataFrame:
    """Each message's wait and processing (microseconds) for the latency histograms: once for
    its queue's bucket (`exact` as the bucket's; the queue's figures are the sum of its buckets'),
    and once more for its group when it is one of the busiest (`exact` as the group's). So one
    pass over the rows serves every level."""
    from pyspark.sql import functions as F

    rows = bucketed.join(F.broadcast(buckets), ["queue", "bucket"]).join(
        F.broadcast(groups), ["queue", "group_id"], "left"
    )

    def entries(bucket: Column, group: Column, exact: Column) -> list[Column]:
        return [
            F.struct(
                F.lit(m).alias("metric"),
                F.col(f"{m}_us").alias("value"),
                bucket.alias("bucket"),
                group.alias("group_id"),
                exact.alias("exact"),
            )
            for m in latency.METRICS
        ]

    per_bucket = entries(F.col("bucket"), F.lit(None).cast("string"), F.col("exact"))
    per_group = entries(F.lit(None).cast("long"), F.col("group_id"), F.col("group_exact"))
    values = F.when(F.col("group_exact").isNull(), F.array(*per_bucket)).otherwise(F.array(*per_bucket, *per_group))
    return rows.select("queue", "queue_exact", F.inline(values)).where(F.col("value").isNotNull())


def compute(spark: SparkSession, rows: DataFrame, options: ReportOptions, progress: Progress) -> dict[str, Any]:
    """Every figure of the report, as plain data (see render.py for the files)."""
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.session.timeZone", "UTC")  # bucket starts are UTC
    progress.attach(spark.sparkContext)
    base = facts(rows)
    with progress.step(REPORT_STEPS[0]) as step:
        span = rows.agg(F.count(F.lit(1)), F.min("finished_at"), F.max("finished_at")).first()
        assert span is not None
        step.rows, first, last = int(span[0]), span[1], span[2]
    width = bucket_seconds((last - first).total_seconds() if first and last else 0)
    # grouped by the bucket's number; only the buckets' starts are then formatted
    bucketed = base.withColumn("bucket", F.floor(F.unix_seconds("finished_at") / width))
    with progress.step(REPORT_STEPS[1]):
        # counts per queue and bucket, which the queues' sum; the latencies come from the
        # buckets' histograms, over time (below)
        bucket_rows = sorted(
            bucketed.groupBy("queue", "bucket").agg(*_counts()).collect(), key=lambda r: (r["queue"], r["bucket"])
        )
    totals: dict[str, int] = {}
    outcomes: dict[str, dict[str, int]] = {}
    for r in bucket_rows:
        totals[r["queue"]] = totals.get(r["queue"], 0) + int(r["total"])
        summed = outcomes.setdefault(r["queue"], dict.fromkeys(OUTCOMES, 0))
        for o, n in _outcomes(r).items():
            summed[o] += n
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
        exact = latency.EXACT_VALUES
        buckets = spark.createDataFrame(
            [(r["queue"], r["bucket"], r["total"] <= exact, totals[r["queue"]] <= exact) for r in bucket_rows],
            "queue string, bucket long, exact boolean, queue_exact boolean",
        )
        groups = spark.createDataFrame(
            [(r["queue"], r["group_id"], r["total"] <= exact) for r in group_rows],
            "queue string, group_id string, group_exact boolean",
        )
        keys = ["queue", "bucket", "group_id"]
        hist = latency.histogram(latency_values(bucketed, buckets, groups), [*keys, "queue_exact"])
        # The queues' histograms are their buckets' summed, in the same job, so that Spark reads
        # the rows once for both (it reuses the histogram's exchange; a filter would have been
        # pushed into it): the rows without a group are a queue's, those of a group summed
        # again are not needed.
        by_queue = latency.rollup(hist, ["queue", "group_id"], F.col("queue_exact"))
        levels = hist.withColumn("summed", F.lit(False)).unionByName(
            by_queue.withColumn("summed", F.lit(True)), allowMissingColumns=True
        )
        latencies = latency.percentiles(levels, ["summed", *keys])

    queues: dict[str, dict[str, Any]] = {}
    for queue in sorted(totals):
        queues[queue] = {
            **_figures(totals[queue], outcomes[queue], latencies.get((True, queue, None, None), latency.empty())),
            "receive_counts": {},
            "timeline": [],
            "errors": {kind: [] for kind in ERROR_KINDS},
            "busiest_groups": [],
        }
    for r in sorted(receive_counts, key=lambda r: (r["queue"], r["receive_count"])):
        queues[r["queue"]]["receive_counts"][str(r["receive_count"])] = int(r["count"])
    for r in bucket_rows:
        start = _iso(datetime.fromtimestamp(r["bucket"] * width, UTC))
        figures = latencies.get((False, r["queue"], r["bucket"], None), latency.empty())
        queues[r["queue"]]["timeline"].append({"start": start, "messages": int(r["total"]), **figures})
    for r in error_rows:
        by_outcome = {o: int(r[o]) for o in OUTCOMES if o != "acked"} if r["error_kind"] == "failures" else {}
        entry = {"error": r["error_text"], "messages": int(r["messages"]), **by_outcome}
        queues[r["queue"]]["errors"][r["error_kind"]].append(entry)
    for r in group_rows:
        figures = _figures(
            int(r["total"]), _outcomes(r), latencies.get((False, r["queue"], None, r["group_id"]), latency.empty())
        )
        queues[r["queue"]]["busiest_groups"].append({"group_id": r["group_id"], **figures})
    return {
        "generated_at": _iso(datetime.now(UTC)),
        "messages": sum(totals.values()),
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
