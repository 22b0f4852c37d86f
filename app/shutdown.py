"""Graceful shutdown: on SIGTERM (or Ctrl-C) parked long polls are answered at once, empty.

uvicorn handles the signal itself: it stops accepting connections, waits for in-flight requests
to finish, then runs the lifespan shutdown (which closes the pool and the listener). A long poll
is an in-flight request that could hold that up for `wait_seconds` (up to 20 s), so the app
chains its own step onto uvicorn's signal handler: the process's `Wakeup` starts draining, every
waiting receive wakes, and receives return what they have (usually nothing) instead of waiting.
Requests that are doing database work finish normally.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _is_uvicorn_handler(handler: Any) -> bool:
    owner = getattr(handler, "__self__", None)
    return type(owner).__module__.startswith("uvicorn.")


@contextlib.contextmanager
def drain_on_signal(drain: Callable[[], None]) -> Iterator[bool]:
    """While inside: SIGTERM/SIGINT also call `drain` (in the event loop), after uvicorn's own
    handler. Only when uvicorn's handlers are installed in this main thread (i.e. under
    `pqs serve`); elsewhere (tests, other servers) it does nothing and yields False."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    if not all(_is_uvicorn_handler(handler) for handler in previous.values()):
        yield False
        return
    loop = asyncio.get_running_loop()

    def chained(sig: int, frame: FrameType | None) -> None:
        handler = previous[signal.Signals(sig)]
        if callable(handler):
            handler(sig, frame)
        loop.call_soon_threadsafe(drain)

    for sig in SIGNALS:
        signal.signal(sig, chained)
    try:
        yield True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
