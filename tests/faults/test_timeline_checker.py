"""The fault tests' history checker itself (tests/faults/timeline.py): it flags each kind of broken
promise, and it does not flag what unanswered calls make legitimate (a message back after an ack
without an answer, a redelivery after the visibility timeout, overlapping long polls). No
database needed: the timelines are written by hand, times in seconds."""

from __future__ import annotations

from typing import Any

from tests.faults.timeline import Delivery, Timeline, tally

VT = 2.0


def message(n: int, *, group: str | None = "g", count: int = 1, seq: int | None = None) -> dict[str, Any]:
    """A message of a receive answer."""
    return {
        "group_id": group,
        "body": {"n": n},
        "message_id": f"id-{group}-{n}",
        "sequence_number": 100 + n if seq is None else seq,
        "receive_count": count,
        "receipt_handle": f"r-{group}-{n}-{count}",
    }


def timeline(*, fifo: bool = True, sent: int = 3, group: str | None = "g") -> Timeline:
    history = Timeline(fifo=fifo, visibility_timeout=VT)
    for n in range(sent):
        history.sent((group, n), f"id-{group}-{n}", at=0.0)
    return history


def receive(history: Timeline, at: float, *messages: dict[str, Any], took: float = 0.01) -> Delivery:
    return history.delivered("c", messages, requested_at=at, answered_at=at + took)


def ack(history: Timeline, delivery: Delivery, at: float, *, refused: tuple[str, ...] = (), lost: bool = False) -> None:
    history.ack(delivery, started_at=at, answered_at=None if lost else at + 0.01, refused=refused)


def kinds(history: Timeline, finished: dict[str, int] | None = None) -> dict[str, int]:
    return {kind: count for kind, count in tally(history.problems(finished)).items() if count}


def test_a_run_with_faults_that_broke_no_promise_is_clean() -> None:
    history = timeline()
    history.sent(("g", 0), "id-g-0", at=0.5)  # a retried send answered `duplicate`, same id
    first = receive(history, 1.0, message(0), message(1))
    ack(history, first, 1.1, lost=True)  # no answer: maybe acked, maybe not
    ack(history, first, 1.3, refused=("r-g-0-1", "r-g-1-1"))  # the retry: refused, still unknown
    # It had not committed: both come back after the visibility timeout, in order.
    again = receive(history, 3.2, message(0, count=2), message(1, count=2))
    ack(history, again, 3.3)
    # A long poll sent before the ack above, answered after it started: no overlap.
    last = history.delivered("d", [message(2)], requested_at=2.0, answered_at=3.35)
    ack(history, last, 3.4)
    assert history.settled()
    assert history.problems() == []


def test_lost_messages_are_noticed_and_unknown_acks_are_settled_by_the_database() -> None:
    history = timeline(sent=2)
    d = receive(history, 1.0, message(0), message(1))
    ack(history, d, 1.1, lost=True)
    assert kinds(history) == {"lost": 2}  # without the oracle an unknown ack proves nothing
    assert kinds(history, finished={"id-g-0": 1, "id-g-1": 1}) == {}
    assert kinds(history, finished={"id-g-0": 1}) == {"lost": 1}
    never = timeline(sent=1)
    assert not never.settled()
    assert kinds(never, finished={}) == {"lost": 1}
    # Finished by the database without any ack from a client: lost to the clients all the same.
    assert kinds(never, finished={"id-g-0": 0}) == {"lost": 1}
    # Acked (ok), yet the database has no record of it.
    acked = timeline(sent=1)
    ack(acked, receive(acked, 1.0, message(0)), 1.1)
    assert kinds(acked) == {}
    assert kinds(acked, finished={}) == {"lost": 1}


