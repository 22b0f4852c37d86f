"""Turning rows into domain objects, and the connection type repository functions take."""

from __future__ import annotations

from typing import Any, TypeAlias

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from app.domain import DeadLetter, Queue, QueueAttributes

Conn: TypeAlias = AsyncConnection[DictRow]


def queue_from_row(row: dict[str, Any]) -> Queue:
    """A `queues` row (with `dead_letter_queue_name`) as a Queue."""
    dead_letter = None
    if row["dead_letter_queue_id"] is not None:
        dead_letter = DeadLetter(queue=row["dead_letter_queue_name"] or "", max_receive_count=row["max_receive_count"])
    return Queue(
        id=row["id"],
        name=row["name"],
        attributes=QueueAttributes(
            fifo=row["fifo"],
            visibility_timeout=row["visibility_timeout"],
            delay_seconds=row["delay_seconds"],
            retention_seconds=row["retention_seconds"],
            max_message_bytes=row["max_message_bytes"],
            receive_wait_seconds=row["receive_wait_seconds"],
            content_based_deduplication=row["content_based_deduplication"],
            deduplication_scope=row["deduplication_scope"],
            dead_letter=dead_letter,
        ),
        dead_letter_queue_id=row["dead_letter_queue_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
