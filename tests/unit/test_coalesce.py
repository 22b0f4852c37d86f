"""Group commit: concurrent submissions share flushes; each caller gets its own results."""

from __future__ import annotations

import asyncio

import pytest

from app.errors import Unavailable
from app.service.coalesce import Coalescer


class Recorder:
    def __init__(self, delay: float = 0.01, fail_on: int | None = None) -> None:
        self.delay = delay
        self.fail_on = fail_on
        self.batches: list[list[int]] = []
        self.running = 0
        self.most_running = 0

    async def flush(self, key: str, items: list[int]) -> list[str]:
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            self.batches.append(items)
            await asyncio.sleep(self.delay)
            if self.fail_on is not None and self.fail_on in items:
                raise ValueError("boom")
            return [f"{key}:{i}" for i in items]
        finally:
            self.running -= 1


async def test_a_lone_call_runs_at_once_by_itself() -> None:
    recorder = Recorder(delay=0)
    coalescer: Coalescer[str, int, str] = Coalescer(recorder.flush)
    assert await coalescer.submit("q", [1, 2]) == ["q:1", "q:2"]
    assert recorder.batches == [[1, 2]]


async def test_concurrent_calls_share_flushes_and_get_their_own_slices() -> None:
    recorder = Recorder()
    coalescer: Coalescer[str, int, str] = Coalescer(recorder.flush, max_inflight=1)
    calls = [coalescer.submit("q", [10 * n, 10 * n + 1]) for n in range(20)]
    results = await asyncio.gather(*calls)
    assert results == [[f"q:{10 * n}", f"q:{10 * n + 1}"] for n in range(20)]
    assert len(recorder.batches) < 20, "no coalescing happened"
    assert sorted(i for batch in recorder.batches for i in batch) == sorted(
        i for n in range(20) for i in (10 * n, 10 * n + 1)
    )
    assert recorder.most_running == 1


async def test_keys_never_mix_and_inflight_is_bounded() -> None:
    recorder = Recorder()
    coalescer: Coalescer[str, int, str] = Coalescer(recorder.flush, max_inflight=2)
    results = await asyncio.gather(*(coalescer.submit(k, [n]) for n in range(30) for k in ("a", "b")))
    assert results == [[f"{k}:{n}"] for n in range(30) for k in ("a", "b")]
    assert recorder.most_running <= 4  # two keys x two flushes each


async def test_max_items_caps_a_flush() -> None:
    recorder = Recorder()
    coalescer: Coalescer[str, int, str] = Coalescer(recorder.flush, max_items=5, max_inflight=1)
    await asyncio.gather(*(coalescer.submit("q", [n, n]) for n in range(10)))
    assert max(len(batch) for batch in recorder.batches) <= 5


async def test_a_failing_flush_fails_every_caller_in_it_and_nothing_else() -> None:
    recorder = Recorder(fail_on=3)
    coalescer: Coalescer[str, int, str] = Coalescer(recorder.flush, max_inflight=1)
    outcomes = await asyncio.gather(*(coalescer.submit("q", [n]) for n in range(8)), return_exceptions=True)
    failed = {n for n, outcome in enumerate(outcomes) if isinstance(outcome, ValueError)}
    batch_with_3 = next(batch for batch in recorder.batches if 3 in batch)
    assert failed == set(batch_with_3)
    assert all(outcomes[n] == [f"q:{n}"] for n in range(8) if n not in failed)


async def test_a_cancelled_caller_does_not_disturb_the_others() -> None:
    recorder = Recorder()
    coalescer: Coalescer[str, int, str] = Coalescer(recorder.flush, max_inflight=1)
    first = asyncio.create_task(coalescer.submit("q", [1]))
    await asyncio.sleep(0)
    doomed = asyncio.create_task(coalescer.submit("q", [2]))
    kept = asyncio.create_task(coalescer.submit("q", [3]))
    await asyncio.sleep(0)
    doomed.cancel()
    assert await first == ["q:1"]
    assert await kept == ["q:3"]
    with pytest.raises(asyncio.CancelledError):
        await doomed


async def test_a_large_submission_runs_alone_at_once() -> None:
    recorder = Recorder()
    coalescer: Coalescer[str, int, str] = Coalescer(recorder.flush, max_inflight=1, alone_at=50)
    small = [coalescer.submit("q", [n]) for n in range(5)]
    big = coalescer.submit("q", list(range(100, 160)))
    results = await asyncio.gather(*small, big)
    assert results[-1] == [f"q:{i}" for i in range(100, 160)]
    assert list(range(100, 160)) in recorder.batches
    assert recorder.most_running == 2  # the big one did not wait for the small ones' flush


async def test_a_submission_not_taken_in_time_gives_up_and_never_runs() -> None:
    release = asyncio.Event()
    ran: list[list[int]] = []

    async def flush(key: str, items: list[int]) -> list[int]:
        ran.append(items)
        await release.wait()
        return items

    coalescer: Coalescer[str, int, int] = Coalescer(flush, max_inflight=1, wait_seconds=0.2)
    first = asyncio.create_task(coalescer.submit("q", [1]))
    await asyncio.sleep(0.01)  # the first flush runs (and is stuck)
    with pytest.raises(Unavailable):
        await coalescer.submit("q", [2])
    release.set()
    # The taken one waits past the bound for its flush, and gets its result.
    assert await asyncio.wait_for(first, 5) == [1]
    await asyncio.sleep(0.05)
    assert ran == [[1]]
