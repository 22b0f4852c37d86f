"""The history checker itself: it must notice each kind of broken promise (no database needed)."""

from __future__ import annotations

from tests.concurrency.history import Got, History

KEYS = {("g", 0), ("g", 1), ("g", 2)}


def got(n: int, *, group: str | None = "g", receive_count: int = 1) -> Got:
    return Got(100 + n, group, n, f"r{n}-{receive_count}", receive_count)


def finish(history: History, consumer: int, batch: list[Got]) -> None:
    history.delivered(consumer, batch)
    history.acking(batch)
    history.acked_ok(batch, [])


async def test_a_correct_run_has_no_problems() -> None:
    history = History(KEYS, fifo=True)
    finish(history, 1, [got(0), got(1)])
    finish(history, 2, [got(2)])
    assert history.done and history.problems() == []


async def test_a_group_held_by_two_receives_is_noticed() -> None:
    history = History(KEYS, fifo=True)
    history.delivered(1, [got(0)])
    history.delivered(2, [got(1)])
    assert any("still held unacked" in p for p in history.problems())


async def test_out_of_order_and_gaps_are_noticed() -> None:
    history = History(KEYS, fifo=True)
    finish(history, 1, [got(1)])
    finish(history, 1, [got(0), got(2)])
    problems = history.problems()
    assert any("first unacked message is 0" in p for p in problems)
    assert any("first unacked message is 2" in p for p in problems)


async def test_a_second_delivery_and_a_lost_message_are_noticed() -> None:
    history = History({(None, 0), (None, 1)}, fifo=False)
    finish(history, 1, [got(0, group=None)])
    finish(history, 2, [got(0, group=None)])
    problems = history.problems()
    assert not history.done
    assert any("never acked" in p for p in problems)
    assert any("acked more than once" in p for p in problems)
    assert any("receive counts [1, 1]" in p for p in problems)


async def test_refused_acks_and_wrong_receive_counts_are_noticed() -> None:
    history = History({(None, 0)}, fifo=False)
    batch = [got(0, group=None, receive_count=2)]
    history.delivered(1, batch)
    history.acking(batch)
    history.acked_ok(batch, [batch[0].receipt_handle])
    problems = history.problems(redeliveries=True)
    assert any("was refused" in p for p in problems)
    assert any("receive counts [2]" in p for p in problems)


async def test_a_redelivery_must_restart_at_the_head_of_its_group() -> None:
    history = History(KEYS, fifo=True)
    crashed = [got(0), got(1)]
    history.delivered(1, crashed)
    history.abandoned(crashed)
    finish(history, 2, [got(1, receive_count=2)])
    assert any("first unacked message is 0" in p for p in history.problems(redeliveries=True))
