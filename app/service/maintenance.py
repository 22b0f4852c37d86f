"""The maintenance loop: retention, dedup-id and receive-attempt pruning, empty-group pruning, the
dashboard's minutes older than a day (app/service/throughput.py), and the message move tasks
(app.service.move_tasks).

Every service process runs the loop, but only the leader works: the one holding a session
advisory lock on a dedicated connection, to the server itself (Database.direct_url: through
PgBouncer's transaction pooling, a session lock would stay with whichever server session took
it). If the leader dies its connection closes, the lock is released, and another process takes
over at its next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from app.db import finish, moves, sessions
from app.db import maintenance as mdb
from app.db.engine import Database
from app.db.maintenance import Retention
from app.db.rows import Conn
from app.metrics import EXPIRED
from app.service.background import Background
from app.service.move_tasks import MoveTasks

log = logging.getLogger(__name__)
T = TypeVar("T")

LEADER_LOCK_KEY = 0x5051_5301  # "PQS" + 1: the maintenance leader's advisory lock
BATCH = 1000
MAX_BATCHES_PER_QUEUE = 100


@dataclass
class MaintenanceReport:
    """What one round did."""

    expired: int = 0
    dedup_pruned: int = 0
    attempts_pruned: int = 0
    groups_pruned: int = 0
    consumers_pruned: int = 0
    minutes_pruned: int = 0
    moved: int = 0


class Maintenance:
    """Runs `run_once` every `interval` seconds while this process is the leader."""

    def __init__(self, db: Database, interval: float = 5.0) -> None:
        self.db = db
        self.interval = interval
        self._background = Background("pqs-maintenance", self._loop)
        self.is_leader = False

    async def run_once(self, now: datetime | None = None) -> MaintenanceReport:
        """One round over every queue (bounded: at most MAX_BATCHES_PER_QUEUE batches each)."""
        report = MaintenanceReport()

        for queue in await self._run(mdb.queue_retention_all):
            for _ in range(MAX_BATCHES_PER_QUEUE):
                count = await self._run(lambda conn, q=queue: self._expire_batch(conn, q, now))  # type: ignore[misc]
                EXPIRED.inc(count)  # committed
                report.expired += count
                if count < BATCH:
                    break
        report.dedup_pruned = await self._prune("dedup_prune", now)
        report.attempts_pruned = await self._prune("attempt_prune", now)
        report.groups_pruned = await self._prune("group_prune", now)
        report.consumers_pruned = await self._prune("consumer_prune", now)
        report.minutes_pruned = await self._prune("queue_minutes_prune", now)
        report.moved = await MoveTasks(self.db).advance(now)
        return report

    async def _run(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """`work` in one transaction whose statements are planned for their values (maintenance
        is not hot; see maintenance_plan_for_values)."""

        async def planned(conn: Conn) -> T:
            await mdb.plan_for_values(conn)
            return await work(conn)

        return await self.db.run(planned)

    async def _expire_batch(self, conn: Conn, queue: Retention, now: datetime | None) -> int:
        queue_id, name, retention = queue.id, queue.name, queue.retention_seconds
        groups: list[str] = []
        if queue.fifo:
            groups = await moves.expired_groups(conn, queue_id, retention, BATCH, now)
            if not groups:
                return 0
            groups = await moves.group_lock(conn, queue_id, groups)
        gone = await moves.message_expire(conn, queue_id, name, retention, groups, BATCH, now)
        touched = [g for _, g in gone if g is not None]
        if touched:
            await finish.group_release(conn, queue_id, touched, served=False, now=now)
        return len(gone)

    async def _prune(self, query: str, now: datetime | None) -> int:
        total = 0
        for _ in range(MAX_BATCHES_PER_QUEUE):

            async def work(conn: Conn) -> int:
                return await mdb.prune(conn, query, BATCH, now)

            count = await self._run(work)
            total += count
            if count < BATCH:
                break
        return total

    def start(self) -> None:
        """Start the loop in the background."""
        self._background.start()

    async def stop(self) -> None:
        """Stop the loop (releases leadership with its connection)."""
        await self._background.stop()
        self.is_leader = False

    async def _loop(self) -> None:
        while True:
            try:
                async with sessions.session(self.db.direct_url) as lock_conn:
                    while True:
                        if not self.is_leader:
                            self.is_leader = await sessions.try_lead(lock_conn, LEADER_LOCK_KEY)
                        else:
                            await sessions.still_lead(lock_conn)  # leadership lives with this session
                        if self.is_leader:
                            report = await self.run_once()
                            if report.expired or report.moved:
                                log.info("maintenance: %s", report)
                        await asyncio.sleep(self.interval)
            except asyncio.CancelledError:
                self.is_leader = False
                raise
            except Exception as exc:
                log.warning("maintenance round failed (%s); retrying", exc)
            self.is_leader = False
            await asyncio.sleep(self.interval)
