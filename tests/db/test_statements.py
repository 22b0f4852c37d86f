"""Every named block and every composed variant is a statement the server parses, and every
statement the repository runs answers the columns its row type names, in order.

The server parses each (a protocol-level Parse, as app.db.prepared prepares the hot ones) in a
session that has a backfill's staging table, which some blocks read. Then it describes the
statements the repository declares (app.db.statements.Statement) and their columns are compared
with their row types' fields: a column added, renamed or moved fails here, not at run time.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import pq

import app.db
from app.db import prepared
from app.db.sql import QUERIES, compose, parse, slots
from app.db.statements import NoRow, Statement

Conn = psycopg.Connection[tuple[Any, ...]]


@pytest.fixture
def staged(db_url: str) -> Iterator[Conn]:
    """A session inside a transaction that has created a backfill's staging table."""
    with psycopg.connect(db_url) as conn:
        conn.execute(QUERIES["message_stage_create"].text)  # type: ignore[arg-type]
        yield conn
        conn.rollback()


def _parse(conn: Conn, name: str, text: str) -> pq.abc.PGresult:
    """Parse `text` on the server as a statement named `name`; the description of its answer."""
    numbered = prepared.statement(name, text)
    result = conn.pgconn.prepare(numbered.name, numbered.text)
    assert result.status == pq.ExecStatus.COMMAND_OK, (name, result.error_message.decode())
    described = conn.pgconn.describe_prepared(numbered.name)
    assert described.status == pq.ExecStatus.COMMAND_OK, (name, described.error_message.decode())
    return described


def test_every_block_and_variant_parses(staged: Conn) -> None:
    variants = [q for q in QUERIES.values() if q.base is not None]
    assert {"message_send", "message_send_fenced", "message_insert_staged", "message_staged_groups"} <= {
        q.name for q in variants
    }
    for query in QUERIES.values():
        _parse(staged, query.name, query.text)


def test_a_variant_fills_the_slots_it_names_and_keeps_the_others() -> None:
    send = QUERIES["message_send"]
    assert send.base == "message_insert" and send.fills == {"entry": "message_entry_json"}
    assert slots(send.text) == ["take_over", "winners", "answer"]
    assert "json_to_recordset" in send.text and "ON CONFLICT" in send.text
    new_keys = QUERIES["message_insert_staged_new_keys"]
    assert "ON CONFLICT" not in new_keys.text and "pqs_staged_entry" in new_keys.text
    assert "SELECT sequence_number FROM claimed" not in new_keys.text
    assert "count(*) AS inserted" in new_keys.text and "WITH inserted AS (SELECT" not in new_keys.text
    fenced = QUERIES["message_send_fenced"]
    assert "pg_advisory_xact_lock_shared" in fenced.text and "json_to_recordset" in fenced.text


def test_a_variant_of_a_missing_slot_or_block_is_refused(tmp_path: Any) -> None:
    blocks, variants = parse(
        "-- name: a\n-- a block\n-- variant: b (x = c)\nSELECT /* slot: x */ 1 /* end slot */ AS n;\n"
        "-- name: c\n-- a part\nSELECT 2;\n"
    )
    assert variants == {"b": ("a", {"x": "c"})}
    assert compose(blocks["a"], {"x": blocks["c"]}).replace("\n", " ").split() == [
        "SELECT",
        "/*",
        "x:",
        "c",
        "*/",
        "SELECT",
        "2",
        "AS",
        "n",
    ]
    with pytest.raises(ValueError, match="no slot"):
        compose(blocks["a"], {"y": blocks["c"]})
    with pytest.raises(ValueError, match="slot = block"):
        parse("-- name: a\n-- a block\n-- variant: b (x)\nSELECT 1;\n")


def _declared() -> Iterator[Statement[Any]]:
    """Every Statement the modules of app.db declare at module level (alone, or in a dict or list)."""
    for module_info in pkgutil.iter_modules(app.db.__path__):
        module = importlib.import_module(f"app.db.{module_info.name}")
        for value in vars(module).values():
            found = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
            yield from (v for v in found if isinstance(v, Statement))


def test_every_statement_answers_its_row_type(staged: Conn) -> None:
    declared = {stmt.name: stmt for stmt in _declared()}
    assert {"message_send_fenced", "message_ack", "queue_get", "message_expire"} <= set(declared)
    for stmt in declared.values():
        described = _parse(staged, stmt.name, stmt.text)
        columns = tuple((described.fname(i) or b"").decode() for i in range(described.nfields))
        if stmt.row is not NoRow:
            assert columns == stmt.fields, stmt.name
