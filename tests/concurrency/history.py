"""A history checker for concurrent consumers: every delivery and every ack is recorded, in the
order the (single-threaded) event loop observed it, and checked against the queue's promises.

Why the order is sound: a consumer records `acking` *before* it sends the ack, and `delivered`
*after* the receive returned. A FIFO group's next receive can only commit after the previous
ack committed, so in a correct queue the ack of a group's batch is always recorded before the
group's next delivery. Recording the ack after it returned would make the check flaky (the next
receive may return first); recording it before keeps the check exact.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.domain import ReceivedMessage


@dataclass(frozen=True)
class Got:
    """One delivered message, whichever interface returned it."""

    sequence_number: int
    group_id: str | None
    n: int
    receipt_handle: str
    receive_count: int

    @property
    def key(self) -> tuple[str | None, int]:
        """Which message this is: (group, counter) as the producer wrote it into the body."""
        return (self.group_id, self.n)

    @classmethod
    def of(cls, message: ReceivedMessage) -> Got:
        return cls(
            message.sequence_number,
            message.group_id,
            int(message.body["n"]),
            message.receipt_handle,
            message.receive_count,
        )

    @classmethod
    def of_json(cls, message: dict[str, Any]) -> Got:
        return cls(
            int(message["sequence_number"]),
            message["group_id"],
            int(message["body"]["n"]),
            str(message["receipt_handle"]),
            int(message["receive_count"]),
        )


@dataclass(frozen=True)
class Delivery:
    """One message as one receive handed it to one consumer."""

    event: int
    consumer: int
    got: Got
    at: float  # event-loop time the receive returned


class History:
    """Deliveries and acks of one test run, checked as they happen and at the end.

    `expected` is the set of message keys that were sent; `must_finish` (default: all of
    them) those the run must ack before it is done. `fifo` turns on the group checks: no
    group is handed to a second receive while a delivery of it is not yet being acked, and
    each delivery of a group starts at the group's first unacked message and continues
    without gaps. The last check needs body counters that number each group's messages
    0, 1, 2, ...; `counters_per_group=False` turns it off for groups several producers share.
    """

    def __init__(
        self,
        expected: Iterable[tuple[str | None, int]],
        *,
        fifo: bool,
        must_finish: Iterable[tuple[str | None, int]] | None = None,
        counters_per_group: bool = True,
    ) -> None:
        self.expected = set(expected)
        self.must_finish = self.expected if must_finish is None else set(must_finish)
        assert self.must_finish <= self.expected
        self.fifo = fifo
        self.counters_per_group = counters_per_group
        self._clock = itertools.count()
        self.deliveries: list[Delivery] = []
        self.acked: dict[tuple[str | None, int], int] = defaultdict(int)  # key -> acks that succeeded
        self.ack_failures: list[str] = []
        self.violations: list[str] = []
        self._holding: dict[str | None, set[int]] = defaultdict(set)  # group -> n delivered, not acking
        self._next_n: dict[str | None, int] = defaultdict(int)  # group -> first n not yet acked
        self._finished = 0

    @property
    def done(self) -> bool:
        """Every expected message has been acked."""
        return self._finished >= len(self.must_finish)

    @property
    def broken(self) -> bool:
        """A promise was already broken during the run (no point running on)."""
        return bool(self.violations or self.ack_failures)

    @property
    def remaining(self) -> int:
        """Expected messages not yet acked."""
        return len(self.must_finish) - self._finished

    def delivered(self, consumer: int, batch: list[Got]) -> None:
        """A receive returned `batch` to `consumer`."""
        event = next(self._clock)
        at = asyncio.get_running_loop().time()
        by_group: dict[str | None, list[int]] = defaultdict(list)
        for got in batch:
            self.deliveries.append(Delivery(event, consumer, got, at))
            by_group[got.group_id].append(got.n)
        if not self.fifo:
            return
        for group, ns in by_group.items():
            if self._holding[group]:
                self.violations.append(
                    f"event {event}: group {group} delivered to consumer {consumer} ({ns}) while"
                    f" {sorted(self._holding[group])} of it were still held unacked"
                )
            start = self._next_n[group]
            if self.counters_per_group and ns != list(range(start, start + len(ns))):
                self.violations.append(
                    f"event {event}: group {group} delivered {ns} to consumer {consumer};"
                    f" its first unacked message is {start}"
                )
            self._holding[group].update(ns)

    def acking(self, batch: list[Got]) -> None:
        """A consumer is about to ack `batch` (recorded before the request is sent)."""
        next(self._clock)
        for got in batch:
            self._holding[got.group_id].discard(got.n)
            if self.fifo:
                self._next_n[got.group_id] = max(self._next_n[got.group_id], got.n + 1)

    def abandoned(self, batch: list[Got]) -> None:
        """A consumer crashed holding `batch`: it will come back once its visibility runs out."""
        next(self._clock)
        for got in batch:
            self._holding[got.group_id].discard(got.n)

    def acked_ok(self, batch: list[Got], failed: list[str]) -> None:
        """The ack of `batch` returned; `failed` names the receipt handles it refused."""
        refused = set(failed)
        for got in batch:
            if got.receipt_handle in refused:
                self.ack_failures.append(f"ack of {got.key} (receive {got.receive_count}) was refused")
                continue
            self.acked[got.key] += 1
            if got.key in self.must_finish and self.acked[got.key] == 1:
                self._finished += 1

    # -- final checks ------------------------------------------------------------------------

    def problems(self, *, redeliveries: bool = False) -> list[str]:
        """Everything that broke a promise; empty when the run was correct.

        Without `redeliveries`, each message must have been delivered exactly once (receive
        count 1); with it, a message may come back, but its receive counts must go 1, 2, ...
        """
        found = list(self.violations) + list(self.ack_failures)
        missing = self.must_finish - {k for k, count in self.acked.items() if count > 0}
        if missing:
            found.append(f"{len(missing)} messages never acked, e.g. {sorted(missing, key=str)[:5]}")
        twice = {k: c for k, c in self.acked.items() if c > 1}
        if twice:
            found.append(f"{len(twice)} messages acked more than once, e.g. {list(twice.items())[:5]}")
        unknown = set(self.acked) - self.expected
        if unknown:
            found.append(f"acked messages nobody sent: {sorted(unknown, key=str)[:5]}")
        counts: dict[tuple[str | None, int], list[int]] = defaultdict(list)
        seqs: dict[tuple[str | None, int], set[int]] = defaultdict(set)
        for d in self.deliveries:
            counts[d.got.key].append(d.got.receive_count)
            seqs[d.got.key].add(d.got.sequence_number)
        for key, seen in counts.items():
            want = list(range(1, len(seen) + 1)) if redeliveries else [1]
            if seen != want:
                found.append(f"message {key} delivered with receive counts {seen}, expected {want}")
            if len(seqs[key]) != 1:
                found.append(f"message {key} came with several sequence numbers {sorted(seqs[key])}")
        return found

    def group_order(self) -> dict[str | None, list[int]]:
        """Per group, the counters of its deliveries in delivery order."""
        order: dict[str | None, list[int]] = defaultdict(list)
        for d in self.deliveries:
            order[d.got.group_id].append(d.got.n)
        return order
