"""Long-poll wake-ups: one LISTEN connection per process fans NOTIFYs out to waiting receives.

Whatever makes messages receivable ends in `pg_notify('pqs_queue', <queue id>)`; PostgreSQL
delivers it to every listening process. The hot paths (send, ack) do not notify inside their
own transaction, because PostgreSQL serialises the commits of notifying transactions on one
lock: after their commit they call `publish()`, which wakes this process's waiters at once and
sends one NOTIFY per queue from a connection of its own, coalescing whatever was published
while the previous round was under way or resting (rounds are at least
NOTIFY_INTERVAL_SECONDS apart). Rarer paths (nack, visibility, redrive, dead letters)
notify inside their transaction. Waiters hold no pooled connection, only an asyncio.Event. If
the listening connection drops, every waiter is woken (they poll once) and the listener
reconnects with capped backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterator

from app.db import sessions
from app.db.rows import Conn
from app.db.sessions import CHANNEL as CHANNEL
from app.metrics import LONG_POLL_WAITERS
from app.service.background import Background

log = logging.getLogger(__name__)


# Least time between two rounds of NOTIFYs from one process. A round carries every queue
# published since the last one, so under load (a send flush every millisecond or two) one
# NOTIFY stands for many commits: PostgreSQL runs fewer notifying commits and every listener
# wakes fewer times. A lone publish goes out at once; a waiter in another process learns of a
# message at most this much later than the sender's own waiters.
NOTIFY_INTERVAL_SECONDS = 0.005


class Wakeup:
    """The process's listener and its registry of waiting receives."""

    def __init__(self, url: str, notify_interval: float = NOTIFY_INTERVAL_SECONDS) -> None:
        self.url = url
        self.notify_interval = notify_interval
        self._waiters: dict[int, set[asyncio.Event]] = defaultdict(set)
        self._listener = Background("pqs-listener", self._run)
        self.connected = asyncio.Event()
        self._pending: set[int] = set()
        self._publisher: asyncio.Task[None] | None = None
        self._notify_conn: Conn | None = None
        # Backend pid of that connection: the listener skips the NOTIFYs it sent (a second,
        # useless wake-up of this process's waiters, each then polling once more).
        self._notify_pid: int | None = None
        # Set when the process is shutting down: receives stop waiting (see app/shutdown.py).
        self.draining = False

    async def start(self) -> None:
        """Start listening; returns once the first LISTEN is in place (or after 10 s)."""
        self._listener.start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.connected.wait(), timeout=10)

    async def stop(self) -> None:
        """Stop listening and wake every waiter."""
        if self._publisher is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._publisher, timeout=5)
            self._publisher = None
        if self._notify_conn is not None:
            await self._notify_conn.close()
            self._notify_conn = None
        await self._listener.stop()
        self.wake_all()

    @contextlib.contextmanager
    def subscribe(self, queue_id: int) -> Iterator[asyncio.Event]:
        """An event set whenever the queue may have something new to receive."""
        event = asyncio.Event()
        self._waiters[queue_id].add(event)
        LONG_POLL_WAITERS.inc()
        try:
            yield event
        finally:
            LONG_POLL_WAITERS.dec()
            waiters = self._waiters.get(queue_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[queue_id]

    def publish(self, queue_id: int) -> None:
        """After a commit that made messages of this queue receivable: wake this process's
        waiters now, and every process's with a NOTIFY sent shortly after."""
        self.notify_local(queue_id)
        self._pending.add(queue_id)
        if self._publisher is None or self._publisher.done():
            self._publisher = asyncio.create_task(self._publish(), name="pqs-notify")

    async def _publish(self) -> None:
        # Bounded: each round sends what is pending; publishers add more only while a round
        # is under way or resting, and a round that fails drops its ids (other processes'
        # waiters then find the messages at their next poll or deadline; nothing is lost).
        loop = asyncio.get_running_loop()
        for _ in range(10_000):
            if not self._pending:
                return
            queue_ids = sorted(self._pending)
            self._pending.clear()
            started = loop.time()
            try:
                await self._notify(queue_ids)
            except Exception as exc:
                log.warning("could not publish wake-ups (%s)", exc)
                if self._notify_conn is not None:
                    await self._notify_conn.close()
                self._notify_conn = None
            rest = self.notify_interval - (loop.time() - started)
            if rest > 0 and not self.draining:
                await asyncio.sleep(rest)

    async def _notify(self, queue_ids: list[int]) -> None:
        """One round: a NOTIFY per queue in one statement, from the publishing connection."""
        if self._notify_conn is None or self._notify_conn.closed:
            self._notify_conn = await sessions.connect(self.url)
            self._notify_pid = sessions.backend_pid(self._notify_conn)
        await sessions.wake_queues(self._notify_conn, queue_ids)

    def notify_local(self, queue_id: int) -> None:
        """Wake this process's waiters of one queue."""
        for event in self._waiters.get(queue_id, ()):
            event.set()

    def drain(self) -> None:
        """The process is shutting down: wake every waiter, and let no receive wait from now on."""
        self.draining = True
        self.wake_all()

    def wake_all(self) -> None:
        """Wake every waiter of every queue."""
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                async with sessions.session(self.url) as conn:
                    await sessions.listen(conn)
                    self.connected.set()
                    backoff = 0.1
                    # Anything sent while we were not listening: let waiters look again.
                    self.wake_all()
                    async for pid, payload in sessions.wake_ups(conn):
                        if pid == self._notify_pid:
                            continue  # our own publish(): its waiters were woken already
                        with contextlib.suppress(ValueError):
                            self.notify_local(int(payload))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("listener connection lost (%s); reconnecting in %.1fs", exc, backoff)
            self.connected.clear()
            self.wake_all()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
