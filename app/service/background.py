"""One coroutine run in the background until stopped: the maintenance loop, the metrics loop and
the LISTEN connection each hold one. Stopping cancels it and waits until it has ended, so that
what it held (a connection, leadership) is released before the caller goes on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any


class Background:
    """`run()` as a task named `name`, from `start()` to `stop()`; either may be called again."""

    def __init__(self, name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.name = name
        self._run = run
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
