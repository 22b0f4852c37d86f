"""The maintenance loop has exactly one leader among processes (session advisory lock)."""

from __future__ import annotations

import asyncio

from app.db.engine import Database
from app.service.maintenance import Maintenance


async def _until(predicate: object, seconds: float = 5.0) -> bool:
    for _ in range(int(seconds / 0.02)):
        if predicate():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.02)
    return False


async def test_one_leader_and_takeover(db: Database) -> None:
    loops = [Maintenance(db, interval=0.05) for _ in range(3)]
    for loop in loops:
        loop.start()
    try:
        assert await _until(lambda: any(m.is_leader for m in loops))
        await asyncio.sleep(0.3)  # several rounds: nobody else may become leader meanwhile
        leaders = [m for m in loops if m.is_leader]
        assert len(leaders) == 1
        # The leader stops (its connection, and so its lock, goes): another takes over.
        await leaders[0].stop()
        rest = [m for m in loops if m is not leaders[0]]
        assert await _until(lambda: any(m.is_leader for m in rest))
        await asyncio.sleep(0.2)
        assert sum(m.is_leader for m in rest) == 1
    finally:
        for loop in loops:
            await loop.stop()
