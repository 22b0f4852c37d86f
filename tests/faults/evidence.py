"""What a fault test leaves behind when its checker finds a problem: for every message delivered
more than once, what the clients saw (its send, each delivery with its receipt's lease id, each ack
attempt and its outcome) next to what the database holds for it (its message_history rows and any
row still in messages), written as JSON for a person to read.

Client times are the event loop's clock; `wall_offset` turns them into the wall clock the
database's timestamps use (client and server run on one machine)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.service import receipts
from tests.faults.timeline import Key, Problem, Timeline


def _lease(handle: str) -> str:
    return str(receipts.decode(handle)[1])


def client_view(history: Timeline, keys: set[Key]) -> dict[str, Any]:
    """Per message key, what the clients recorded."""
    view: dict[str, Any] = {}
    for key in sorted(keys, key=str):
        deliveries = []
        for d in history.deliveries:
            for item in d.items:
                if item.key != key:
                    continue
                deliveries.append(
                    {
                        "delivery": d.id,
                        "consumer": d.consumer,
                        "requested_at": d.requested_at,
                        "answered_at": d.answered_at,
                        "message_id": item.message_id,
                        "sequence_number": item.sequence_number,
                        "receive_count": item.receive_count,
                        "lease_id": _lease(item.receipt_handle),
                        "batch": [list(i.key) for i in d.items],
                        "acks": [vars(a) for a in d.acks.get(key, [])],
                    }
                )
        view[str(key)] = {
            "confirmed": history.confirmed.get(key),
            "confirmed_at": history.confirmed_at.get(key),
            "deliveries": deliveries,
        }
    return view


async def database_view(url: str, queue: str, message_ids: set[str]) -> dict[str, Any]:
    """Per message id, its history rows and any row left in messages."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as conn:
        cur = await conn.execute(
            "SELECT message_id::text, sequence_number, group_id, dedup_id, outcome::text, receive_count,"
            " sent_at::text, first_received_at::text, last_received_at::text, finished_at::text, id AS history_id"
            " FROM message_history WHERE queue_name = %s AND message_id = ANY(%s::uuid[]) ORDER BY id",
            (queue, sorted(message_ids)),
        )
        history = await cur.fetchall()
        cur = await conn.execute(
            "SELECT m.message_id::text, m.id, m.state::text, m.lease_id::text, m.receive_count, m.visible_at::text"
            " FROM messages m JOIN queues q ON q.id = m.queue_id"
            " WHERE q.name = %s AND m.message_id = ANY(%s::uuid[])",
            (queue, sorted(message_ids)),
        )
        left = await cur.fetchall()
    view: dict[str, Any] = {m: {"history": [], "messages": []} for m in sorted(message_ids)}
    for row in history:
        view[row["message_id"]]["history"].append(row)
    for row in left:
        view[row["message_id"]]["messages"].append(row)
    return view


async def write_evidence(
    path: Path, url: str, queue: str, history: Timeline, problems: list[Problem], wall_offset: float
) -> None:
    """The evidence of `problems` on `queue` as JSON in `path`."""
    keys = {i.key for d in history.deliveries for i in d.items if i.receive_count > 1}
    ids = {i.message_id for d in history.deliveries for i in d.items if i.key in keys}
    ids |= {history.confirmed[k] for k in keys if k in history.confirmed}
    document = {
        "queue": queue,
        "problems": [vars(p) for p in problems],
        "wall_offset": wall_offset,
        "clients": client_view(history, keys),
        "database": await database_view(url, queue, ids),
    }
    await asyncio.to_thread(path.write_text, json.dumps(document, indent=1, default=str))
