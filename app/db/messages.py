"""Repository functions for messages and FIFO groups. Each takes a connection and never commits;
the service decides what runs in one transaction."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any
from uuid import UUID

from psycopg import errors, sql
from psycopg.abc import Buffer

from app.db import prepared
from app.db.queues import QUEUE_LOCK_CLASS
from app.db.rows import Conn
from app.db.sql import QUERIES


@dataclass(slots=True)
class NewMessage:
    """A message ready for `message_insert`: validated, with its dedup key resolved."""

    message_id: str  # canonical UUID text (app.ids)
    body_json: bytes  # canonical JSON text of the body (validation already encoded it)
    group_id: str | None
    dedup_id: str | None
    scope_key: str
    attributes: dict[str, str]
    delay_seconds: int


# A backfill task's rows for the staging table come as COPY text, one line a row: position in the
# task, message id, group id, dedup id, dedup scope key, body (canonical JSON text), attributes
# (JSON text), delay, and whether an earlier row of the task has the same dedup key (a repeat is
# not inserted).


@dataclass(frozen=True)
class Receipt:
    """A decoded receipt handle: which message, under which lease."""

    sequence_number: int
    lease_id: UUID


async def _rows(conn: Conn, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cur = await conn.execute(QUERIES[name].sql, params)
    return await cur.fetchall() if cur.description else []


# -- send -------------------------------------------------------------------------------------


async def group_lock_for_send(conn: Conn, queue_id: int, delays: dict[str, int], now: datetime | None) -> None:
    """Lock (creating) the groups a send writes to; `delays` maps group -> first message's delay."""
    groups = sorted(delays)
    await prepared.rows(
        conn,
        _GROUP_LOCK_FOR_SEND,
        {"queue_id": queue_id, "group_ids": groups, "delays": [delays[g] for g in groups], "now": now},
    )


# A backfill's: first as plain claims of new keys, then, if a key was there, as a send claims
# (variants of message_insert, composed by app.db.sql).
_INSERT_STAGED_NEW_KEYS = QUERIES["message_insert_staged_new_keys"].sql
_INSERT_STAGED = QUERIES["message_insert_staged"].sql
_STAGED_GROUPS = QUERIES["message_staged_groups"].sql


# The hot statements, run through app.db.prepared (prepared once per pooled connection).
_SEND = prepared.statement("message_send", QUERIES["message_send"].text)
_SEND_FENCED = prepared.statement("message_send_fenced", QUERIES["message_send_fenced"].text)
_RECEIVE_STANDARD = prepared.statement("message_receive_standard", QUERIES["message_receive_standard"].text)
_FIFO_RECEIVE_MANY = prepared.statement("fifo_receive_many", QUERIES["fifo_receive_many"].text)
_ACK = prepared.statement("message_ack", QUERIES["message_ack"].text)
_NACK = prepared.statement("message_nack", QUERIES["message_nack"].text)
_VISIBILITY = prepared.statement("message_visibility", QUERIES["message_visibility"].text)
_GROUP_LOCK_FOR_SEND = prepared.statement("group_lock_for_send", QUERIES["group_lock_for_send"].text)
_NEXT_DUE = {
    fifo: prepared.statement(name, QUERIES[name].text)
    for fifo, name in ((True, "next_due_fifo"), (False, "next_due_standard"))
}


def _entries_document(entries: Sequence[NewMessage]) -> bytes:
    """The batch as one JSON array for `message_insert` (json_to_recordset, message_entry_json).

    One text parameter instead of eight arrays: the bodies are spliced in as the canonical JSON
    validation produced, so nothing is encoded twice, and psycopg's per-element array dumping
    (the largest cost of a 1,000-message send when measured) is skipped. An entry carries only
    what it has: message_entry_json fills in the rest and takes the order from the array."""
    text = encode_basestring
    parts = []
    for e in entries:
        head = f'{{"message_id":"{e.message_id}"'
        if e.group_id is not None:
            head += f',"group_id":{text(e.group_id)}'
        if e.dedup_id is not None:
            head += f',"dedup_id":{text(e.dedup_id)},"scope_key":{text(e.scope_key)}'
        if e.delay_seconds:
            head += f',"delay":{e.delay_seconds}'
        if e.attributes:
            head += f',"attributes":{_ATTRIBUTES(e.attributes)}'
        parts.append(head.encode() + b',"body":' + e.body_json + b"}")
    return b"[" + b",".join(parts) + b"]"


