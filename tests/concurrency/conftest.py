"""Fixtures of the concurrency tests: a message service whose long polls are woken by NOTIFY."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from app.db.engine import Database
from app.service.messages import MessageService
from app.service.wakeup import Wakeup


@pytest_asyncio.fixture
async def live(db: Database, db_url: str) -> AsyncIterator[MessageService]:
    """The message service with a listening Wakeup, as the app runs it (long polls really wait)."""
    wakeup = Wakeup(db_url)
    await wakeup.start()
    assert wakeup.connected.is_set(), "the listener did not connect"
    try:
        yield MessageService(db, wakeup)
    finally:
        await wakeup.stop()
