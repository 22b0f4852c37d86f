"""The connection pool, and the one place where driver errors become domain errors."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from app.db import prepared
from app.db.queues import QueueCache
from app.db.rows import Conn
from app.errors import Unavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

# Conflicts PostgreSQL resolves by aborting one transaction, and a prepared statement of
# app.db.prepared found dropped (or its name taken) behind its back inside a transaction, which
# aborts it too and is healed for the next run: running it again is safe because nothing of it
# was committed.
RETRYABLE = (
    pg_errors.DeadlockDetected,
    pg_errors.SerializationFailure,
    pg_errors.InvalidSqlStatementName,
    pg_errors.DuplicatePreparedStatement,
)
MAX_ATTEMPTS = 5
# How a pooled session plans its prepared statements (app.db.prepared's; psycopg's unnamed ones
# are planned afresh per call). PostgreSQL's default, `auto`, plans with each call's values for five
# calls, then keeps a generic plan only if its estimated cost is no higher than theirs. Sends and
# acks went generic after five; the standard and FIFO receives (a LIMIT parameter and
# coalesce(now)) never did, so every receive was planned again: the top of PostgreSQL's profile
# in a round trip (pg_strtok, copyObject, get_relation_info). The hot statements are index-driven
# whatever the values (tests/db/test_plans.py checks their generic plans too), so one plan each
# (docs/decisions/generic-plans.md).
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
# Behind PgBouncer in transaction pooling (`transaction_pooling`), a SET outlives the statement
# on one server session and never reaches the others: only the parameters PgBouncer tracks per
# client (DateStyle among them) follow the client from session to session. Statements run
# unprepared there (app.db.prepared), so the plan settings have nothing to act on (an unnamed
# statement is planned for its values, from the statistics of the moment); lock_timeout is set
# per transaction instead (SET LOCAL), and every statement runs in one.
POOLED_SESSION_SETTINGS = {"datestyle": "ISO"}
# A session lost, or sessions refused: the database (or the way to it) is down, not one statement.
# psycopg raises OperationalError without a SQLSTATE for a connection it lost or could not make.
SESSION_LOST = (
    pg_errors.ConnectionException,
    pg_errors.AdminShutdown,
    pg_errors.CrashShutdown,
    pg_errors.CannotConnectNow,
)
# How long the pool retries one lost connection (with a doubling delay: 1, 2, 4 s) before it gives
# up; the next request that needs a connection starts again from the short delay. psycopg_pool's
# default (300 s) let the delay grow with the outage: after 40 s without PostgreSQL, the pool
# tried again only ~20 s after it was back (tests/faults/test_long_outage.py).
RECONNECT_SECONDS = 5.0
# While the database is down, one request a second (what Retry-After tells clients) tries it, and
# waits this long at most for a pooled connection, so that it too is answered within a second.
TRIAL_SECONDS = 1.0
TRIAL_WAIT_SECONDS = 0.5


def session_lost(exc: psycopg.OperationalError) -> bool:
    """Whether `exc` says the database is unreachable rather than that a statement failed."""
    return exc.sqlstate is None or isinstance(exc, SESSION_LOST)


class Circuit:
    """A circuit breaker in front of the pool: open while the database is known to be down.

    Without it, once every pooled connection is gone each request waited the whole pool timeout
    for one the pool could not make (10 s by default) before its 503. It opens when a request
    loses its session, or waits for a connection in vain while the pool's attempts to connect
    fail; while open, requests are answered 503 at once, but one per `trial_seconds` goes through
    as a trial. It closes when a trial's work is done, or when the pool makes a new connection
    (its own reconnection, which the pool retries with a growing delay)."""

    def __init__(self, trial_seconds: float = TRIAL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.trial_seconds = trial_seconds
        self.clock = clock
        self.open = False
        self._trial_at = 0.0  # while open: when the next trial may go

    def claim_trial(self) -> bool:
        """While open: whether the caller may go now, as this period's trial."""
        now = self.clock()
        if now < self._trial_at:
            return False
        self._trial_at = now + self.trial_seconds
        return True

    def trip(self) -> None:
        """Open (again): the next trial goes one period from now."""
        if not self.open:
            log.warning("the database is unreachable: answering 503 until it is back")
        self.open = True
        self._trial_at = self.clock() + self.trial_seconds

    def close(self) -> None:
        """The database works."""
        if self.open:
            log.warning("the database is reachable again")
        self.open = False


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
        direct_url: str | None = None,
        transaction_pooling: bool = False,
    ):
        self.url = url
        # The server itself, not a pooler: for what needs a session of its own (LISTEN, the
        # maintenance leader's session advisory lock).
        self.direct_url = direct_url or url
        # `url` goes through PgBouncer in pool_mode=transaction (PQS_DATABASE_POOLER).
        self.transaction_pooling = transaction_pooling
        self._lock_timeout_ms = max(1, int(lock_timeout * 1000))
        self.timeout = timeout  # longest wait for a pooled connection
        self.lock_timeout = lock_timeout
        # Shared by the services of this process so that local queue changes invalidate it.
        self.queue_cache = QueueCache(queue_cache_seconds)
        self.circuit = Circuit()
        self._connect_errors = 0  # the pool's failed attempts to connect, as of its latest new connection
        self.pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            # Autocommit: `transaction()` opens an explicit transaction; `run_single()` sends one
            # statement that is its own transaction (one round trip instead of three).
            # prepare_threshold None: psycopg prepares nothing here, so app.db.prepared is the one
            # owner of a pooled connection's prepared statements (psycopg ends a rollback with
            # DEALLOCATE ALL whenever it holds statements of its own; see that module).
            kwargs={"row_factory": dict_row, "autocommit": True, "prepare_threshold": None},
            connection_class=psycopg.AsyncConnection[DictRow],
            configure=self._configure,
            reconnect_timeout=RECONNECT_SECONDS,
        )

    async def _configure(self, conn: Conn) -> None:
        # A statement waits for a lock at most `lock_timeout`: a request (or a group-commit flush
        # carrying many) stuck behind a lock, say a long purge holding the queue row, ends in
        # LockNotAvailable, answered 503 with Retry-After like a pool timeout, nothing committed.
        if self.transaction_pooling:
            prepared.unprepared(conn)
            for name, value in POOLED_SESSION_SETTINGS.items():
                await conn.execute(f"SET {name} = {value}")
        else:
            await conn.execute(f"SET lock_timeout = {self._lock_timeout_ms}")
            for name, value in SESSION_SETTINGS.items():
                await conn.execute(f"SET {name} = {value}")
        # A new connection works: the pool reached the database (the circuit's background probe).
        self._connect_errors = self.pool.get_stats().get("connections_errors", 0)
        self.circuit.close()

    def _connects_failing(self) -> bool:
        """Whether the pool failed to connect since it last made a connection."""
        return self.pool.get_stats().get("connections_errors", 0) > self._connect_errors

    def pool_counts(self) -> tuple[int, int, int]:
        """The pool now: (connections in use, idle connections, requests waiting for one)."""
        stats = self.pool.get_stats()
        size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        return size - idle, idle, stats.get("requests_waiting", 0)

    async def open(self) -> None:
        """Open the pool (waits for the first connections)."""
        await self.pool.open(wait=True, timeout=30)

    async def close(self) -> None:
        """Close every connection."""
        await self.pool.close()

    @asynccontextmanager
    async def connection(self, *, transaction: bool = False, wait: float | None = None) -> AsyncIterator[Conn]:
        """A pooled connection (waiting at most `wait` seconds for it, else the pool timeout): in
        autocommit mode (each statement commits on its own), or inside a transaction that commits
        when the block exits cleanly. Pool and connection failures become Unavailable here, and
        only here; and here the circuit learns whether the database is up."""
        trial = self.circuit.open
        if trial:
            if not self.circuit.claim_trial():
                raise Unavailable("the database is unavailable")
            wait = TRIAL_WAIT_SECONDS if wait is None else min(wait, TRIAL_WAIT_SECONDS)
        try:
            async with self.pool.connection(wait) as conn:
                if transaction:
                    async with conn.transaction():
                        if self.transaction_pooling:
                            await conn.execute(f"SET LOCAL lock_timeout = {self._lock_timeout_ms}")
                        yield conn
                else:
                    yield conn
        except PoolTimeout as exc:
            if not trial and self._connects_failing():
                self.circuit.trip()
            raise Unavailable("no database connection available in time") from exc
        except psycopg.OperationalError as exc:
            if isinstance(exc, RETRYABLE):
                raise
            if session_lost(exc):
                self.circuit.trip()
            raise Unavailable("the database is unavailable") from exc
        if trial:
            self.circuit.close()

    async def ping(self, within: float) -> None:
        """A pooled connection answers `SELECT 1` within `within` seconds, waiting for it
        included; else Unavailable."""
        try:
            async with asyncio.timeout(within), self.connection(wait=within) as conn:
                await conn.execute("SELECT 1")
        except TimeoutError as exc:
            raise Unavailable("the database did not answer in time") from exc

    def transaction(self) -> AbstractAsyncContextManager[Conn]:
        """A pooled connection inside a transaction that commits when the block exits cleanly."""
        return self.connection(transaction=True)

    async def _attempts(self, work: Callable[[Conn], Awaitable[T]], *, transaction: bool) -> T:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                async with self.connection(transaction=transaction) as conn:
                    return await work(conn)
            except RETRYABLE as exc:
                if attempt == MAX_ATTEMPTS:
                    raise
                log.info("transaction aborted (%s); retrying (attempt %d)", type(exc).__name__, attempt)
                await asyncio.sleep(0.005 * attempt)
        raise AssertionError("unreachable")

    async def run(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """Run `work` in one transaction, again if PostgreSQL aborted it for a deadlock (RETRYABLE)."""
        return await self._attempts(work, transaction=True)

    async def run_single(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """Run `work`, which must issue exactly one statement that writes (atomic by itself),
        possibly followed by reads, without an explicit transaction; again if PostgreSQL
        aborted it for a deadlock. Behind PgBouncer, in a transaction all the same: lock_timeout
        is set per transaction there."""
        return await self._attempts(work, transaction=self.transaction_pooling)