_ATTRIBUTES = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


async def message_enqueue(
    conn: Conn,
    queue_id: int,
    fifo: bool,
    entries: Sequence[NewMessage],
    dedup_window: int,
    now: datetime | None,
    *,
    fenced: bool = False,
) -> list[tuple[int, bool]]:
    """The one way messages enter a queue, for API sends and (message_enqueue_staged) pipeline
    backfills alike: lock the FIFO groups the entries write to (sorted, before sequence numbers
    are drawn), then insert them claiming their dedup keys. Per entry, in entry order: its
    sequence number and whether it was inserted (False: its dedup key was already claimed
    inside the window).

    `fenced` (a standard queue's send): the statement takes the queue's send fence itself
    (message_entry_json_fenced), so it needs no transaction around it; an empty answer then
    means the queue is gone (deleted, or replaced under the same name)."""
    if fifo:
        delays: dict[str, int] = {}
        for msg in entries:
            assert msg.group_id is not None
            delays[msg.group_id] = min(delays.get(msg.group_id, msg.delay_seconds), msg.delay_seconds)
        await group_lock_for_send(conn, queue_id, delays, now)
    if fenced and fifo:
        raise ValueError("a FIFO send locks its groups inside the fence: it runs in a transaction")
    params = {
        "lock_class": QUEUE_LOCK_CLASS,
        "queue_id": queue_id,
        "entries": _entries_document(entries),
        "dedup_window": dedup_window,
        "now": now,
    }
    # Columns ord, id, inserted (message_insert's answer), a row per entry.
    rows = await prepared.tuples(conn, _SEND_FENCED if fenced else _SEND, params)
    return [(row[1], row[2]) for row in rows]


async def message_enqueue_staged(conn: Conn, queue_id: int, fifo: bool, dedup_window: int, now: datetime | None) -> int:
    """message_enqueue for a backfill task: the entries are the rows this transaction staged
    (message_stage); how many were inserted (the others are duplicates by dedup id).

    The claims of dedup keys are first a plain insert (message_insert without its take_over): a
    backfill's keys are new as a rule, and a speculative insert costs
    far more. When one of them is there after all (sent or backfilled before, or by a concurrent
    transaction that committed first), that insert fails on message_dedup_pkey and leaves nothing
    (a savepoint); the statement then runs again as a send's, with the groups still locked. The
    first try's sequence numbers are lost (numbers have gaps anyway), so either way the messages
    and claims are the ones a send of these entries would make."""
    if fifo:
        rows = await _rows_of(conn, _STAGED_GROUPS, {})
        if rows:
            await group_lock_for_send(conn, queue_id, {r["group_id"]: r["delay"] for r in rows}, now)
    params: dict[str, Any] = {"queue_id": queue_id, "dedup_window": dedup_window, "now": now}
    try:
        async with conn.transaction():
            rows = await _rows_of(conn, _INSERT_STAGED_NEW_KEYS, params)
    except errors.UniqueViolation as exc:
        if exc.diag.constraint_name != "message_dedup_pkey":
            raise
        rows = await _rows_of(conn, _INSERT_STAGED, params)
    return int(rows[0]["inserted"])


async def _rows_of(conn: Conn, query: sql.SQL, params: dict[str, Any]) -> list[dict[str, Any]]:
    cur = await conn.execute(query, params)
    return await cur.fetchall() if cur.description else []


_STAGE_COPY = QUERIES["message_stage_copy"].sql


async def message_stage(conn: Conn, text: Iterable[Buffer | str]) -> None:
    """Create this transaction's staging table and COPY the rows in `text` (COPY text format,
    whole lines per chunk) into it."""
    await conn.execute(QUERIES["message_stage_create"].sql)
    async with conn.cursor().copy(_STAGE_COPY) as copy:
        for chunk in text:
            await copy.write(chunk)