def test_a_message_back_after_its_ack_succeeded_is_noticed() -> None:
    history = timeline(fifo=False, sent=1, group=None)
    d = receive(history, 1.0, message(0, group=None))
    ack(history, d, 1.1)
    # Back with a higher receive count, and by a receive sent after the ack answered.
    back = receive(history, 5.0, message(0, group=None, count=2))
    ack(history, back, 5.1)
    problems = [p.text for p in history.problems() if p.kind == "acked-again"]
    assert any("acked 2 times" in p for p in problems)
    # An ack with no answer that did commit (the database says so), yet the message came back.
    unknown = timeline(fifo=False, sent=1, group=None)
    ack(unknown, receive(unknown, 1.0, message(0, group=None)), 1.1, lost=True)
    ack(unknown, receive(unknown, 3.5, message(0, group=None, count=2)), 3.6, lost=True)
    assert kinds(unknown, finished={"id-None-0": 1}) == {"acked-again": 1}
    assert kinds(unknown, finished={"id-None-0": 2}) == {}
    assert any("receive count 2 after its ack of receive 1" in p for p in problems)
    assert any("sent after its ack" in p for p in problems)


def test_a_message_held_twice_inside_its_visibility_timeout_is_noticed() -> None:
    history = timeline(fifo=False, sent=1, group=None)
    receive(history, 1.0, message(0, group=None))
    receive(history, 2.5, message(0, group=None, count=2))  # before 1.0 + VT
    assert kinds(history) == {"in-visibility": 1, "lost": 1}
    fine = timeline(fifo=False, sent=1, group=None)
    receive(fine, 1.0, message(0, group=None))
    d = receive(fine, 3.1, message(0, group=None, count=2))  # after the timeout: legitimate
    ack(fine, d, 3.2)
    assert fine.problems() == []


def test_a_fifo_group_in_flight_twice_is_noticed() -> None:
    history = timeline(sent=2)
    first = receive(history, 1.0, message(0))
    second = receive(history, 1.5, message(1))  # its group is still held by `first`
    ack(history, first, 1.6)
    ack(history, second, 1.7)
    assert kinds(history) == {"in-visibility": 1, "order": 1}
    # Two parallel long polls: the second answered only after the first's ack started: fine.
    fine = timeline(sent=2)
    one = fine.delivered("a", [message(0)], requested_at=1.0, answered_at=1.2)
    two = fine.delivered("b", [message(1)], requested_at=1.0, answered_at=1.4)
    ack(fine, one, 1.3)
    ack(fine, two, 1.5)
    assert fine.problems() == []


def test_out_of_order_deliveries_are_noticed() -> None:
    gap = timeline()
    d = receive(gap, 1.0, message(0), message(2))
    ack(gap, d, 1.1)
    assert any("messages [0, 2]" in p.text for p in gap.problems())

    skipped = timeline(sent=2)
    d = receive(skipped, 1.0, message(1))  # message 0 is still in the queue
    ack(skipped, d, 1.1)
    assert kinds(skipped) == {"order": 1, "lost": 1}

    swapped = timeline(sent=2)
    d = receive(swapped, 1.0, message(0, seq=7), message(1, seq=5))
    ack(swapped, d, 1.1)
    assert any("sequence numbers" in p.text for p in swapped.problems())


def test_identity_problems_are_noticed() -> None:
    history = timeline(sent=1)
    history.sent(("g", 0), "another id", at=0.5)
    d = receive(history, 1.0, message(0), message(7))  # 7 was never sent
    ack(history, d, 1.1)
    texts = [p.text for p in history.problems() if p.kind == "identity"]
    assert any("answered different ids" in t for t in texts)
    assert any("never sent" in t for t in texts)
    twice = timeline(fifo=False, sent=1, group=None)
    receive(twice, 1.0, message(0, group=None))
    d = receive(twice, 4.0, message(0, group=None))  # the same receive count again
    ack(twice, d, 4.1)
    assert kinds(twice) == {"identity": 1}


def test_an_ack_refused_inside_the_visibility_timeout_is_noticed() -> None:
    history = timeline(fifo=False, sent=1, group=None)
    d = receive(history, 1.0, message(0, group=None))
    ack(history, d, 1.1, refused=("r-None-0-1",))
    assert kinds(history) == {"refused": 1, "lost": 1}
    late = timeline(fifo=False, sent=1, group=None)
    d = receive(late, 1.0, message(0, group=None))
    ack(late, d, 3.5, refused=("r-None-0-1",))  # after the timeout: a stale receipt, no bug
    d = receive(late, 3.6, message(0, group=None, count=2))
    ack(late, d, 3.7)
    assert late.problems() == []
