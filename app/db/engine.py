"""The connection pool, and the one place where driver errors become domain errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from app.db.queues import QueueCache
from app.db.rows import Conn
from app.errors import Unavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

# Conflicts PostgreSQL resolves by aborting one transaction; running it again is safe because
# nothing of it was committed.
RETRYABLE = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
MAX_ATTEMPTS = 5
# How a pooled session plans the statements psycopg has prepared (it prepares one after its fifth
# run on a connection). PostgreSQL's default, `auto`, plans with each call's values for five
# calls, then keeps a generic plan only if its estimated cost is no higher than theirs; for the
# hot statements (LIMIT and coalesce(now) parameters, the JSON document of a send) the estimate
# never was, so every call was planned again: most of PostgreSQL's CPU per message in a round
# trip (perf: pg_strtok, copyObject, get_relation_info). The hot statements are index-driven
# whatever the values (tests/db/test_plans.py checks their generic plans too), so one plan each.
PLAN_CACHE_MODE = "force_generic_plan"
# A generic plan is made once, from the table statistics of that moment, and kept for the
# connection's life. Made while a queue held a few thousand messages, the standard receive's
# generic plan joined its picks to `messages` by a sequential scan and a hash join (cheaper, by
# the estimate, than a few dozen index probes into a small table), and kept doing so when the
# backlog grew to millions: every receive read the whole table (measured: PostgreSQL's CPU for a
# send, receive and ack of one message at a 3k backlog went from ~1,490 to ~570 us with this
# off). Every statement of the service has an index to go by, so a pooled session never takes a
# sequential scan where an index path exists; a statement with no such path (none on the hot
# path) still gets one. DateStyle ISO: app.db.prepared reads timestamps in PostgreSQL's ISO output.
SESSION_SETTINGS = {"plan_cache_mode": PLAN_CACHE_MODE, "enable_seqscan": "off", "datestyle": "ISO"}


class Database:
    """A psycopg async pool; `transaction()` and `run()` hand out connections inside a transaction."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 2,
        max_size: int = 16,
        timeout: float = 10.0,
        lock_timeout: float = 10.0,
        queue_cache_seconds: float = 1.0,
    ):
        self.url = url
        self.timeout = timeout  # longest wait for a pooled connection
        self.lock_timeout = lock_timeout
        # Shared by the services of this process so that local queue changes invalidate it.
        self.queue_cache = QueueCache(queue_cache_seconds)
        self.pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            # Autocommit: `transaction()` opens an explicit transaction; `run_single()` sends one
            # statement that is its own transaction (one round trip instead of three).
            kwargs={"row_factory": dict_row, "autocommit": True},
            connection_class=psycopg.AsyncConnection[DictRow],
            configure=self._configure,
        )

    async def _configure(self, conn: Conn) -> None:
        # A statement waits for a lock at most `lock_timeout`: a request (or a group-commit flush
        # carrying many) stuck behind a lock, say a long purge holding the queue row, ends in
        # LockNotAvailable, answered 503 with Retry-After like a pool timeout, nothing committed.
        await conn.execute(f"SET lock_timeout = {max(1, int(self.lock_timeout * 1000))}")
        for name, value in SESSION_SETTINGS.items():
            await conn.execute(f"SET {name} = {value}")

    async def open(self) -> None:
        """Open the pool (waits for the first connections)."""
        await self.pool.open(wait=True, timeout=30)

    async def close(self) -> None:
        """Close every connection."""
        await self.pool.close()

    @asynccontextmanager
    async def connection(self, *, transaction: bool = False) -> AsyncIterator[Conn]:
        """A pooled connection: in autocommit mode (each statement commits on its own), or
        inside a transaction that commits when the block exits cleanly. Pool and connection
        failures become Unavailable here, and only here."""
        try:
            async with self.pool.connection() as conn:
                if transaction:
                    async with conn.transaction():
                        yield conn
                else:
                    yield conn
        except PoolTimeout as exc:
            raise Unavailable("no database connection available in time") from exc
        except psycopg.OperationalError as exc:
            if isinstance(exc, RETRYABLE):
                raise
            raise Unavailable("the database is unavailable") from exc

    def transaction(self) -> AbstractAsyncContextManager[Conn]:
        """A pooled connection inside a transaction that commits when the block exits cleanly."""
        return self.connection(transaction=True)

    async def _attempts(self, work: Callable[[Conn], Awaitable[T]], *, transaction: bool) -> T:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                async with self.connection(transaction=transaction) as conn:
                    return await work(conn)
            except RETRYABLE:
                if attempt == MAX_ATTEMPTS:
                    raise
                log.info("aborted by a lock conflict; retrying (attempt %d)", attempt)
                await asyncio.sleep(0.005 * attempt)
        raise AssertionError("unreachable")

    async def run(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """Run `work` in one transaction, again if PostgreSQL aborted it for a deadlock."""
        return await self._attempts(work, transaction=True)

    async def run_single(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """Run `work`, which must issue exactly one statement that writes (atomic by itself),
        possibly followed by reads, without an explicit transaction; again if PostgreSQL
        aborted it for a deadlock."""
        return await self._attempts(work, transaction=False)