async def dedup_lookup(
    conn: Conn, queue_id: int, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], tuple[UUID, int]]:
    """(scope key, dedup id) -> (message id, sequence number) of the first claim."""
    rows = await _rows(
        conn,
        "dedup_lookup",
        {
            "queue_id": queue_id,
            "scope_keys": [k[0] for k in keys],
            "dedup_ids": [k[1] for k in keys],
        },
    )
    return {(r["scope_key"], r["dedup_id"]): (r["message_id"], r["sequence_number"]) for r in rows}


async def queue_wake(conn: Conn, queue_id: int) -> None:
    """Notify long-polling receivers of this queue when the transaction commits."""
    await conn.execute(QUERIES["queue_wake"].sql, {"queue_id": queue_id})


# -- receive ----------------------------------------------------------------------------------


async def message_receive_standard(
    conn: Conn,
    queue_id: int,
    limit: int,
    visibility_timeout: int,
    max_receive_count: int | None,
    now: datetime | None,
) -> list[dict[str, Any]]:
    """Deliver due messages of a standard queue; rows with dead=True are to be dead-lettered."""
    return await prepared.rows(
        conn,
        _RECEIVE_STANDARD,
        {
            "queue_id": queue_id,
            "limit": limit,
            "visibility_timeout": visibility_timeout,
            "max_receive_count": max_receive_count,
            "now": now,
        },
    )


async def fifo_receive(
    conn: Conn,
    queue_id: int,
    limit: int,
    visibility_timeout: int,
    max_receive_count: int | None,
    now: datetime | None,
) -> list[dict[str, Any]]:
    """Deliver from a FIFO queue in one round trip; rows with dead=True are to be dead-lettered."""
    return await _rows(
        conn,
        "fifo_receive",
        {
            "queue_id": queue_id,
            "limit": limit,
            "visibility_timeout": visibility_timeout,
            "max_receive_count": max_receive_count,
            "now": now,
        },
    )


async def fifo_receive_many(
    conn: Conn, queue_id: int, limits: Sequence[int], visibility_timeout: int, now: datetime | None
) -> list[list[dict[str, Any]]]:
    """Several receives of a FIFO queue without a dead-letter queue, in one statement; per
    receiver (in order) its rows, each group's messages in order, groups in pick order."""
    rows = await prepared.rows(
        conn,
        _FIFO_RECEIVE_MANY,
        {"queue_id": queue_id, "limits": list(limits), "visibility_timeout": visibility_timeout, "now": now},
    )
    taken: list[list[dict[str, Any]]] = [[] for _ in limits]
    for row in rows:
        taken[row["slot"] - 1].append(row)
    for batch in taken:
        batch.sort(key=lambda r: (r["ord"], r["id"]))
    return taken


async def next_due(conn: Conn, queue_id: int, fifo: bool) -> float | None:
    """Seconds until something in this queue next becomes receivable (None: nothing queued)."""
    rows = await prepared.rows(conn, _NEXT_DUE[fifo], {"queue_id": queue_id})
    return rows[0]["seconds"] if rows else None


async def attempt_messages(
    conn: Conn, queue_id: int, attempt_id: str, now: datetime | None
) -> list[dict[str, Any]] | None:
    """The still-held messages of an earlier receive with this attempt id (None: no such attempt)."""
    rows = await _rows(conn, "attempt_get", {"queue_id": queue_id, "attempt_id": attempt_id, "now": now})
    if not rows:
        return None
    return await _rows(
        conn,
        "attempt_messages",
        {
            "queue_id": queue_id,
            "ids": rows[0]["sequence_numbers"],
            "lease_ids": rows[0]["lease_ids"],
            "now": now,
        },
    )


async def attempt_record(
    conn: Conn,
    queue_id: int,
    attempt_id: str,
    delivered: Sequence[dict[str, Any]],
    window: int,
    now: datetime | None,
) -> None:
    """Remember the receipts a receive attempt handed out."""
    await conn.execute(
        QUERIES["attempt_record"].sql,
        {
            "queue_id": queue_id,
            "attempt_id": attempt_id,
            "ids": [r["id"] for r in delivered],
            "lease_ids": [r["lease_id"] for r in delivered],
            "window": window,
            "now": now,
        },
    )


