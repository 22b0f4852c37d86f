"""Repository functions that lease messages to receivers (queries/receive.sql): standard and
FIFO receives, the next due time a long poll sleeps on, receive attempts and consumer ids.
Each takes a connection and never commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from app.db.rows import Conn, Delivered, Receipt
from app.db.statements import NoRow, execute, fetch, fetch_one, statement


class FifoDelivered(NamedTuple):
    """Delivered, from a FIFO receive: `ord` is the group's pick order."""

    ord: int
    dead: bool
    id: int
    message_id: UUID
    lease_id: UUID
    body: Any
    group_id: str | None
    dedup_id: str | None
    receive_count: int
    sent_at: datetime
    first_received_at: datetime
    attributes: dict[str, str]
    attribute_types: dict[str, dict[str, str]] | None
    sender_id: str | None
    trace_header: str | None
    source_queue_id: int | None


class SlotDelivered(NamedTuple):
    """FifoDelivered, from one of several receives served by one statement (`slot`, 1-based)."""

    slot: int
    ord: int
    dead: bool
    id: int
    message_id: UUID
    lease_id: UUID
    body: Any
    group_id: str | None
    dedup_id: str | None
    receive_count: int
    sent_at: datetime
    first_received_at: datetime
    attributes: dict[str, str]
    attribute_types: dict[str, dict[str, str]] | None
    sender_id: str | None
    trace_header: str | None
    source_queue_id: int | None


# What a receive hands out, whichever statement leased it.
Delivery = Delivered | FifoDelivered | SlotDelivered


class Due(NamedTuple):
    """Seconds until something is receivable (None: nothing queued)."""

    seconds: float | None


class Attempt(NamedTuple):
    """The receipts a receive attempt handed out."""

    sequence_numbers: list[int]
    lease_ids: list[UUID]


class Held(NamedTuple):
    """A receipt a consumer holds."""

    id: int
    lease_id: UUID


# The hot statements run prepared (app.db.prepared, through app.db.statements).
_RECEIVE_STANDARD = statement("message_receive_standard", Delivered, hot=True)
_FIFO_RECEIVE_MANY = statement("fifo_receive_many", SlotDelivered, hot=True)
_NEXT_DUE = {
    True: statement("next_due_fifo", Due, hot=True),
    False: statement("next_due_standard", Due, hot=True),
}
_FIFO_RECEIVE = statement("fifo_receive", FifoDelivered)
_ATTEMPT_GET = statement("attempt_get", Attempt)
_ATTEMPT_REPEAT = statement("attempt_repeat", Delivered)
_ATTEMPT_RECORD = statement("attempt_record", NoRow)
_CONSUMER_RECORD = statement("consumer_record", NoRow)
_CONSUMER_HELD = statement("consumer_held", Held)


def _receive_params(
    queue_id: int, limit: int, visibility_timeout: int, max_receive_count: int | None, now: datetime | None
) -> dict[str, Any]:
    """The parameters of a single receive, standard or FIFO: the two statements name them alike."""
    return {
        "queue_id": queue_id,
        "limit": limit,
        "visibility_timeout": visibility_timeout,
        "max_receive_count": max_receive_count,
        "now": now,
    }


async def message_receive_standard(
    conn: Conn,
    queue_id: int,
    limit: int,
    visibility_timeout: int,
    max_receive_count: int | None,
    now: datetime | None,
) -> list[Delivered]:
    """Deliver due messages of a standard queue; rows with dead=True are to be dead-lettered."""
    return await fetch(
        conn,
        _RECEIVE_STANDARD,
        _receive_params(queue_id, limit, visibility_timeout, max_receive_count, now),
    )


async def fifo_receive(
    conn: Conn,
    queue_id: int,
    limit: int,
    visibility_timeout: int,
    max_receive_count: int | None,
    now: datetime | None,
) -> list[FifoDelivered]:
    """Deliver from a FIFO queue in one round trip; rows with dead=True are to be dead-lettered."""
    return await fetch(
        conn,
        _FIFO_RECEIVE,
        _receive_params(queue_id, limit, visibility_timeout, max_receive_count, now),
    )


async def fifo_receive_many(
    conn: Conn, queue_id: int, limits: Sequence[int], visibility_timeout: int, now: datetime | None
) -> list[list[SlotDelivered]]:
    """Several receives of a FIFO queue without a dead-letter queue, in one statement; per
    receiver (in order) its rows, each group's messages in order, groups in pick order."""
    rows = await fetch(
        conn,
        _FIFO_RECEIVE_MANY,
        {"queue_id": queue_id, "limits": list(limits), "visibility_timeout": visibility_timeout, "now": now},
    )
    taken: list[list[SlotDelivered]] = [[] for _ in limits]
    for row in rows:
        taken[row.slot - 1].append(row)
    for batch in taken:
        batch.sort(key=lambda r: (r.ord, r.id))
    return taken


async def next_due(conn: Conn, queue_id: int, fifo: bool) -> float | None:
    """Seconds until something in this queue next becomes receivable (None: nothing queued)."""
    row = await fetch_one(conn, _NEXT_DUE[fifo], {"queue_id": queue_id})
    return row.seconds if row else None


async def attempt_get(conn: Conn, queue_id: int, attempt_id: str, now: datetime | None) -> Attempt | None:
    """The receipts an earlier receive with this attempt id handed out (None: no such attempt,
    or its window has ended)."""
    return await fetch_one(conn, _ATTEMPT_GET, {"queue_id": queue_id, "attempt_id": attempt_id, "now": now})


async def attempt_repeat(
    conn: Conn, queue_id: int, attempt: Attempt, visibility_timeout: int, now: datetime | None
) -> list[Delivered]:
    """The attempt's messages still in flight under its receipts, hidden again for
    `visibility_timeout` (FIFO: their groups locked first by the caller)."""
    return await fetch(
        conn,
        _ATTEMPT_REPEAT,
        {
            "queue_id": queue_id,
            "ids": attempt.sequence_numbers,
            "lease_ids": attempt.lease_ids,
            "visibility_timeout": visibility_timeout,
            "now": now,
        },
    )


async def attempt_record(
    conn: Conn,
    queue_id: int,
    attempt_id: str,
    delivered: Sequence[Delivery],
    window: int,
    now: datetime | None,
) -> None:
    """Remember the receipts a receive attempt handed out."""
    await execute(
        conn,
        _ATTEMPT_RECORD,
        {
            "queue_id": queue_id,
            "attempt_id": attempt_id,
            "ids": [r.id for r in delivered],
            "lease_ids": [r.lease_id for r in delivered],
            "window": window,
            "now": now,
        },
    )


async def consumer_record(conn: Conn, queue_id: int, consumer_id: str, delivered: Sequence[Delivery]) -> None:
    """Remember that `consumer_id` received these messages (under their new leases)."""
    await execute(
        conn,
        _CONSUMER_RECORD,
        {
            "queue_id": queue_id,
            "consumer_id": consumer_id,
            "ids": [r.id for r in delivered],
            "lease_ids": [r.lease_id for r in delivered],
        },
    )


async def consumer_held(conn: Conn, queue_id: int, consumer_id: str) -> list[Receipt]:
    """Receipts of the in-flight messages `consumer_id` holds now."""
    rows = await fetch(conn, _CONSUMER_HELD, {"queue_id": queue_id, "consumer_id": consumer_id})
    return [Receipt(r.id, r.lease_id) for r in rows]
