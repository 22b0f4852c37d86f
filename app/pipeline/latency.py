"""The report's latency percentiles (p50, p95, p99 of wait and processing) per key, read from
histograms that a plain hash aggregate counts (no per-key digest, no sort of the rows).

A key's values (microseconds, whole numbers) are counted per bin, with each bin's smallest and
largest value. The percentile p of n values is, as `percentile_disc` defines it, the value of
rank ceil(p * n) in ascending order; the cumulative counts say which bin holds that rank:
- a key of at most EXACT_VALUES messages has a bin per distinct value: its percentiles are exact;
- a larger key's bins are logarithmic: bin k holds the values in (GAMMA^(k-1), GAMMA^k], whose
  midpoint 2 GAMMA^k / (GAMMA + 1) is within RELATIVE_ERROR of each of them. The percentile is
  the bin's smallest value when its rank is the bin's first, its largest when it is the bin's
  last, else the midpoint (kept between the two): within RELATIVE_ERROR of the exact value.
Histograms of disjoint keys add up (counts add, smallest of the smallest, largest of the largest),
so coarser keys' percentiles come from finer keys' histograms, not from the rows again (rollup).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

PERCENTILES = (0.5, 0.95, 0.99)
METRICS = ("wait", "processing")
RELATIVE_ERROR = 0.01
GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
# Keys of at most this many messages get exact percentiles: their bins are their values.
EXACT_VALUES = 1_000


def log_bin(value: Column) -> Column:
    """The logarithmic bin of a value in microseconds: 0 for 0, k + 1 for a value in
    (GAMMA^(k-1), GAMMA^k], its negative for a negative value, so bins sort as their values."""
    from pyspark.sql import functions as F

    k = F.ceil(F.log(GAMMA, F.abs(value))) + 1
    return F.when(value == 0, F.lit(0)).otherwise(F.signum(value).cast("long") * k)


def _midpoint(bin_: Column) -> Column:
    from pyspark.sql import functions as F

    k = F.abs(bin_) - 1
    return F.signum(bin_) * F.lit(2 / (GAMMA + 1)) * F.pow(F.lit(GAMMA), k)


def histogram(values: DataFrame, keys: list[str]) -> DataFrame:
    """Per key, metric and bin: how many values, the smallest and the largest. `values` has the
    keys, `metric`, `value` (microseconds) and `exact` (the key's bins are its values)."""
    from pyspark.sql import functions as F

    bin_ = F.when(F.col("exact"), F.col("value")).otherwise(log_bin(F.col("value"))).alias("bin")
    return values.groupBy(*keys, "metric", bin_).agg(
        F.count(F.lit(1)).alias("n"), F.min("value").alias("low"), F.max("value").alias("high")
    )


def rollup(hist: DataFrame, keys: list[str], exact: Column) -> DataFrame:
    """The histogram of coarser `keys` (a subset of `hist`'s), from `hist`'s bins: kept as they
    are where `exact` (then every finer key is exact too), else merged into logarithmic bins."""
    from pyspark.sql import functions as F

    bin_ = F.when(exact, F.col("low")).otherwise(log_bin(F.col("low"))).alias("bin")
    return hist.groupBy(*keys, "metric", bin_).agg(
        F.sum("n").alias("n"), F.min("low").alias("low"), F.max("high").alias("high")
    )


def percentiles(hist: DataFrame, keys: list[str]) -> dict[tuple[Any, ...], dict[str, dict[str, float | None]]]:
    """Per key (the keys' values as a tuple): wait_seconds and processing_seconds, each p50,
    p95 and p99 (None without values), read from the histogram's cumulative counts."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = Window.partitionBy(*keys, "metric")
    up_to = key.orderBy("bin").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    cumulative = F.sum("n").over(up_to)
    ranked = hist.select(
        *keys, "metric", "n", "low", "high", "bin", cumulative.alias("up_to"), F.sum("n").over(key).alias("total")
    )
    picks = []
    for p in PERCENTILES:
        # computed in float8 as PostgreSQL's percentile_disc does, so ranks agree at p * n whole
        rank = F.ceil(F.lit(p) * F.col("total"))
        first = F.col("up_to") - F.col("n") + 1
        value = (
            F.when(rank == first, F.col("low"))
            .when(rank == F.col("up_to"), F.col("high"))
            .otherwise(F.least(F.greatest(_midpoint(F.col("bin")), F.col("low")), F.col("high")))
        )
        inside = (rank >= first) & (rank <= F.col("up_to"))
        picks.append(F.max(F.when(inside, value / F.lit(1_000_000.0))).alias(_name(p)))
    rows = ranked.groupBy(*keys, "metric").agg(*picks).collect()
    result: dict[tuple[Any, ...], dict[str, dict[str, float | None]]] = {}
    for r in rows:
        figures = result.setdefault(tuple(r[k] for k in keys), empty())
        figures[f"{r['metric']}_seconds"] = {_name(p): float(r[_name(p)]) for p in PERCENTILES}
    return result


def empty() -> dict[str, dict[str, float | None]]:
    """The percentiles of a key without values."""
    return {f"{m}_seconds": dict.fromkeys(_name(p) for p in PERCENTILES) for m in METRICS}


def _name(p: float) -> str:
    return f"p{round(p * 100)}"