async def consumer_record(conn: Conn, queue_id: int, consumer_id: str, delivered: Sequence[dict[str, Any]]) -> None:
    """Remember that `consumer_id` received these messages (under their new leases)."""
    await conn.execute(
        QUERIES["consumer_record"].sql,
        {
            "queue_id": queue_id,
            "consumer_id": consumer_id,
            "ids": [r["id"] for r in delivered],
            "lease_ids": [r["lease_id"] for r in delivered],
        },
    )


async def consumer_held(conn: Conn, queue_id: int, consumer_id: str) -> list[Receipt]:
    """Receipts of the in-flight messages `consumer_id` holds now."""
    rows = await _rows(conn, "consumer_held", {"queue_id": queue_id, "consumer_id": consumer_id})
    return [Receipt(r["id"], r["lease_id"]) for r in rows]


# -- finish: ack, nack, visibility --------------------------------------------------------------


async def group_lock_for_messages(conn: Conn, queue_id: int, ids: Sequence[int]) -> list[str]:
    """Lock the groups of these messages, in group order."""
    rows = await _rows(conn, "group_lock_for_messages", {"queue_id": queue_id, "ids": list(ids)})
    return [r["group_id"] for r in rows]


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
    rows = await prepared.rows(
        conn,
        _ACK,
        {
            "queue_id": queue_id,
            "queue_name": queue_name,
            "ids": [r.sequence_number for r in receipts],
            "lease_ids": [r.lease_id for r in receipts],
            "results": [None if res is None else prepared.JsonText(json.dumps(res)) for res in results],
            "now": now,
        },
    )
    return [receipts[r["entry"] - 1] for r in rows], any(r["woke"] for r in rows)


async def message_nack(
    conn: Conn,
    queue_id: int,
    receipts: Sequence[Receipt],
    delays: Sequence[int],
    errors: Sequence[Any],
    now: datetime | None,
) -> list[tuple[Receipt, str | None]]:
    """Return messages to ready after a delay; (receipt, group) of those returned."""
    rows = await prepared.rows(
        conn,
        _NACK,
        {
            "queue_id": queue_id,
            "ids": [r.sequence_number for r in receipts],
            "lease_ids": [r.lease_id for r in receipts],
            "delays": list(delays),
            "errors": [None if e is None else prepared.JsonText(json.dumps(e)) for e in errors],
            "now": now,
        },
    )
    return [(Receipt(r["id"], r["lease_id"]), r["group_id"]) for r in rows]


async def message_give_back(
    conn: Conn, queue_id: int, receipts: Sequence[Receipt], now: datetime | None
) -> list[tuple[Receipt, str | None]]:
    """Undo the receive that handed out these receipts (its client never had the answer):
    ready now, receive count back down; (receipt, group) of those given back."""
    rows = await _rows(
        conn,
        "message_give_back",
        {
            "queue_id": queue_id,
            "ids": [r.sequence_number for r in receipts],
            "lease_ids": [r.lease_id for r in receipts],
            "now": now,
        },
    )
    return [(Receipt(r["id"], r["lease_id"]), r["group_id"]) for r in rows]


async def message_visibility(
    conn: Conn,
    queue_id: int,
    receipts: Sequence[Receipt],
    timeouts: Sequence[int],
    now: datetime | None,
) -> list[tuple[Receipt, str | None]]:
    """Change the visibility timeout of in-flight messages; (receipt, group) of those changed."""
    rows = await prepared.rows(
        conn,
        _VISIBILITY,
        {
            "queue_id": queue_id,
            "ids": [r.sequence_number for r in receipts],
            "lease_ids": [r.lease_id for r in receipts],
            "timeouts": list(timeouts),
            "now": now,
        },
    )
    return [(Receipt(r["id"], r["lease_id"]), r["group_id"]) for r in rows]


async def group_release(
    conn: Conn, queue_id: int, group_ids: Sequence[str], *, served: bool, now: datetime | None
) -> list[tuple[str, datetime | None]]:
    """Release the leases of locked groups with nothing left in flight; (group, available_at).
    `served`: the group was just served, so it goes to the back of the rotation."""
    rows = await _rows(
        conn,
        "group_release",
        {"queue_id": queue_id, "group_ids": sorted(set(group_ids)), "served": served, "now": now},
    )
    return [(r["group_id"], r["available_at"]) for r in rows]


