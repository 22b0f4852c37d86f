"""What the repository modules share: the connection type they take, the receipt, and the row
types of statements found in more than one of them (send, receive, finish, moves).

A row type is a NamedTuple whose fields are its statement's columns, in order
(app.db.statements checks it on every run, and tests/db/test_statements.py for every statement).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, TypeAlias
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn: TypeAlias = AsyncConnection[DictRow]


@dataclass(frozen=True)
class Receipt:
    """A decoded receipt handle: which message, under which lease."""

    sequence_number: int
    lease_id: UUID


class Group(NamedTuple):
    """A FIFO group, by its id (a lock's answer)."""

    group_id: str


class Moved(NamedTuple):
    """A message a statement moved or removed: its (new) sequence number, and its group."""

    id: int
    group_id: str | None


class Changed(NamedTuple):
    """A message changed under a receipt (nack, give-back, visibility): the receipt, and its group."""

    id: int
    lease_id: UUID
    group_id: str | None


class Delivered(NamedTuple):
    """A message a receive leased (dead=False), or one past max_receive_count that it left for the
    caller to dead-letter (dead=True: the other columns but id and receive_count are NULL)."""

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
