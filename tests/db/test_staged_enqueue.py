"""A backfill task's enqueue (enqueue_staged) claims dedup keys as a send does. When every
key is new, its first try, a plain insert, stands (no sequence number is lost). When one is there,
the first try fails and leaves nothing, and the send's claims decide: a key inside its window
makes a duplicate, a key whose window ended is taken over, the others are new."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from app.db import send
from app.db.queues import queue_get
from app.domain import SendEntry, SendResult
from app.service import enqueue
from app.service.messages import MessageService
from app.service.queues import QueueService
from tests.factories import make_queue

BASE = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW = 300


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def line(ord_: int, group: str, dedup: str, message_id: uuid.UUID) -> str:
    """A staging-table row (message_stage_create) of a FIFO entry in queue-wide dedup scope."""
    return f'{ord_}\t{message_id.hex}\t{group}\t{dedup}\t\t{{"n":{ord_}}}\t{{}}\t0\tf\n'


async def enqueue_staged(db_url: str, queue_id: int, lines: list[str], now: datetime) -> int:
    async with await psycopg.AsyncConnection.connect(db_url, row_factory=dict_row) as conn, conn.transaction():
        await send.message_stage(conn, ["".join(lines)])
        return await enqueue.enqueue_staged(conn, queue_id, True, WINDOW, now)


async def rows(db_url: str, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(db_url, row_factory=dict_row) as conn:
        return await (await conn.execute(query, params)).fetchall()


async def queue_id(db_url: str, name: str) -> int:
    async with await psycopg.AsyncConnection.connect(db_url, row_factory=dict_row) as conn:
        queue = await queue_get(conn, name)
    assert queue is not None
    return queue.id


async def test_new_keys_are_claimed_by_the_first_try(db_url: str, queues: QueueService) -> None:
    name = await make_queue(queues, fifo=True)
    qid = await queue_id(db_url, name)
    ids = [uuid.uuid4() for _ in range(3)]

    enqueued = await enqueue_staged(
        db_url, qid, [line(0, "g1", "a", ids[0]), line(1, "g2", "b", ids[1]), line(2, "g1", "c", ids[2])], at(0)
    )

    assert enqueued == 3
    stored = await rows(
        db_url, "SELECT id, message_id, group_id FROM messages WHERE queue_id = %(q)s ORDER BY id", {"q": qid}
    )
    assert [(r["message_id"], r["group_id"]) for r in stored] == [(ids[0], "g1"), (ids[1], "g2"), (ids[2], "g1")]
    numbers = [r["id"] for r in stored]
    assert numbers == list(range(numbers[0], numbers[0] + 3))  # drawn once: the first try stood
    claims = await rows(
        db_url,
        "SELECT dedup_id, message_id, sequence_number FROM message_dedup WHERE queue_id = %(q)s ORDER BY 1",
        {"q": qid},
    )
    assert [(c["dedup_id"], c["message_id"], c["sequence_number"]) for c in claims] == [
        ("a", ids[0], numbers[0]),
        ("b", ids[1], numbers[1]),
        ("c", ids[2], numbers[2]),
    ]


async def test_a_key_already_there_makes_the_claims_a_sends(
    db_url: str, queues: QueueService, messages: MessageService
) -> None:
    name = await make_queue(queues, fifo=True)
    qid = await queue_id(db_url, name)
    [old] = await messages.send(name, [SendEntry(body=1, group_id="g1", dedup_id="old")], now=at(0))
    [live] = await messages.send(name, [SendEntry(body=2, group_id="g1", dedup_id="live")], now=at(200))
    assert isinstance(old, SendResult) and isinstance(live, SendResult)
    ids = [uuid.uuid4() for _ in range(4)]

    # At 301 s the window of "old" has ended and that of "live" has not.
    enqueued = await enqueue_staged(
        db_url,
        qid,
        [
            line(0, "g1", "live", ids[0]),
            line(1, "g1", "old", ids[1]),
            line(2, "g2", "new", ids[2]),
            line(3, "g1", "x", ids[3]),
        ],
        at(301),
    )

    assert enqueued == 3
    stored = await rows(db_url, "SELECT id, message_id FROM messages WHERE queue_id = %(q)s ORDER BY id", {"q": qid})
    assert [str(r["message_id"]) for r in stored] == [old.message_id, live.message_id, *map(str, ids[1:])]
    new_numbers = [r["id"] for r in stored[2:]]
    assert new_numbers[0] > live.sequence_number + 4  # the failed first try drew 4 numbers, then lost them
    claims = await rows(
        db_url,
        "SELECT dedup_id, message_id, sequence_number, expires_at FROM message_dedup WHERE queue_id = %(q)s ORDER BY 1",
        {"q": qid},
    )
    assert [(c["dedup_id"], str(c["message_id"]), c["sequence_number"], c["expires_at"]) for c in claims] == [
        ("live", live.message_id, live.sequence_number, at(200 + WINDOW)),
        ("new", str(ids[2]), new_numbers[1], at(301 + WINDOW)),
        ("old", str(ids[1]), new_numbers[0], at(301 + WINDOW)),
        ("x", str(ids[3]), new_numbers[2], at(301 + WINDOW)),
    ]
