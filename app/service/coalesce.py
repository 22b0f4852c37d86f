"""Group commit: concurrent calls for the same key run as one database call.

Each caller submits its items and waits. A runner takes everything pending for the key (up to
`max_items`), runs `flush(key, items)` once (one statement, one commit) and hands each caller
its own slice of the results, only after that commit. Nothing waits for a timer: at low load a
call runs alone at once; under load, what arrives while a flush is under way goes into the
next one. At most `max_inflight` flushes per key run at the same time. A submission of
`alone_at` items or more is large enough to be its own batch: it runs at once, by itself, and
does not count against `max_inflight`.

A submission still waiting for its turn after `wait_seconds` (the pool timeout: the time a
request may wait for the database) gives up with Unavailable (503) and is never run: when the
flushes ahead of it are stuck (a lock held on the queue), callers get a bounded answer instead of
piling up. Once a flush has taken a submission, the caller waits for that flush's outcome (it may
commit).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

from app.errors import Unavailable

K = TypeVar("K", bound=Hashable)
I = TypeVar("I")  # noqa: E741
R = TypeVar("R")


class Coalescer(Generic[K, I, R]):
    """Run concurrent submissions for one key together (see the module docstring)."""

    def __init__(
        self,
        flush: Callable[[K, list[I]], Awaitable[list[R]]],
        *,
        max_items: int = 1000,
        max_inflight: int = 2,
        alone_at: int = 100,
        wait_seconds: float | None = None,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        self._flush = flush
        # Told the size of each flush (a metric's observe: app/metrics.py's FLUSH_SIZE).
        self._observe = observe
        self.wait_seconds = wait_seconds
        self.max_items = max_items
        self.max_inflight = max_inflight
        self.alone_at = alone_at
        self._pending: dict[K, deque[tuple[Sequence[I], asyncio.Future[list[R]]]]] = defaultdict(deque)
        self._inflight: dict[K, int] = defaultdict(int)
        self._tasks: set[asyncio.Task[None]] = set()
        self._taken: set[asyncio.Future[list[R]]] = set()  # submissions a flush is running

    async def submit(self, key: K, items: Sequence[I]) -> list[R]:
        """Run `items` (with whatever else is pending for `key`); their results, in order."""
        if len(items) >= self.alone_at:
            if self._observe is not None:
                self._observe(len(items))
            return await self._flush(key, list(items))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[R]] = loop.create_future()
        self._pending[key].append((items, future))
        self._kick(key)
        if self.wait_seconds is None:
            return await future
        # A timer rather than asyncio.wait_for: one handle instead of a task-like wrapper and a
        # shield per call (measured: wait_for was ~7% of the service's CPU in a round trip).
        timer = loop.call_later(self.wait_seconds, self._expire, future)
        try:
            return await future
        finally:
            timer.cancel()

    def _expire(self, future: asyncio.Future[list[R]]) -> None:
        """The submission's wait is over: unless a flush has taken it, it fails with Unavailable
        and never runs (_take skips finished futures)."""
        if not future.done() and future not in self._taken:
            future.set_exception(Unavailable("the database did not take this request in time"))

    def _kick(self, key: K) -> None:
        if self._pending[key] and self._inflight[key] < self.max_inflight:
            self._inflight[key] += 1
            task = asyncio.create_task(self._run(key))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take(self, key: K) -> list[tuple[Sequence[I], asyncio.Future[list[R]]]]:
        queue, count = self._pending[key], 0
        taken: list[tuple[Sequence[I], asyncio.Future[list[R]]]] = []
        while queue and (not taken or count + len(queue[0][0]) <= self.max_items):
            items, future = queue.popleft()
            if future.done():  # the caller went away (cancelled): nothing to do for it
                continue
            taken.append((items, future))
            self._taken.add(future)
            count += len(items)
        return taken

    async def _run(self, key: K) -> None:
        try:
            # Bounded: every round takes at least one submission off the queue.
            while self._pending[key]:
                batch = self._take(key)
                if not batch:
                    continue
                items = [item for submitted, _ in batch for item in submitted]
                if self._observe is not None:
                    self._observe(len(items))
                try:
                    results = await self._flush(key, items)
                except BaseException as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                        self._taken.discard(future)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                start = 0
                for submitted, future in batch:
                    part = results[start : start + len(submitted)]
                    start += len(submitted)
                    if not future.done():
                        future.set_result(part)
                    self._taken.discard(future)
        finally:
            self._inflight[key] -= 1
            if not self._pending[key]:
                self._pending.pop(key, None)
                if self._inflight[key] == 0:
                    self._inflight.pop(key, None)
            else:
                self._kick(key)
