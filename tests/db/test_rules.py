"""Rules the database enforces by itself, whatever code writes to it: message state
transitions, immutable content, append-only history, and one lease per FIFO group."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors as pg_errors

Conn = psycopg.Connection[tuple[object, ...]]


@pytest.fixture
def conn(db_url: str) -> Iterator[Conn]:
    with psycopg.connect(db_url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO queues (name, fifo, visibility_timeout, delay_seconds, retention_seconds,"
            " max_message_bytes, receive_wait_seconds, content_based_deduplication, deduplication_scope)"
            " VALUES ('q', false, 30, 0, 345600, 1048576, 0, false, 'queue'),"
            "        ('f.fifo', true, 30, 0, 345600, 1048576, 0, false, 'queue')"
        )
        yield connection


def _insert(conn: Conn, queue: str = "q", group: str | None = None) -> int:
    row = conn.execute(
        "INSERT INTO messages (queue_id, message_id, group_id, body, sent_at, visible_at)"
        " SELECT id, gen_random_uuid(), %s, '{}'::jsonb, now(), now() FROM queues WHERE name = %s RETURNING id",
        (group, queue),
    ).fetchone()
    assert row is not None
    return int(str(row[0]))


def _receive(conn: Conn, message: int, lease: uuid.UUID | None = None) -> None:
    conn.execute(
        "UPDATE messages SET state = 'in_flight', lease_id = %s, receive_count = receive_count + 1,"
        " first_received_at = coalesce(first_received_at, now()), last_received_at = now() WHERE id = %s",
        (lease or uuid.uuid4(), message),
    )


def test_receive_and_return_are_allowed(conn: Conn) -> None:
    m = _insert(conn)
    _receive(conn, m)
    conn.execute("UPDATE messages SET visible_at = now() + interval '1 minute' WHERE id = %s", (m,))
    conn.execute("UPDATE messages SET state = 'ready', lease_id = NULL WHERE id = %s", (m,))
    _receive(conn, m)
    row = conn.execute("SELECT receive_count, state FROM messages WHERE id = %s", (m,)).fetchone()
    assert row == (2, "in_flight")


@pytest.mark.parametrize(
    "update",
    [
        # a receive must count: new lease with the count unchanged
        "UPDATE messages SET state = 'in_flight', lease_id = gen_random_uuid(), last_received_at = now() WHERE id = %s",
        # counts never go back, nor jump
        "UPDATE messages SET receive_count = receive_count + 2 WHERE id = %s",
        # in flight without a lease (CHECK)
        "UPDATE messages SET state = 'in_flight' WHERE id = %s",
    ],
)
def test_illegal_transitions_from_ready_are_refused(conn: Conn, update: str) -> None:
    m = _insert(conn)
    with pytest.raises(pg_errors.CheckViolation):
        conn.execute(update, (m,))


def test_return_must_keep_the_count_and_first_receipt_is_written_once(conn: Conn) -> None:
    m = _insert(conn)
    _receive(conn, m)
    with pytest.raises(pg_errors.CheckViolation):
        conn.execute("UPDATE messages SET state = 'ready', lease_id = NULL, receive_count = 0 WHERE id = %s", (m,))
    with pytest.raises(pg_errors.CheckViolation):
        conn.execute("UPDATE messages SET first_received_at = now() - interval '1 day' WHERE id = %s", (m,))


UNDO = "UPDATE messages SET state = 'ready', lease_id = NULL, receive_count = receive_count - 1"


def test_a_receive_can_be_undone_with_its_lease(conn: Conn) -> None:
    m = _insert(conn)
    _receive(conn, m)
    # Back to no receive at all: no first receipt either.
    conn.execute(UNDO + ", first_received_at = NULL, last_received_at = NULL WHERE id = %s", (m,))
    _receive(conn, m)
    _receive(conn, m)
    # Received before: the first receipt stays.
    conn.execute(UNDO + " WHERE id = %s", (m,))
    row = conn.execute("SELECT state, receive_count, first_received_at IS NOT NULL FROM messages WHERE id = %s", (m,))
    assert row.fetchone() == ("ready", 1, True)
    # A ready message has no receive to undo.
    with pytest.raises(pg_errors.CheckViolation):
        conn.execute("UPDATE messages SET receive_count = receive_count - 1 WHERE id = %s", (m,))


@pytest.mark.parametrize(
    "update",
    [
        # not without giving up the lease, nor under a new one
        "UPDATE messages SET receive_count = receive_count - 1 WHERE id = %s",
        "UPDATE messages SET lease_id = gen_random_uuid(), receive_count = receive_count - 1 WHERE id = %s",
        # one receive at a time
        "UPDATE messages SET state = 'ready', lease_id = NULL, receive_count = receive_count - 2 WHERE id = %s",
        # a message received before keeps its first receipt
        UNDO + ", first_received_at = NULL WHERE id = %s",
        UNDO + ", first_received_at = now() WHERE id = %s",
    ],
)
def test_an_undo_is_one_receive_given_back_with_its_lease(conn: Conn, update: str) -> None:
    m = _insert(conn)
    _receive(conn, m)
    conn.execute("UPDATE messages SET state = 'ready', lease_id = NULL WHERE id = %s", (m,))
    _receive(conn, m)
    with pytest.raises(pg_errors.CheckViolation):
        conn.execute(update, (m,))
    conn.execute(UNDO + " WHERE id = %s", (m,))  # what is allowed


@pytest.mark.parametrize("column", ["body = '1'", "group_id = 'x'", "queue_id = queue_id + 1", "sent_at = now()"])
def test_content_is_immutable(conn: Conn, column: str) -> None:
    m = _insert(conn)
    with pytest.raises(pg_errors.CheckViolation, match="immutable"):
        conn.execute(f"UPDATE messages SET {column} WHERE id = %s", (m,))


def test_history_is_append_only(conn: Conn) -> None:
    conn.execute(
        "INSERT INTO message_history (queue_id, queue_name, message_id, sequence_number, sent_at,"
        " finished_at, receive_count, outcome) VALUES (1, 'q', gen_random_uuid(), 1, now(), now(), 1, 'acked')"
    )
    with pytest.raises(pg_errors.CheckViolation, match="append-only"):
        conn.execute("UPDATE message_history SET outcome = 'purged'")


def test_in_flight_message_must_hold_its_groups_lease(conn: Conn) -> None:
    first, second = _insert(conn, "f.fifo", "g"), _insert(conn, "f.fifo", "g")
    lease = uuid.uuid4()
    conn.execute(
        "INSERT INTO message_groups (queue_id, group_id, lease_id, available_at)"
        " SELECT id, 'g', %s, now() FROM queues WHERE name = 'f.fifo'",
        (lease,),
    )
    _receive(conn, first, lease)
    # A second receipt for the same group (another lease) is refused by the foreign key.
    with pytest.raises(pg_errors.ForeignKeyViolation):
        _receive(conn, second, uuid.uuid4())
    # And the group cannot drop or change its lease while a message is in flight under it.
    with pytest.raises(pg_errors.ForeignKeyViolation):
        conn.execute("UPDATE message_groups SET lease_id = NULL WHERE group_id = 'g'")
    with pytest.raises(pg_errors.ForeignKeyViolation):
        conn.execute("UPDATE message_groups SET lease_id = gen_random_uuid() WHERE group_id = 'g'")


def test_hot_tables_vacuum_by_dead_row_count(conn: Conn) -> None:
    """Dead tuples stay bounded under churn: vacuum after a fixed number of dead rows."""
    rows = conn.execute(
        "SELECT relname, reloptions FROM pg_class WHERE relname IN ('messages', 'message_groups', 'message_dedup')"
    ).fetchall()
    assert len(rows) == 3
    for name, options in rows:
        assert options is not None and "autovacuum_vacuum_scale_factor=0" in options, (name, options)
        assert any(str(option).startswith("autovacuum_vacuum_threshold=") for option in options), name
