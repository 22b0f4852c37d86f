"""The hot queries are index-driven: their plans must not scan the message or group tables.

A backlog is preloaded with generate_series (20k messages over 2,000 groups, plus 20k in a
standard queue), the tables analysed, and each hot query EXPLAINed with real parameters.
An index regression (a dropped index, a rewritten predicate) fails here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from app.db.sql import QUERIES

Conn = psycopg.Connection[tuple[Any, ...]]
HOT_TABLES = {"messages", "message_groups"}


@pytest.fixture
def loaded(db_url: str) -> Iterator[Conn]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO queues (id, name, fifo, visibility_timeout, delay_seconds, retention_seconds,"
            " max_message_bytes, receive_wait_seconds, content_based_deduplication, deduplication_scope)"
            " OVERRIDING SYSTEM VALUE VALUES"
            " (1, 'f.fifo', true, 30, 0, 345600, 1048576, 0, false, 'queue'),"
            " (2, 's', false, 30, 0, 345600, 1048576, 0, false, 'queue')"
        )
        conn.execute(
            "INSERT INTO messages (queue_id, message_id, group_id, dedup_id, body, sent_at, visible_at)"
            " SELECT 1, gen_random_uuid(), 'g' || (i % 2000), 'd' || i, jsonb_build_object('i', i), now(), now()"
            " FROM generate_series(1, 20000) AS i"
        )
        conn.execute(
            "INSERT INTO message_groups (queue_id, group_id, available_at)"
            " SELECT 1, 'g' || g, now() - (g || ' seconds')::interval FROM generate_series(0, 1999) AS g"
        )
        conn.execute(
            "INSERT INTO messages (queue_id, message_id, body, sent_at, visible_at)"
            " SELECT 2, gen_random_uuid(), jsonb_build_object('i', i), now(), now() FROM generate_series(1, 20000) AS i"
        )
        conn.execute("ANALYZE")
        yield conn


def plan(conn: Conn, name: str, params: dict[str, Any]) -> dict[str, Any]:
    row = conn.execute("EXPLAIN (FORMAT JSON) " + QUERIES[name].text, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return dict(document[0]["Plan"])


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def scans(tree: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(node type, index name) of every node reading a hot table."""
    return [(n["Node Type"], n.get("Index Name")) for n in nodes(tree) if n.get("Relation Name") in HOT_TABLES]


def assert_index_only(tree: dict[str, Any], *expected: str) -> None:
    found = scans(tree)
    assert found, "the plan reads no hot table at all"
    assert not [s for s in found if s[0] in ("Seq Scan", "Bitmap Heap Scan") and s[1] is None], found
    used = {index for _, index in found if index}
    for index in expected:
        assert index in used, f"{index} not used: {found}"


def test_standard_receive_walks_the_due_index(loaded: Conn) -> None:
    tree = plan(
        loaded,
        "message_receive_standard",
        {"queue_id": 2, "limit": 10, "visibility_timeout": 30, "max_receive_count": None, "now": None},
    )
    assert_index_only(tree, "messages_standard_due_idx")


def test_group_locks_find_rows_by_key(loaded: Conn) -> None:
    assert_index_only(plan(loaded, "group_lock_for_messages", {"queue_id": 1, "ids": [1, 2, 3]}), "messages_pkey")
    params = {"queue_id": 1, "ids": [1], "lease_ids": [uuid.uuid4()], "delays": [0], "errors": [None], "now": None}
    assert_index_only(plan(loaded, "message_nack", params), "messages_pkey")


def test_send_locks_groups_by_key(loaded: Conn) -> None:
    tree = plan(
        loaded, "group_lock_for_send", {"queue_id": 1, "group_ids": ["g1", "new"], "delays": [0, 0], "now": None}
    )
    # An INSERT .. ON CONFLICT reads no hot table by scan; its arbiter is the primary key.
    assert not [s for s in scans(tree) if s[0] == "Seq Scan"]
