"""Repository functions that finish or change in-flight messages (queries/finish.sql): ack, nack,
give-back, visibility, and the FIFO group locks and releases around them. Each takes a
connection and never commits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from app.db import prepared
from app.db.rows import Changed, Conn, Group, Receipt
from app.db.statements import NoRow, execute, fetch, statement


class Acked(NamedTuple):
    """A receipt an ack took effect under (its 1-based position in the call), and whether a
    released FIFO group has something due."""

    entry: int
    woke: bool


class Released(NamedTuple):
    """A group whose lease was released, and when it is next servable (None: it is empty)."""

    group_id: str
    available_at: datetime | None


# The hot statements run prepared (app.db.prepared, through app.db.statements).
_ACK = statement("message_ack", Acked, hot=True)
_NACK = statement("message_nack", Changed, hot=True)
_VISIBILITY = statement("message_visibility", Changed, hot=True)
_GROUP_LOCK_FOR_MESSAGES = statement("group_lock_for_messages", Group)
_GIVE_BACK = statement("message_give_back", Changed)
_GROUP_RELEASE = statement("group_release", Released)
_GROUP_EXTEND = statement("group_extend", NoRow)


def _json(values: Sequence[Any]) -> list[prepared.JsonText | None]:
    return [None if value is None else prepared.JsonText(json.dumps(value)) for value in values]


def _receipt_params(receipts: Sequence[Receipt]) -> dict[str, list[Any]]:
    """The receipts as the statements of queries/finish.sql name them: two parallel arrays."""
    return {"ids": [r.sequence_number for r in receipts], "lease_ids": [r.lease_id for r in receipts]}


def _done(rows: list[Changed]) -> list[tuple[Receipt, str | None]]:
    return [(Receipt(r.id, r.lease_id), r.group_id) for r in rows]


async def group_lock_for_messages(conn: Conn, queue_id: int, ids: Sequence[int]) -> list[str]:
    """Lock the groups of these messages, in group order."""
    rows = await fetch(conn, _GROUP_LOCK_FOR_MESSAGES, {"queue_id": queue_id, "ids": list(ids)})
    return [r.group_id for r in rows]


async def message_ack(
    conn: Conn,
    queue_id: int,
    queue_name: str,
    receipts: Sequence[Receipt],
    results: Sequence[Any],
    now: datetime | None,
) -> tuple[list[Receipt], bool]:
    """Ack messages under current receipts into history (one statement); the receipts acked,
    and whether a released FIFO group has something due (wake long-polls after the commit)."""
    rows = await fetch(
        conn,
        _ACK,
        {
            "queue_id": queue_id,
            "queue_name": queue_name,
            **_receipt_params(receipts),
            "results": _json(results),
            "now": now,
        },
    )
    return [receipts[r.entry - 1] for r in rows], any(r.woke for r in rows)


async def message_nack(
    conn: Conn,
    queue_id: int,
    receipts: Sequence[Receipt],
    delays: Sequence[int],
    errors: Sequence[Any],
    now: datetime | None,
) -> list[tuple[Receipt, str | None]]:
    """Return messages to ready after a delay; (receipt, group) of those returned."""
    rows = await fetch(
        conn,
        _NACK,
        {
            "queue_id": queue_id,
            **_receipt_params(receipts),
            "delays": list(delays),
            "errors": _json(errors),
            "now": now,
        },
    )
    return _done(rows)


async def message_give_back(
    conn: Conn, queue_id: int, receipts: Sequence[Receipt], now: datetime | None
) -> list[tuple[Receipt, str | None]]:
    """Undo the receive that handed out these receipts (its client never had the answer):
    ready now, receive count back down; (receipt, group) of those given back."""
    rows = await fetch(
        conn,
        _GIVE_BACK,
        {
            "queue_id": queue_id,
            **_receipt_params(receipts),
            "now": now,
        },
    )
    return _done(rows)


async def message_visibility(
    conn: Conn,
    queue_id: int,
    receipts: Sequence[Receipt],
    timeouts: Sequence[int],
    now: datetime | None,
) -> list[tuple[Receipt, str | None]]:
    """Change the visibility timeout of in-flight messages; (receipt, group) of those changed."""
    rows = await fetch(
        conn,
        _VISIBILITY,
        {
            "queue_id": queue_id,
            **_receipt_params(receipts),
            "timeouts": list(timeouts),
            "now": now,
        },
    )
    return _done(rows)


async def group_release(
    conn: Conn, queue_id: int, group_ids: Sequence[str], *, served: bool, now: datetime | None
) -> list[Released]:
    """Release the leases of locked groups with nothing left in flight; (group, available_at).
    `served`: the group was just served, so it goes to the back of the rotation."""
    params = {"queue_id": queue_id, "group_ids": sorted(set(group_ids)), "served": served, "now": now}
    return await fetch(conn, _GROUP_RELEASE, params)


async def group_extend(conn: Conn, queue_id: int, group_ids: Sequence[str]) -> None:
    """Recompute the lease expiry of locked groups after visibility changes."""
    await execute(conn, _GROUP_EXTEND, {"queue_id": queue_id, "group_ids": sorted(set(group_ids))})
