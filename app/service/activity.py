"""What a queue did lately and how its FIFO groups stand, for the dashboard (docs/dashboard.md):
its minutes (sent, acked, dead-lettered, depth) and its groups (the largest, those with the
oldest heads, those a receive holds). Reads only; each method one transaction."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from app.db import activity as adb
from app.db.activity import Census, Head, Lease, Minute
from app.db.engine import Database
from app.db.rows import Conn
from app.errors import InvalidInput, NotAFifoQueue, quote
from app.service.queues import get_queue
from app.service.throughput import Throughput

# A day: the minutes are kept that long (queue_minutes_prune).
MAX_MINUTES = 24 * 60
# The groups of each kind an answer shows at most: the census keeps this many (metrics_loop).
MAX_GROUPS = 50


@dataclass(frozen=True)
class GroupCount:
    """A group and how many messages it held at the census; `head`: its first message now
    (None: it has none left)."""

    group_id: str
    messages: int
    head: Head | None = None


@dataclass(frozen=True)
class QueueGroups:
    """A FIFO queue's groups: the census's (None before the first) and the leases now."""

    counted_at: datetime | None
    group_count: int | None
    largest: list[GroupCount]
    oldest: list[GroupCount]
    in_flight: list[Lease]


class ActivityService:
    """Reads of a queue's minutes and groups."""

    def __init__(self, db: Database, throughput: Throughput) -> None:
        self.db = db
        self.throughput = throughput

    async def minutes(self, name: str, minutes: int = 60, now: datetime | None = None) -> list[Minute]:
        """The queue's last `minutes` minutes (1 to MAX_MINUTES), this one included, oldest
        first; with what this process counted and has not flushed yet."""
        if not 1 <= minutes <= MAX_MINUTES:
            raise InvalidInput(f"minutes must be between 1 and {MAX_MINUTES}, not {minutes}")

        async def work(conn: Conn) -> tuple[int, list[Minute]]:
            queue = await get_queue(conn, name)
            return queue.id, await adb.queue_minutes_range(conn, queue.id, minutes, now)

        queue_id, rows = await self.db.run(work)
        unflushed = self.throughput.unflushed(queue_id)
        if not unflushed:
            return rows
        merged = []
        for row in rows:
            sent, acked, dead = unflushed.get(row.minute, (0, 0, 0))
            merged.append(
                row._replace(sent=row.sent + sent, acked=row.acked + acked, dead_lettered=row.dead_lettered + dead)
            )
        return merged

    async def groups(self, name: str, limit: int = 10, now: datetime | None = None) -> QueueGroups:
        """A FIFO queue's largest groups and those with the oldest heads as the leader last
        counted them, each with its head now, and the groups a receive holds now, longest held
        first; up to `limit` (1 to MAX_GROUPS) of each, ages as of `now` (None: the database's
        clock). NotAFifoQueue for a standard queue."""
        if not 1 <= limit <= MAX_GROUPS:
            raise InvalidInput(f"limit must be between 1 and {MAX_GROUPS}, not {limit}")

        async def work(conn: Conn) -> tuple[Census | None, dict[str, Head], list[Lease]]:
            queue = await get_queue(conn, name)
            if not queue.fifo:
                raise NotAFifoQueue(f"queue {quote(name)} is a standard queue: only a FIFO queue has groups")
            census = await adb.group_census_get(conn, queue.id)
            named = {g["group_id"] for g in (census.largest[:limit] + census.oldest[:limit])} if census else set()
            heads = await adb.group_heads(conn, queue.id, sorted(named), now)
            return census, heads, await adb.group_in_flight(conn, queue.id, limit, now)

        census, heads, in_flight = await self.db.run(work)
        if census is None:
            return QueueGroups(None, None, [], [], in_flight)

        def counted(groups: list[dict[str, object]]) -> list[GroupCount]:
            found = [GroupCount(str(g["group_id"]), int(str(g["messages"]))) for g in groups[:limit]]
            return [replace(g, head=heads.get(g.group_id)) for g in found]

        return QueueGroups(
            census.counted_at, census.group_count, counted(census.largest), counted(census.oldest), in_flight
        )
