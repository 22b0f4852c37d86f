"""The service's Prometheus metrics (prometheus-client), each defined once, here; recorded where the
thing happens; exposed by GET /metrics (app/api/metrics.py). docs/operations.md lists them.

They are module-level objects, as prometheus-client means them to be: a process has one set, and in
multiprocess mode (`pqs serve --workers N`, which sets PROMETHEUS_MULTIPROC_DIR for its workers)
each process writes its values to files of its own in that directory, which the scrape of any
worker adds up: counters and histograms summed over every process that ever ran in it, the gauges
here over the processes alive (`livesum`). The per-queue gauges are no such objects: they are the
maintenance leader's periodic counts (app/service/metrics_loop.py), exported by a collector.

Labels are bounded sets only: an operation is an operationId of the operation table, an SQS action
PQS serves, or "unmatched" (never a path); a status is one the service answers; an event or a kind
is one of those named below. Messages are counted service-wide, not per queue (the per-queue view
is the gauges): a counter's series outlive a deleted queue in multiprocess files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from prometheus_client import (
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

# No `_created` series: one more series per labelled counter and histogram, a timestamp Prometheus
# itself does not use (it tells restarts from the counters' resets).
disable_created_metrics()  # type: ignore[no-untyped-call]

# Request latency, from the first byte the application sees to the last it writes: a long poll's
# wait included (up to 20 s).
REQUEST_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20)
FLUSH_SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

REQUESTS = Counter(
    "pqs_requests", "HTTP requests the application answered, by operation and status.", ["operation", "status"]
)
REQUEST_SECONDS = Histogram(
    "pqs_request_duration_seconds",
    "Time to answer a request, by operation.",
    ["operation"],
    buckets=REQUEST_SECONDS_BUCKETS,
)
MESSAGES = Counter("pqs_messages", "Messages, by what happened to them.", ["event"])
SENT = MESSAGES.labels("sent")
RECEIVED = MESSAGES.labels("received")
ACKED = MESSAGES.labels("acked")
NACKED = MESSAGES.labels("nacked")
DEAD_LETTERED = MESSAGES.labels("dead_lettered")
EXPIRED = MESSAGES.labels("expired")
FLUSH_SIZE = Histogram(
    "pqs_group_commit_flush_size",
    "Items one group-commit flush carried (one statement, one commit), by kind.",
    ["kind"],
    buckets=FLUSH_SIZE_BUCKETS,
)
LONG_POLL_WAITERS = Gauge(
    "pqs_long_poll_waiters", "Receives waiting for a message (long polls).", multiprocess_mode="livesum"
)
POOL_CONNECTIONS = Gauge(
    "pqs_db_pool_connections",
    "Pooled database connections, by state (in_use, idle).",
    ["state"],
    multiprocess_mode="livesum",
)
POOL_WAITING = Gauge(
    "pqs_db_pool_waiting", "Requests waiting for a pooled database connection.", multiprocess_mode="livesum"
)

# The children of REQUESTS and REQUEST_SECONDS by (operation, status): `labels()` takes a lock and
# builds a tuple per call; a request of the hot path does one dict look-up instead. Bounded: both
# label values come from bounded sets (module docstring).
_CHILDREN: dict[tuple[str, int], tuple[Counter, Histogram]] = {}


def observe_request(operation: str, status: int, seconds: float) -> None:
    """Count one answered request and its latency."""
    children = _CHILDREN.get((operation, status))
    if children is None:
        children = _CHILDREN[operation, status] = (
            REQUESTS.labels(operation, str(status)),
            REQUEST_SECONDS.labels(operation),
        )
    children[0].inc()
    children[1].observe(seconds)


def multiprocess_directory() -> str | None:
    """The multiprocess directory (prometheus-client's own variable, PROMETHEUS_MULTIPROC_DIR,
    which it reads when imported), if this process writes its values there."""
    return os.environ.get(MULTIPROC_VARIABLE) or None


def exposition(*collectors: Collector) -> bytes:
    """The text exposition of this process's metrics (in multiprocess mode, of every process of
    the directory) and of `collectors`."""
    directory = multiprocess_directory()
    if directory is None:
        return generate_latest(_Joined(REGISTRY, *collectors))
    _forget_dead(directory)
    return generate_latest(_Joined(_ProcessFiles(directory), *collectors))


def forget_process(pid: int) -> None:
    """The `livesum` gauges of process `pid`, which ended, no longer count (multiprocess mode)."""
    directory = multiprocess_directory()
    if directory is not None:
        multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]


def _forget_dead(directory: str) -> None:
    """Forget the gauges of worker processes that died without forgetting their own (a worker
    killed, which uvicorn replaces): files named by pid, one look-up each."""
    for path in Path(directory).glob("gauge_live*_*.db"):
        pid = path.stem.rpartition("_")[2]
        if pid.isdigit() and not _alive(int(pid)):
            multiprocess.mark_process_dead(int(pid), directory)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _ProcessFiles(Collector):
    """Every process's values in the multiprocess directory, as prometheus-client merges them,
    but for the files a starting process has made and not yet sized: it creates a file empty and
    then extends it, and prometheus-client's own collector, reading one in between, fails (a
    struct.error, which was a 500 for a scrape at a worker's start). Such a file holds nothing yet."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)

    def collect(self) -> Iterable[Metric]:
        files = [str(path) for path in self.directory.glob("*.db") if _sized(path)]
        return MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-untyped-call,no-any-return]


def _sized(path: Path) -> bool:
    """Whether a values file holds at least its header (8 bytes: how much of it is used)."""
    try:
        return path.stat().st_size >= 8
    except FileNotFoundError:  # a dead process's live gauges, removed meanwhile
        return False


class _Joined(Collector):
    """Several collectors as one, for one exposition."""

    def __init__(self, *collectors: Collector) -> None:
        self.collectors = collectors

    def collect(self) -> Iterable[Metric]:
        for collector in self.collectors:
            yield from collector.collect()
