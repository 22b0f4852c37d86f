"""What each queue did per minute, counted where it happens: messages sent (not duplicates nor
refused entries), acked, and dead-lettered by a receive. For the dashboard's charts
(docs/dashboard.md).

Each process counts in memory, per queue and minute (`Throughput.sent`, `acked`, `dead_lettered`: a dict look-up and an
addition, after the commit of a send, ack or receive flush, which already knows its queue and its
count; no statement, no lock, no await), and adds its counts to `queue_minutes` every
FLUSH_SECONDS and when it stops (`flush`: one upsert statement for every queue and minute it
counted, whatever the traffic). The counts of all processes sum there. A process that dies
loses its last FLUSH_SECONDS of counts; a flush that fails keeps them for the next. A reader in
the same process adds what it has not flushed yet (`unflushed`), so its own counts show at once;
another process's show within FLUSH_SECONDS. (A read that overlaps this process's flush may
miss, or count twice, that flush's counts in that one answer: the next is right.)

The minute of a count is the caller's `now` when it passes one (tests), else this process's
clock (time.time); the leader's depth samples and the reads use the database's. The minutes are
kept a day: the maintenance leader prunes older rows (queue_minutes_prune).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from app.db import activity as adb
from app.db.activity import MinuteCounts
from app.db.engine import Database
from app.service.background import Background

log = logging.getLogger(__name__)

FLUSH_SECONDS = 10.0
# Counts of minutes older than this are not kept for a later flush (the prune would drop them).
KEEP_MINUTES = 24 * 60
SENT, ACKED, DEAD_LETTERED = range(3)
# (queue id, minute since the epoch) -> [sent, acked, dead-lettered]
Pending = dict[tuple[int, int], list[int]]


class Throughput:
    """This process's counts not yet added to queue_minutes, and the loop that adds them."""

    def __init__(self, db: Database, interval: float = FLUSH_SECONDS, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.interval = interval
        self.clock = clock
        self._pending: Pending = {}
        self._flushing: Pending = {}  # taken by the flush running now, not yet committed
        self._background = Background("pqs-throughput", self._loop)

    def sent(self, queue_id: int, n: int, now: datetime | None = None) -> None:
        """Count `n` messages sent to the queue (committed, not duplicates)."""
        self._count(queue_id, SENT, n, now)

    def acked(self, queue_id: int, n: int, now: datetime | None = None) -> None:
        """Count `n` messages of the queue acked (committed)."""
        self._count(queue_id, ACKED, n, now)

    def dead_lettered(self, queue_id: int, n: int, now: datetime | None = None) -> None:
        """Count `n` messages of the queue a receive moved to its dead-letter queue (committed)."""
        self._count(queue_id, DEAD_LETTERED, n, now)

    def _count(self, queue_id: int, kind: int, n: int, now: datetime | None) -> None:
        if n <= 0:
            return
        minute = int((now.timestamp() if now is not None else self.clock()) // 60)
        counts = self._pending.get((queue_id, minute))
        if counts is None:
            counts = self._pending[queue_id, minute] = [0, 0, 0]
        counts[kind] += n

    def unflushed(self, queue_id: int) -> dict[datetime, list[int]]:
        """This process's counts of the queue not yet committed to queue_minutes, by minute."""
        found: dict[datetime, list[int]] = {}
        for pending in (self._flushing, self._pending):
            for (queue, minute), counts in pending.items():
                if queue == queue_id:
                    at = datetime.fromtimestamp(minute * 60, UTC)
                    found[at] = [a + b for a, b in zip(found.get(at, [0, 0, 0]), counts, strict=True)]
        return found

    async def flush(self) -> int:
        """Add the counts made since the last flush to queue_minutes (one statement); how many
        (queue, minute) rows. On failure they are kept for the next flush."""
        if not self._pending:
            return 0
        self._flushing, self._pending = self._pending, {}
        # In key order: two processes adding to the same minutes lock their rows in one order.
        rows = [
            MinuteCounts(queue, datetime.fromtimestamp(minute * 60, UTC), *counts)
            for (queue, minute), counts in sorted(self._flushing.items())
        ]
        try:
            await self.db.run_single(lambda conn: adb.queue_minutes_add(conn, rows))
        except BaseException:
            self._keep(self._flushing)
            raise
        finally:
            self._flushing = {}
        return len(rows)

    def _keep(self, taken: Pending) -> None:
        """Put counts a flush could not add back, with those made meanwhile (within a day)."""
        oldest = int(self.clock() // 60) - KEEP_MINUTES
        for key, counts in taken.items():
            if key[1] < oldest:
                continue
            kept = self._pending.setdefault(key, [0, 0, 0])
            for kind, n in enumerate(counts):
                kept[kind] += n

    def start(self) -> None:
        """Flush every `interval` seconds in the background."""
        self._background.start()

    async def stop(self) -> None:
        """Stop the loop, then flush what is left (a failure is logged: those counts are lost)."""
        await self._background.stop()
        try:
            await self.flush()
        except Exception as exc:
            log.warning("throughput: the last flush failed (%s); its counts are lost", exc)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("throughput flush failed (%s); retrying", exc)
