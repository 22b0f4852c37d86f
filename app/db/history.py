"""Repository functions for the message history (queries/history.sql). Each takes a connection
and never commits."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from app.db.rows import Conn
from app.db.statements import fetch, statement
from app.domain import HistoryEntry, HistoryOutcome, HistoryPage


class HistoryRow(NamedTuple):
    """A history_page row: an entry, whether it matched the filters, and its place in the walk."""

    id: int
    message_id: UUID
    sequence_number: int
    group_id: str | None
    dedup_id: str | None
    outcome: HistoryOutcome
    sent_at: datetime
    first_received_at: datetime | None
    last_received_at: datetime | None
    finished_at: datetime
    receive_count: int
    result: Any
    error: Any
    matches: bool
    walked: int


_PAGE = statement("history_page", HistoryRow)


async def history_page(
    conn: Conn,
    queue_id: int,
    *,
    outcome: HistoryOutcome | None,
    group_id: str | None,
    before_id: int | None,
    limit: int,
    walk: int,
) -> HistoryPage:
    """Up to `limit` of the queue's history entries below `before_id`, newest first, of that
    outcome and group (None: any), looking at `walk` entries at most: a page may hold fewer than
    `limit` and still have a next one (the SQL block says why)."""
    params = {
        "queue_id": queue_id,
        "outcome": outcome,
        "group_id": group_id,
        "before_id": before_id,
        "walk": walk,
        "limit": limit + 1,  # one more: whether there is a next page
    }
    rows = await fetch(conn, _PAGE, params)
    matched = [row for row in rows if row.matches]
    entries = [HistoryEntry(*row[:-2]) for row in matched[:limit]]
    if len(matched) > limit:
        next_before: int | None = entries[-1].id
    elif rows and rows[-1].walked == walk:
        next_before = rows[-1].id  # the walk stopped here: the rest is older
    else:
        next_before = None
    return HistoryPage(entries, next_before)
