"""The metrics loop counts the queues only in the maintenance leader, and the counts follow the
leadership: a process that stops leading withdraws its counts, the next leader publishes its own.
Each process shares one directory, as the workers of one `pqs serve` do."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from app.db import maintenance as mdb
from app.db.engine import Database
from app.db.rows import Conn
from app.service.maintenance import Maintenance
from app.service.metrics_loop import MetricsLoop, QueueGauges


async def _until(predicate: Callable[[], bool], seconds: float = 10.0) -> bool:
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return False


async def test_only_the_leader_counts_and_its_successor_takes_over(db: Database, tmp_path: Path) -> None:
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO queues (name, fifo, visibility_timeout, delay_seconds, retention_seconds,"
            " max_message_bytes, receive_wait_seconds, content_based_deduplication, deduplication_scope)"
            " VALUES ('counted', false, 30, 0, 345600, 1048576, 0, false, 'queue')"
        )
    processes = []
    for _ in range(2):
        maintenance = Maintenance(db, interval=0.05)
        metrics = MetricsLoop(db, maintenance, QueueGauges(str(tmp_path), max_age=30), interval=0.05)
        processes.append((maintenance, metrics))
    reader = QueueGauges(str(tmp_path), max_age=30)  # a third worker that only scrapes
    for maintenance, metrics in processes:
        maintenance.start()
        metrics.start()
    try:
        assert await _until(lambda: reader.latest() is not None)
        assert set(reader.latest().queues) == {"counted"}  # type: ignore[union-attr]
        [(leader, leader_metrics)] = [p for p in processes if p[0].is_leader]
        [(_, other_metrics)] = [p for p in processes if not p[0].is_leader]
        assert not other_metrics.gauges.published  # the other counted nothing

        # The leader stops: its counts are withdrawn; the other takes over and publishes.
        await leader_metrics.stop()
        await leader.stop()
        assert not leader_metrics.gauges.published
        assert await _until(lambda: other_metrics.gauges.published)
        assert reader.latest() is not None and set(reader.latest().queues) == {"counted"}  # type: ignore[union-attr]
    finally:
        for maintenance, metrics in processes:
            await metrics.stop()
            await maintenance.stop()
    assert reader.latest() is None  # every process stopped: nothing is exported


async def test_the_counts_run_without_parallel_workers_in_their_transaction_only(db: Database) -> None:
    """A count reads every row of a queue: on one PostgreSQL process (see maintenance_count_alone),
    and the pooled connection goes back to the server's setting after it."""

    async def setting(conn: Conn) -> str:
        row = await (await conn.execute("SHOW max_parallel_workers_per_gather")).fetchone()
        assert row is not None
        return str(next(iter(row.values())) if isinstance(row, dict) else row[0])

    async with db.transaction() as conn:
        default = await setting(conn)
    async with db.transaction() as conn:
        await mdb.count_alone(conn)
        assert await setting(conn) == "0"
    async with db.transaction() as conn:
        assert await setting(conn) == default != "0"
