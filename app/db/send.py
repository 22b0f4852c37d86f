"""Repository functions that put messages into a queue (queries/send.sql): a send's insert, a
backfill's staged one, the FIFO group locks before them, and the wake of long-polls after.
Each takes a connection and never commits; app/service/enqueue.py states the rules that
combine them (which groups are locked before which insert, what a duplicate answers)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any, NamedTuple
from uuid import UUID

from psycopg.abc import Buffer

from app.db.errors import KeyTaken
from app.db.queues import QUEUE_LOCK_CLASS
from app.db.rows import Conn
from app.db.statements import NoRow, copy_in, execute, fetch, statement


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
    # The rarer parts, None when absent (most messages): typed attributes as stored (see
    # validation.typed_document), the sending key, the trace header.
    attribute_types: dict[str, dict[str, str]] | None = None
    sender_id: str | None = None
    trace_header: str | None = None


class Sent(NamedTuple):
    """A send's answer for one entry (message_insert): its sequence number, and whether it was
    inserted (False: its dedup key was already claimed inside the window)."""

    ord: int
    id: int
    inserted: bool


class Inserted(NamedTuple):
    """A backfill's answer (message_insert_count): how many of its entries were inserted."""

    inserted: int


class GroupDelay(NamedTuple):
    """A group some entries write to, and its first message's delay."""

    group_id: str
    delay: int


class Original(NamedTuple):
    """The message that first claimed a dedup key."""

    scope_key: str
    dedup_id: str
    message_id: UUID
    sequence_number: int


# The hot statements run prepared (app.db.prepared, through app.db.statements).
_GROUP_LOCK_FOR_SEND = statement("group_lock_for_send", NoRow, hot=True)
_SEND = statement("message_send", Sent, hot=True)
_SEND_FENCED = statement("message_send_fenced", Sent, hot=True)
# A backfill's: first as plain claims of new keys, then, if a key was there, as a send claims.
_INSERT_STAGED_NEW_KEYS = statement("message_insert_staged_new_keys", Inserted)
_INSERT_STAGED = statement("message_insert_staged", Inserted)
_STAGED_GROUPS = statement("message_staged_groups", GroupDelay)
_STAGE_CREATE = statement("message_stage_create", NoRow)
_STAGE_COPY = statement("message_stage_copy", NoRow)
_DEDUP_LOOKUP = statement("dedup_lookup", Original)
_QUEUE_WAKE = statement("queue_wake", NoRow)


async def group_lock_for_send(conn: Conn, queue_id: int, delays: dict[str, int], now: datetime | None) -> None:
    """Lock (creating) the groups a send writes to; `delays` maps group -> first message's delay."""
    groups = sorted(delays)
    await execute(
        conn,
        _GROUP_LOCK_FOR_SEND,
        {"queue_id": queue_id, "group_ids": groups, "delays": [delays[g] for g in groups], "now": now},
    )


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
        if e.attribute_types is not None:
            head += f',"attribute_types":{_ATTRIBUTES(e.attribute_types)}'
        if e.sender_id is not None:
            head += f',"sender_id":{text(e.sender_id)}'
        if e.trace_header is not None:
            head += f',"trace_header":{text(e.trace_header)}'
        parts.append(head.encode() + b',"body":' + e.body_json + b"}")
    return b"[" + b",".join(parts) + b"]"


_ATTRIBUTES = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


async def message_send(
    conn: Conn,
    queue_id: int,
    entries: Sequence[NewMessage],
    dedup_window: int,
    now: datetime | None,
    *,
    fenced: bool = False,
) -> list[Sent]:
    """Insert a send's entries claiming their dedup keys (message_insert); per entry, in entry
    order, its sequence number and whether it was inserted (False: its dedup key was already
    claimed inside the window). A FIFO queue's groups are locked before (app.service.enqueue).

    `fenced` (a standard queue's send): the statement takes the queue's send fence itself
    (message_entry_json_fenced), so it needs no transaction around it; an empty answer then
    means the queue is gone (deleted, or replaced under the same name)."""
    params = {
        "lock_class": QUEUE_LOCK_CLASS,
        "queue_id": queue_id,
        "entries": _entries_document(entries),
        "dedup_window": dedup_window,
        "now": now,
    }
    return await fetch(conn, _SEND_FENCED if fenced else _SEND, params)


async def message_staged_groups(conn: Conn) -> dict[str, int]:
    """The groups the rows this transaction staged write to -> their first message's delay."""
    return {g.group_id: g.delay for g in await fetch(conn, _STAGED_GROUPS, {})}


async def message_insert_staged(conn: Conn, queue_id: int, dedup_window: int, now: datetime | None) -> int:
    """message_send for a backfill task: the entries are the rows this transaction staged
    (message_stage); how many were inserted (the others are duplicates by dedup id). A FIFO
    queue's groups are locked before (app.service.enqueue).

    The claims of dedup keys are first a plain insert (message_insert without its take_over): a
    backfill's keys are new as a rule, and a speculative insert costs far more. When one of them
    is there after all (sent or backfilled before, or by a concurrent transaction that committed
    first), that insert fails on message_dedup_pkey and leaves nothing (a savepoint); the
    statement then runs again as a send's, with the groups still locked. The first try's
    sequence numbers are lost (numbers have gaps anyway), so either way the messages and claims
    are the ones a send of these entries would make."""
    params: dict[str, Any] = {"queue_id": queue_id, "dedup_window": dedup_window, "now": now}
    try:
        async with conn.transaction():  # a savepoint: the failed insert leaves nothing
            [row] = await fetch(conn, _INSERT_STAGED_NEW_KEYS, params)
    except KeyTaken:
        [row] = await fetch(conn, _INSERT_STAGED, params)
    return row.inserted


async def message_stage(conn: Conn, text: Iterable[Buffer | str]) -> None:
    """Create this transaction's staging table and COPY the rows in `text` (COPY text format,
    whole lines per chunk) into it."""
    await execute(conn, _STAGE_CREATE)
    await copy_in(conn, _STAGE_COPY, text)


async def dedup_lookup(
    conn: Conn, queue_id: int, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], tuple[UUID, int]]:
    """(scope key, dedup id) -> (message id, sequence number) of the first claim."""
    params = {"queue_id": queue_id, "scope_keys": [k[0] for k in keys], "dedup_ids": [k[1] for k in keys]}
    rows = await fetch(conn, _DEDUP_LOOKUP, params)
    return {(r.scope_key, r.dedup_id): (r.message_id, r.sequence_number) for r in rows}


async def queue_wake(conn: Conn, queue_id: int) -> None:
    """Notify long-polling receivers of this queue when the transaction commits."""
    await execute(conn, _QUEUE_WAKE, {"queue_id": queue_id})
