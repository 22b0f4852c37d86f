"""QueueGauges: the maintenance leader's latest per-queue counts, as every worker of its `pqs serve`
reads them (a file of the multiprocess directory), withdrawn when it stops leading, and not
exported once stale (a leader that died)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app.domain import QueueStats
from app.service.metrics_loop import MAX_COUNTING_SHARE, SNAPSHOT_FILE, QueueCounts, QueueGauges, pause_after

COUNTS = QueueCounts(1_000.0, {"a": QueueStats(3, 1, 2, 12.5), "empty": QueueStats(0, 0, 0, None)})


def test_another_worker_reads_what_the_leader_published(tmp_path: Path) -> None:
    leader, other = QueueGauges(str(tmp_path), max_age=90), QueueGauges(str(tmp_path), max_age=90)
    assert other.latest(now=1_000) is None
    leader.publish(COUNTS)
    assert other.latest(now=1_050) == COUNTS
    assert [p.name for p in tmp_path.iterdir()] == [SNAPSHOT_FILE]  # no part file left behind


def test_stale_counts_are_not_exported(tmp_path: Path) -> None:
    for directory in (str(tmp_path), None):
        gauges = QueueGauges(directory, max_age=90)
        gauges.publish(COUNTS)
        assert gauges.latest(now=1_090) == COUNTS
        assert gauges.latest(now=1_091) is None


def test_withdrawn_counts_are_gone_for_every_worker(tmp_path: Path) -> None:
    leader, other = QueueGauges(str(tmp_path), max_age=90), QueueGauges(str(tmp_path), max_age=90)
    leader.publish(COUNTS)
    other.withdraw()  # published nothing: takes nothing away
    assert other.latest(now=1_000) == COUNTS
    leader.withdraw()
    assert other.latest(now=1_000) is None and leader.latest(now=1_000) is None


def test_counts_of_a_long_pause_stay_fresh_as_long(tmp_path: Path) -> None:
    """After a long round the next comes later: its counts are exported until then, and past it."""
    long = dataclasses.replace(COUNTS, fresh_for=600.0)
    for directory in (str(tmp_path), None):
        gauges = QueueGauges(directory, max_age=90)
        gauges.publish(long)
        assert gauges.latest(now=1_600) == long
        assert gauges.latest(now=1_601) is None


def test_counting_takes_at_most_its_share_of_the_time() -> None:
    assert pause_after(0.01, interval=30) == 30  # a small database: every interval
    for duration in (2.0, 2.4, 24.0):  # 10M messages and more: rounds of seconds
        pause = pause_after(duration, interval=30)
        assert pause > 30
        assert duration / (duration + pause) <= MAX_COUNTING_SHARE + 1e-9
