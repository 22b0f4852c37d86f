"""What GET /metrics reads without asking the database at the scrape: the per-queue counts and
the connection pool, refreshed by each process's metrics loop every PQS_METRICS_INTERVAL_SECONDS.

Per-queue counts (visible, in flight, delayed, oldest message's age): only the maintenance leader
(app/service/maintenance.py; one process among all that share the database) reads them, with the
query `GET /v1/queues/{name}` answers with (queue_stats, one statement per queue, in turn). Its
cost: it reads every message row of the queue through the queue's partial indexes (its plan is
pinned by tests/db/test_plans.py to read that queue's rows only), so a round costs in proportion
to the messages held, all queues together (1M small messages: 0.24 s; docs/operations.md), on
one pooled connection at a time; a scrape costs the database nothing. Exact counts cannot be had
cheaper from the indexes that serve the hot path, and an index or a counter kept for metrics
alone would cost every send and ack (and could not follow the messages that become visible as
time passes). So the rounds are spaced by what they cost: after a round of d seconds the next
waits at least 19 times d (`pause_after`), so counting takes at most 5% of one connection's time
(and of one PostgreSQL core), however many messages there are: at 10M messages a round of some
seconds every minute or so, where a small database is counted every interval.

Each count of a queue is also the dashboard's sample of that queue's depth for the minute it falls
in (queue_minutes; app/service/throughput.py counts the traffic), and for a FIFO queue the round
takes its group census too (group_census_take: the largest groups and those with the oldest
heads, one more read of the queue's group-order index, costing about what the count does: 1M
messages in 10k groups, 0.76 s against 0.59 s). Both are part of the round, so the spacing above
bounds them too: at 10M messages the dashboard's depth and groups are as old as the last round,
a few minutes.

The leader keeps the latest counts (`QueueGauges`) in memory, and, in multiprocess mode
(PROMETHEUS_MULTIPROC_DIR set), in a file of that directory too, so that the scrape of any worker
of its `pqs serve` exports them. A process that stops leading withdraws them; counts older than
three pauses (a leader that died) are not exported. A queue deleted is gone at the next round.

The pool: each process sets its own gauges from its pool every interval, and the scraping process
once more just before the scrape, so that with one process they are exact.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from app.db import activity as adb
from app.db import maintenance as mdb
from app.db import queues as qdb
from app.db.engine import Database
from app.db.rows import Conn
from app.domain import QueueStats
from app.metrics import POOL_CONNECTIONS, POOL_WAITING
from app.service.background import Background
from app.service.maintenance import Maintenance

log = logging.getLogger(__name__)

# The file of the latest counts in the multiprocess directory (prometheus-client reads *.db only).
SNAPSHOT_FILE = "pqs-queues.json"
# Counts older than this many intervals (or pauses, when longer) are not exported: their leader
# is gone.
STALE_INTERVALS = 3
# The most of its time the leader spends counting queues (see the module docstring).
MAX_COUNTING_SHARE = 0.05
# The largest groups, and those with the oldest heads, a FIFO queue's census keeps.
CENSUS_GROUPS = 50


def pause_after(duration: float, interval: float) -> float:
    """The wait after a round of counting that took `duration` seconds: the interval, or longer
    when the round was long, so that counting takes at most MAX_COUNTING_SHARE of the time."""
    return max(interval, duration * (1 - MAX_COUNTING_SHARE) / MAX_COUNTING_SHARE)


@dataclass(frozen=True)
class QueueCounts:
    """The counts of every queue, as of `taken_at` (seconds since the epoch: the end of the round
    that made them; each queue's counts are of one instant within it). `fresh_for`: how long
    after `taken_at` they may still be exported, at least (the next round's pause, times
    STALE_INTERVALS), when longer than the gauges' own `max_age`."""

    taken_at: float
    queues: dict[str, QueueStats]
    fresh_for: float = 0.0


class QueueGauges:
    """The latest QueueCounts this process made or, in multiprocess mode, any of its `pqs serve`."""

    def __init__(self, directory: str | None, max_age: float) -> None:
        self.file = Path(directory) / SNAPSHOT_FILE if directory else None
        self.max_age = max_age
        self._counts: QueueCounts | None = None

    def publish(self, counts: QueueCounts) -> None:
        """These are the latest counts."""
        self._counts = counts
        if self.file is not None:
            document = {
                "taken_at": counts.taken_at,
                "fresh_for": counts.fresh_for,
                "queues": {
                    name: [s.visible, s.in_flight, s.delayed, s.oldest_age_seconds] for name, s in counts.queues.items()
                },
            }
            # Written whole, then renamed: a scrape reads the old file or the new one.
            part = self.file.with_name(f"{SNAPSHOT_FILE}.{os.getpid()}")
            part.write_text(json.dumps(document))
            part.replace(self.file)

    @property
    def published(self) -> bool:
        """Whether counts this process made are out (it leads, or led until its latest round)."""
        return self._counts is not None

    def withdraw(self) -> None:
        """This process no longer counts (it stopped leading): its counts are not exported."""
        if self._counts is None:
            return
        self._counts = None
        if self.file is not None:
            self.file.unlink(missing_ok=True)

    def latest(self, now: float | None = None) -> QueueCounts | None:
        """The latest counts, unless they are stale (see the module docstring)."""
        counts = self._counts if self.file is None else self._read()
        age = (time.time() if now is None else now) - (counts.taken_at if counts else 0.0)
        if counts is None or age > max(self.max_age, counts.fresh_for):
            return None
        return counts

    def _read(self) -> QueueCounts | None:
        assert self.file is not None
        try:
            document = json.loads(self.file.read_text())
        except (FileNotFoundError, ValueError):
            return None
        queues = {name: QueueStats(*values) for name, values in document["queues"].items()}
        return QueueCounts(float(document["taken_at"]), queues, float(document.get("fresh_for", 0.0)))


class MetricsLoop:
    """Every `interval` seconds: the pool gauges of this process and, while it leads maintenance,
    the counts of every queue (see the module docstring)."""

    def __init__(self, db: Database, maintenance: Maintenance, gauges: QueueGauges, interval: float) -> None:
        self.db = db
        self.maintenance = maintenance
        self.gauges = gauges
        self.interval = interval
        # The wait before the next round (pause_after).
        self.pause = interval
        self._background = Background("pqs-metrics", self._loop)

    def sample_pool(self) -> None:
        """Set this process's pool gauges from its pool now."""
        in_use, idle, waiting = self.db.pool_counts()
        POOL_CONNECTIONS.labels("in_use").set(in_use)
        POOL_CONNECTIONS.labels("idle").set(idle)
        POOL_WAITING.set(waiting)

    async def count_queues(self) -> QueueCounts:
        """Count every queue's messages (one statement per queue) and publish the counts; record
        them as the queue's depth of this minute, and count a FIFO queue's groups too."""
        started = time.monotonic()
        counted: dict[str, QueueStats] = {}
        for queue in await self.db.run_single(mdb.queue_retention_all):

            async def stats(conn: Conn, queue_id: int = queue.id, fifo: bool = queue.fifo) -> QueueStats:
                await mdb.count_alone(conn)
                counts = await qdb.queue_stats(conn, queue_id, None)
                # The dashboard's depth of this minute, and a FIFO queue's group census.
                await adb.queue_minutes_sample(conn, queue_id, counts, None)
                if fifo:
                    await adb.group_census_take(conn, queue_id, CENSUS_GROUPS, None)
                return counts

            counted[queue.name] = await self.db.run(stats)
        # Stamped when the round ends: the next is due a pause later, however long this took.
        self.pause = pause_after(time.monotonic() - started, self.interval)
        counts = QueueCounts(time.time(), counted, STALE_INTERVALS * self.pause)
        self.gauges.publish(counts)
        return counts

    def start(self) -> None:
        """Start the loop in the background."""
        self._background.start()

    async def stop(self) -> None:
        """Stop the loop; counts this process published are withdrawn."""
        await self._background.stop()
        self.gauges.withdraw()

    async def _loop(self) -> None:
        while True:
            try:
                self.sample_pool()
                if self.maintenance.is_leader:
                    await self.count_queues()
                else:
                    self.gauges.withdraw()
                    self.pause = self.interval
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("metrics round failed (%s); retrying", exc)
            await asyncio.sleep(self.pause)
