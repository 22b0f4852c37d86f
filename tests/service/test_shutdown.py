"""Graceful shutdown: draining the wake-up registry answers parked long polls at once."""

from __future__ import annotations

import asyncio
import signal

from fastapi import FastAPI

from app.domain import SendEntry
from app.service.messages import MessageService
from app.shutdown import drain_on_signal
from tests.factories import make_queue


async def test_drain_answers_parked_long_polls_empty_and_stops_new_waits(app: FastAPI) -> None:
    messages: MessageService = app.state.messages
    q = await make_queue(app.state.queues)
    loop = asyncio.get_running_loop()
    started = loop.time()
    parked = [asyncio.create_task(messages.receive(q, wait_seconds=20)) for _ in range(5)]
    await asyncio.sleep(0.3)
    assert not any(task.done() for task in parked)
    app.state.wakeup.drain()
    results = await asyncio.wait_for(asyncio.gather(*parked), timeout=5)
    assert results == [[]] * 5
    # A receive that starts while draining does not wait either, but still takes what is there.
    assert await asyncio.wait_for(messages.receive(q, wait_seconds=20), timeout=5) == []
    await messages.send(q, [SendEntry(body="late")])
    [late] = await asyncio.wait_for(messages.receive(q, wait_seconds=20), timeout=5)
    assert late.body == "late"
    assert loop.time() - started < 10


async def test_signal_chaining_only_under_uvicorn() -> None:
    # pytest installs no uvicorn handler: nothing is chained and the handlers stay as they were.
    before = signal.getsignal(signal.SIGTERM)
    with drain_on_signal(lambda: None) as installed:
        assert installed is False
        assert signal.getsignal(signal.SIGTERM) is before
