"""A factory of message history rows, written straight into message_history (as acks do)."""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

BASE = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


@dataclass
class Finished:
    """One finished message; times are seconds after BASE / after the previous step."""

    queue: str = "jobs"
    queue_id: int = 1
    group_id: str | None = None
    outcome: str = "acked"
    sent: float = 0.0
    wait: float | None = 1.0  # first receive - send (None: never received)
    redelivery: float = 0.0  # last receive - first receive
    processing: float = 2.0  # finish - last receive
    receive_count: int = 1
    result: Any = None
    error: Any = None
    message_id: uuid.UUID = field(default_factory=uuid.uuid4)

    def row(self, sequence_number: int) -> tuple[Any, ...]:
        sent = BASE + timedelta(seconds=self.sent)
        first = last = None
        finished = sent + timedelta(seconds=self.processing)
        if self.wait is not None:
            first = sent + timedelta(seconds=self.wait)
            last = first + timedelta(seconds=self.redelivery)
            finished = last + timedelta(seconds=self.processing)
        return (
            self.queue_id,
            self.queue,
            self.message_id,
            sequence_number,
            self.group_id,
            None,
            sent,
            first,
            last,
            finished,
            self.receive_count if self.wait is not None else 0,
            self.outcome,
            None if self.result is None else Jsonb(self.result),
            None if self.error is None else Jsonb(self.error),
        )


def add_history(url: str, messages: list[Finished]) -> list[int]:
    """Insert finished messages into message_history; their history ids."""
    with psycopg.connect(url) as conn:
        cur = conn.cursor()
        ids = []
        for number, message in enumerate(messages, start=1):
            cur.execute(
                "INSERT INTO message_history (queue_id, queue_name, message_id, sequence_number, group_id, dedup_id,"
                " sent_at, first_received_at, last_received_at, finished_at, receive_count, outcome, result, error)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                message.row(number),
            )
            row = cur.fetchone()
            assert row is not None
            ids.append(int(row[0]))
    return ids


def history_count(url: str) -> int:
    """Rows in message_history."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM message_history").fetchone()
    assert row is not None
    return int(row[0])


def spread_history(span: float, count: int = 1200, seed: int = 7) -> list[Finished]:
    """`count` messages finishing over `span` seconds after BASE, busier in some stretches than
    others: a quick queue (sub-second waits), a slower one (waits of seconds to a minute) and the
    quick one's dead-letter queue, whose few messages waited hours (they keep their first send)."""
    rng = random.Random(seed)
    messages = []
    for k in range(count):
        # finishing times bunched by a sine: throughput that rises and falls three times over the span
        u = k / count
        at = span * (u - 0.6 * math.sin(6 * math.pi * u) / (6 * math.pi))
        kind = k % 20
        if kind == 19:
            wait, processing, queue, queue_id = 3600.0 * rng.uniform(2, 30), 0.2, "orders-dlq", 3
        elif kind >= 12:
            wait, processing, queue, queue_id = rng.uniform(5, 60), rng.uniform(1, 10), "mail", 2
        else:
            wait, processing, queue, queue_id = rng.uniform(0.05, 2), rng.uniform(0.02, 0.5), "orders", 1
        messages.append(
            Finished(queue=queue, queue_id=queue_id, sent=at - wait - processing, wait=wait, processing=processing)
        )
    return messages
