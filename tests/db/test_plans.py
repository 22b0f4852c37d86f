"""The hot queries are index-driven: their plans must not scan the message or group tables.

A backlog is preloaded with generate_series (20k messages over 2,000 groups, plus 20k in a
standard queue), the tables analysed, and each hot query EXPLAINed with real parameters.
An index regression (a dropped index, a rewritten predicate) fails here.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.adapt import PyFormat, Transformer

from app.db.engine import PLAN_CACHE_MODE
from app.db.messages import message_insert_text
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


PlanOf = Callable[[Conn, str, dict[str, Any]], dict[str, Any]]
# A standard queue's send as the repository composes it (message_insert of the JSON entries,
# behind the send fence).
SEND = "send"


def statement(name: str) -> str:
    """The SQL text of a named block, or of the composed send statement."""
    return message_insert_text(fenced=True) if name == SEND else QUERIES[name].text


def custom_plan(conn: Conn, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The plan for these very values (what an unprepared statement gets)."""
    row = conn.execute("EXPLAIN (FORMAT JSON) " + statement(name), params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return dict(document[0]["Plan"])


def generic_plan(conn: Conn, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The one plan a pooled session uses for the prepared statement, whatever the values
    (the service's plan_cache_mode): PREPARE it with $n parameters and EXPLAIN EXECUTE it."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in order:
            order.append(match[1])
        return f"${order.index(match[1]) + 1}"

    text = re.sub(r"%\((\w+)\)s", number, statement(name))
    values = [params[key] for key in order]
    # Declared with the types psycopg sends for these values (0: none, the server infers it).
    dumper = Transformer(conn)
    dumper.dump_sequence(values, [PyFormat.AUTO] * len(values))
    known = [oid for oid in dumper.types if oid]
    names = dict(conn.execute("SELECT o, o::regtype::text FROM unnest(%s::oid[]) AS o", (known,)).fetchall())
    declared = ", ".join("unknown" if oid == 0 else names[oid] for oid in dumper.types)
    conn.execute(f"PREPARE plan_check({declared}) AS {text}")  # type: ignore[arg-type]
    try:
        conn.execute(f"SET plan_cache_mode = {PLAN_CACHE_MODE}")  # type: ignore[arg-type]
        # EXECUTE takes no bind parameters: the values go in as literals.
        arguments = sql.SQL(", ").join(sql.Literal(value) for value in values)
        row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE plan_check({})").format(arguments)).fetchone()
    finally:
        conn.execute("RESET plan_cache_mode")
        conn.execute("DEALLOCATE plan_check")
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return dict(document[0]["Plan"])


@pytest.fixture(params=["custom", "generic"])
def plan(request: pytest.FixtureRequest) -> PlanOf:
    """Each plan check runs on the plan for the given values and on the generic plan."""
    return custom_plan if request.param == "custom" else generic_plan


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


def test_standard_receive_walks_the_due_index(loaded: Conn, plan: PlanOf) -> None:
    tree = plan(
        loaded,
        "message_receive_standard",
        {"queue_id": 2, "limit": 10, "visibility_timeout": 30, "max_receive_count": None, "now": None},
    )
    assert_index_only(tree, "messages_standard_due_idx")


def test_group_locks_find_rows_by_key(loaded: Conn, plan: PlanOf) -> None:
    assert_index_only(plan(loaded, "group_lock_for_messages", {"queue_id": 1, "ids": [1, 2, 3]}), "messages_pkey")
    params = {"queue_id": 1, "ids": [1], "lease_ids": [uuid.uuid4()], "delays": [0], "errors": [None], "now": None}
    assert_index_only(plan(loaded, "message_nack", params), "messages_pkey")


def test_send_locks_groups_by_key(loaded: Conn, plan: PlanOf) -> None:
    tree = plan(
        loaded, "group_lock_for_send", {"queue_id": 1, "group_ids": ["g1", "new"], "delays": [0, 0], "now": None}
    )
    # An INSERT .. ON CONFLICT reads no hot table by scan; its arbiter is the primary key.
    assert not [s for s in scans(tree) if s[0] == "Seq Scan"]


def test_send_reads_no_hot_table_by_scan(loaded: Conn, plan: PlanOf) -> None:
    # An entry of each kind: plain, and with a dedup id (its claim goes by message_dedup's key).
    entries = json.dumps(
        [
            {"message_id": str(uuid.uuid4()), "body": {"n": 1}},
            {"message_id": str(uuid.uuid4()), "body": 2, "dedup_id": "d-1", "scope_key": ""},
        ]
    )
    tree = plan(loaded, SEND, {"lock_class": 1, "queue_id": 2, "entries": entries, "dedup_window": 300, "now": None})
    scanned = [n.get("Relation Name") for n in nodes(tree) if n["Node Type"] == "Seq Scan"]
    assert not set(scanned) & {*HOT_TABLES, "message_dedup"}, scanned
