"""A history checker for HTTP clients that see faults: every send, delivery and ack is recorded
with the times the client observed (its monotonic clock), and `problems()` judges them.

tests/concurrency/history.py orders events by the event loop and expects every call to succeed.
Here a call may get no answer (503, a connection error, a killed service), and then the client
cannot know whether it took effect. The rules below never guess: each flags only what is
impossible whatever the unanswered calls did.

What is known from the client's side, for a delivery D (one receive that answered messages):
- D's receive took effect (leased its messages) at some moment in [D.requested_at, D.answered_at].
- D holds message m until the first of: its ack commits, or its visibility timeout runs out. The
  ack commits after the client started it, and the timeout, counted by PostgreSQL from a moment
  after the request left, ends after D.requested_at + visibility. So D certainly holds m until
  `held_until(D, m) = min(first ack attempt of m in D started, D.requested_at + visibility)`.
  On a FIFO queue D holds m's group the same way, until every message of the group in D is
  released (the client acks a delivery as one batch).

Outcomes of an ack attempt:
- ok: answered 200 and the entry is not in `failed`. This alone defines "acked".
- refused: answered 200 with the entry in `failed` (receipt_not_found): not acked by this attempt.
- unknown: no answer (503, connection error, timeout). It may or may not have committed; the
  client retries it with the same receipt handle. A retry refused after an unknown attempt is
  still unknown (the first attempt may have been the one that committed).

A send is confirmed when answered 201 (duplicate or not; retries reuse the dedup id, so a retry
of a send that did commit is answered `duplicate` with the same message id). A send without an
answer may have enqueued the message: its delivery is no problem, its absence neither.

The rules (`problems()`), each with its kind. `finished` is the database's own record, read from
message_history at the end (message id -> receive count when it was acked); without it the
checker judges from the client's side alone.
- lost: a confirmed message was never acked (ok). With `finished`: a confirmed message the
  database did not finish, or that it finished with no ack from the clients (neither ok nor
  unknown); a message whose acks were all unknown counts as acked if the database finished it.
- acked-again: a message acked twice (ok), delivered again with a higher receive count than the
  delivery whose ack succeeded, delivered by a receive sent after its ack was answered ok, or
  delivered with a higher receive count than the one the database finished it with.
- in-visibility: two deliveries of one message (standard queue) or of one FIFO group that each
  answered before the other could have released it: D2.answered_at < held_until(D1) and
  D1.answered_at < held_until(D2) (a margin of `SLACK` against clock rounding).
- order (FIFO): a delivery's messages of a group are not consecutive, or it skipped a message:
  some earlier message of the group had no ack attempt started before the delivery answered
  (producers send each group's messages one after the other, each after the previous is
  confirmed, so every earlier message was in the queue ahead of it); or a group's sequence
  numbers do not grow with the producer's counter.
- identity: a message delivered with another message id or sequence number than before (or
  than its send answered), twice with the same receive count, or never sent at all.
- refused: the first ack of a receipt answered (refused) before the receipt could expire.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

Key = tuple[str | None, int]  # (group, counter) as the producer wrote them
Outcome = Literal["ok", "refused", "unknown"]
KINDS = ("lost", "acked-again", "in-visibility", "order", "identity", "refused")
SLACK = 0.01  # seconds: client and PostgreSQL clocks both run in real time; this covers rounding


@dataclass(frozen=True)
class Item:
    """One message as one delivery handed it out."""

    key: Key
    message_id: str
    sequence_number: int
    receive_count: int
    receipt_handle: str

    @classmethod
    def of_json(cls, message: dict[str, Any]) -> Item:
        """From a message of a receive answer (its body carries the producer's counter `n`)."""
        return cls(
            (message["group_id"], int(message["body"]["n"])),
            str(message["message_id"]),
            int(message["sequence_number"]),
            int(message["receive_count"]),
            str(message["receipt_handle"]),
        )


@dataclass(frozen=True)
class AckAttempt:
    started_at: float
    answered_at: float | None
    outcome: Outcome


@dataclass
class Delivery:
    """One receive that answered messages."""

    id: int
    consumer: str
    items: tuple[Item, ...]
    requested_at: float
    answered_at: float
    acks: dict[Key, list[AckAttempt]] = field(default_factory=dict)

    def first_ack_start(self, key: Key) -> float:
        attempts = self.acks.get(key)
        return min(a.started_at for a in attempts) if attempts else math.inf


@dataclass(frozen=True)
class Problem:
    kind: str
    text: str


class Timeline:
    """Sends, deliveries and acks of one queue, with the times the clients observed."""

    def __init__(self, *, fifo: bool, visibility_timeout: float) -> None:
        self.fifo = fifo
        self.visibility = visibility_timeout
        self.attempted: set[Key] = set()
        self.confirmed: dict[Key, str] = {}  # key -> message id its send answered
        self.confirmed_at: dict[Key, float] = {}
        self.send_mismatches: list[Key] = []  # sends of one key answered with different ids
        self.deliveries: list[Delivery] = []
        self._ids = itertools.count()

    # -- recording --------------------------------------------------------------------------

    def send_attempted(self, key: Key) -> None:
        """A send of `key` is about to go out (it may take effect without an answer)."""
        self.attempted.add(key)

    def sent(self, key: Key, message_id: str, at: float) -> None:
        """A send of `key` was answered 201 (new or duplicate) with `message_id`."""
        self.attempted.add(key)
        self.confirmed_at.setdefault(key, at)
        if self.confirmed.setdefault(key, message_id) != message_id:
            self.send_mismatches.append(key)

    def delivered(
        self, consumer: str, messages: Iterable[dict[str, Any]], requested_at: float, answered_at: float
    ) -> Delivery:
        """A receive sent at `requested_at` answered these messages at `answered_at`."""
        delivery = Delivery(
            next(self._ids), consumer, tuple(Item.of_json(m) for m in messages), requested_at, answered_at
        )
        self.deliveries.append(delivery)
        return delivery

    def ack(
        self,
        delivery: Delivery,
        started_at: float,
        answered_at: float | None,
        refused: Iterable[str] = (),
    ) -> None:
        """An ack of the whole delivery: answered at `answered_at` with these receipt handles
        refused, or without an answer (`answered_at` None)."""
        refused_handles = set(refused)
        for item in delivery.items:
            attempts = delivery.acks.setdefault(item.key, [])
            outcome: Outcome
            if answered_at is None:
                outcome = "unknown"
            elif item.receipt_handle in refused_handles:
                outcome = "unknown" if any(a.outcome == "unknown" for a in attempts) else "refused"
            else:
                outcome = "ok"
            attempts.append(AckAttempt(started_at, answered_at, outcome))

    # -- queries ----------------------------------------------------------------------------

    def acked(self) -> dict[Key, list[tuple[Delivery, AckAttempt]]]:
        """Per message, the ack attempts answered ok."""
        found: dict[Key, list[tuple[Delivery, AckAttempt]]] = defaultdict(list)
        for d in self.deliveries:
            for key, attempts in d.acks.items():
                found[key].extend((d, a) for a in attempts if a.outcome == "ok")
        return found

    def maybe_acked(self) -> set[Key]:
        """Messages with an ack attempt whose outcome is unknown."""
        return {
            key
            for d in self.deliveries
            for key, attempts in d.acks.items()
            if any(a.outcome == "unknown" for a in attempts)
        }

    def settled(self) -> bool:
        """Every confirmed message has an ack answered ok, or one whose outcome is unknown."""
        done = set(self.acked()) | self.maybe_acked()
        return all(key in done for key in self.confirmed)

    def stats(self) -> dict[str, int]:
        """Counts for reports."""
        items = [i for d in self.deliveries for i in d.items]
        return {
            "confirmed": len(self.confirmed),
            "attempted": len(self.attempted),
            "deliveries": len(items),
            "redeliveries": sum(1 for i in items if i.receive_count > 1),
            "acked": len(self.acked()),
            "ack_unknown": len(self.maybe_acked()),
        }

    # -- the rules --------------------------------------------------------------------------

    def problems(self, finished: dict[str, int] | None = None) -> list[Problem]:
        """Every broken promise (see the module docstring); `finished` maps the ids of the messages
        the database recorded as acked to their receive count then."""
        found: list[Problem] = []
        acked = self.acked()
        found += self._lost(acked, finished)
        found += self._acked_again(acked)
        if finished is not None:
            found += [
                Problem("acked-again", f"message {key} delivered with receive count {item.receive_count} after the"
                        f" database finished it at {finished[item.message_id]}")
                for key, seen in self._deliveries_by_key().items()
                for _, item in seen
                if item.receive_count > finished.get(item.message_id, item.receive_count)
            ]  # fmt: skip
        found += self._in_visibility()
        if self.fifo:
            found += self._order()
        found += self._identity()
        found += self._refused()
        return found

    def _lost(
        self, acked: dict[Key, list[tuple[Delivery, AckAttempt]]], finished: dict[str, int] | None
    ) -> list[Problem]:
        out = []
        unknown = self.maybe_acked()
        for key, message_id in sorted(self.confirmed.items(), key=str):
            if finished is None:
                why = "" if acked.get(key) else "never acked"
            elif message_id not in finished:
                why = "the database never finished it"
            else:
                why = "" if acked.get(key) or key in unknown else "finished without an ack"
            if why:
                out.append(Problem("lost", f"message {key} ({message_id}): {why}"))
        return out

    def _acked_again(self, acked: dict[Key, list[tuple[Delivery, AckAttempt]]]) -> list[Problem]:
        out = []
        by_key = self._deliveries_by_key()
        for key, oks in acked.items():
            if len(oks) > 1:
                out.append(Problem("acked-again", f"message {key} acked {len(oks)} times"))
            for delivery, attempt in oks:
                count = next(i.receive_count for i in delivery.items if i.key == key)
                assert attempt.answered_at is not None
                for other, item in by_key[key]:
                    if item.receive_count > count:
                        out.append(
                            Problem(
                                "acked-again",
                                f"message {key} delivered with receive count {item.receive_count} after its"
                                f" ack of receive {count} succeeded",
                            )
                        )
                    if other is not delivery and other.requested_at > attempt.answered_at:
                        out.append(Problem("acked-again", f"message {key} delivered by a receive sent after its ack"))
        return out

    def _in_visibility(self) -> list[Problem]:
        units: dict[tuple[str, Any], list[tuple[Delivery, float]]] = defaultdict(list)
        for d in self.deliveries:
            held: dict[tuple[str, Any], float] = {}
            for item in d.items:
                unit = ("group", item.key[0]) if self.fifo else ("message", item.key)
                release = d.first_ack_start(item.key)
                # A unit is released when its last message in this delivery is.
                held[unit] = max(held.get(unit, -math.inf), release)
            for unit, release in held.items():
                units[unit].append((d, min(release, d.requested_at + self.visibility)))
        out = []
        for unit, holders in units.items():
            for (d1, until1), (d2, until2) in itertools.combinations(holders, 2):
                if d2.answered_at < until1 - SLACK and d1.answered_at < until2 - SLACK:
                    shared = {i.key for i in d1.items} & {i.key for i in d2.items}
                    what = f"message {sorted(shared, key=str)[0]}" if shared else f"group {unit[1]}"
                    out.append(
                        Problem(
                            "in-visibility",
                            f"{what} held by two receives at once: delivery {d1.id} ({d1.consumer}, answered"
                            f" {d1.answered_at:.3f}, held until {until1:.3f}) and {d2.id} ({d2.consumer},"
                            f" answered {d2.answered_at:.3f}, held until {until2:.3f})",
                        )
                    )
        return out

    def _order(self) -> list[Problem]:
        out = []
        first_ack: dict[Key, float] = defaultdict(lambda: math.inf)
        for d in self.deliveries:
            for key in d.acks:
                first_ack[key] = min(first_ack[key], d.first_ack_start(key))
        # Per group, prefix maxima of the first ack attempt: the latest moment by which every
        # message before counter n had an ack under way.
        top: dict[str | None, int] = defaultdict(int)
        for key in self.attempted:
            top[key[0]] = max(top[key[0]], key[1] + 1)
        latest: dict[str | None, list[float]] = {}
        for group, size in top.items():
            running, prefix = -math.inf, []
            for n in range(size):
                running = max(running, first_ack[(group, n)])
                prefix.append(running)
            latest[group] = prefix
        seqs: dict[str | None, dict[int, int]] = defaultdict(dict)
        for d in self.deliveries:
            groups: dict[str | None, list[int]] = defaultdict(list)
            for item in d.items:
                groups[item.key[0]].append(item.key[1])
                seqs[item.key[0]][item.key[1]] = item.sequence_number
            for group, ns in groups.items():
                if ns != list(range(ns[0], ns[0] + len(ns))):
                    out.append(Problem("order", f"delivery {d.id} gave group {group} the messages {ns}"))
                prefix = latest.get(group, [])
                if ns[0] > 0 and (ns[0] > len(prefix) or prefix[ns[0] - 1] >= d.answered_at):
                    out.append(
                        Problem(
                            "order",
                            f"delivery {d.id} gave group {group} message {ns[0]} ahead of an unacked earlier one",
                        )
                    )
        for group, by_n in seqs.items():
            ordered = [by_n[n] for n in sorted(by_n)]
            if ordered != sorted(ordered):
                out.append(Problem("order", f"group {group}: sequence numbers do not follow the send order"))
        return out

    def _identity(self) -> list[Problem]:
        out = [Problem("identity", f"sends of message {key} answered different ids") for key in self.send_mismatches]
        for key, seen in self._deliveries_by_key().items():
            if key not in self.attempted:
                out.append(Problem("identity", f"message {key} delivered but never sent"))
            ids = {item.message_id for _, item in seen}
            if key in self.confirmed:
                ids.add(self.confirmed[key])
            if len(ids) > 1 or len({item.sequence_number for _, item in seen}) > 1:
                out.append(Problem("identity", f"message {key} came with several ids or sequence numbers"))
            counts = Counter(item.receive_count for _, item in seen)
            if any(c > 1 for c in counts.values()):
                out.append(Problem("identity", f"message {key} delivered twice with the same receive count"))
        return out

    def _refused(self) -> list[Problem]:
        out = []
        for d in self.deliveries:
            for key, attempts in d.acks.items():
                first = attempts[0]
                if (
                    first.outcome == "refused"
                    and first.answered_at is not None
                    and first.answered_at < d.requested_at + self.visibility - SLACK
                ):
                    out.append(
                        Problem(
                            "refused", f"ack of message {key} (delivery {d.id}) refused inside its visibility timeout"
                        )
                    )
        return out

    def _deliveries_by_key(self) -> dict[Key, list[tuple[Delivery, Item]]]:
        by_key: dict[Key, list[tuple[Delivery, Item]]] = defaultdict(list)
        for d in self.deliveries:
            for item in d.items:
                by_key[item.key].append((d, item))
        return by_key


def tally(problems: Iterable[Problem]) -> dict[str, int]:
    """Problems per kind (every kind present, zeros included)."""
    counts = Counter(p.kind for p in problems)
    return {kind: counts.get(kind, 0) for kind in KINDS}