async def group_extend(conn: Conn, queue_id: int, group_ids: Sequence[str]) -> None:
    """Recompute the lease expiry of locked groups after visibility changes."""
    await conn.execute(QUERIES["group_extend"].sql, {"queue_id": queue_id, "group_ids": sorted(set(group_ids))})


# -- moves: dead letters, redrive, purge, retention --------------------------------------------


async def message_dead_letter(
    conn: Conn,
    queue_id: int,
    queue_name: str,
    dead_letter_queue_id: int,
    ids: Sequence[int],
    now: datetime | None,
) -> list[tuple[int, str | None]]:
    """Move held messages to the dead-letter queue; (new id, group) in the DLQ."""
    rows = await _rows(
        conn,
        "message_dead_letter",
        {
            "queue_id": queue_id,
            "queue_name": queue_name,
            "dead_letter_queue_id": dead_letter_queue_id,
            "ids": list(ids),
            "now": now,
        },
    )
    return [(r["id"], r["group_id"]) for r in rows]


async def redrive_pick(conn: Conn, queue_id: int, fifo: bool, limit: int, now: datetime | None) -> list[dict[str, Any]]:
    """Lock and list dead-letter messages that can go back, at most `limit`: id, group_id,
    source_queue_id. FIFO: the groups are locked (up to `limit` of them) and the first messages
    of each, in group order, are listed; a group may go back over several batches."""
    if not fifo:
        return await _rows(conn, "redrive_pick_standard", {"queue_id": queue_id, "limit": limit, "now": now})
    groups = await _rows(conn, "redrive_pick_groups", {"queue_id": queue_id, "limit": limit, "now": now})
    if not groups:
        return []
    return await _rows(
        conn,
        "redrive_pick_fifo",
        {"queue_id": queue_id, "group_ids": [g["group_id"] for g in groups], "limit": limit},
    )


async def message_move(
    conn: Conn, queue_id: int, target_queue_id: int, ids: Sequence[int], now: datetime | None
) -> list[tuple[int, str | None]]:
    """Move held messages into another queue as new ready messages; (new id, group)."""
    rows = await _rows(
        conn,
        "message_move",
        {"queue_id": queue_id, "target_queue_id": target_queue_id, "ids": list(ids), "now": now},
    )
    return [(r["id"], r["group_id"]) for r in rows]


async def message_purge(conn: Conn, queue_id: int, queue_name: str, now: datetime | None) -> int:
    """Remove every message of a queue into history (outcome purged); how many."""
    await conn.execute(QUERIES["group_lock_all"].sql, {"queue_id": queue_id})
    rows = await _rows(conn, "message_purge", {"queue_id": queue_id, "queue_name": queue_name, "now": now})
    await conn.execute(QUERIES["group_reset_all"].sql, {"queue_id": queue_id})
    return int(rows[0]["purged"])


async def expired_groups(
    conn: Conn, queue_id: int, retention_seconds: int, limit: int, now: datetime | None
) -> list[str]:
    """FIFO groups holding messages older than the retention period."""
    rows = await _rows(
        conn,
        "expired_groups",
        {"queue_id": queue_id, "retention_seconds": retention_seconds, "limit": limit, "now": now},
    )
    return [r["group_id"] for r in rows]


async def group_lock(conn: Conn, queue_id: int, group_ids: Sequence[str]) -> list[str]:
    """Lock these groups, in group order; the ones that exist."""
    rows = await _rows(conn, "group_lock", {"queue_id": queue_id, "group_ids": sorted(set(group_ids))})
    return [r["group_id"] for r in rows]


async def message_expire(
    conn: Conn,
    queue_id: int,
    queue_name: str,
    retention_seconds: int,
    group_ids: Sequence[str],
    limit: int,
    now: datetime | None,
) -> list[tuple[int, str | None]]:
    """Remove messages older than the retention period into history (outcome expired)."""
    rows = await _rows(
        conn,
        "message_expire",
        {
            "queue_id": queue_id,
            "queue_name": queue_name,
            "retention_seconds": retention_seconds,
            "group_ids": list(group_ids),
            "limit": limit,
            "now": now,
        },
    )
    return [(r["id"], r["group_id"]) for r in rows]
