"""app.db.prepared: hot statements run over libpq on a pooled connection, against a real server.

What a repository function relies on: values go in as PostgreSQL reads them and come back as
psycopg would have given them; errors are psycopg's classes with their diagnostics; a large
parameter is sent whole; and the connection is left as psycopg expects it, usable by psycopg itself
afterwards. And the record of what is prepared stays the server's: psycopg prepares nothing on a
pooled connection (so no DEALLOCATE ALL of its own after a rollback), a statement dropped behind
our back is prepared again alone, and a name taken on the connection is replaced by ours.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID, uuid4

import pytest
import pytest_asyncio
from psycopg import errors
from psycopg.types.json import Jsonb

from app.db import prepared
from app.db.engine import Database
from app.db.queues import queue_get, queue_insert
from app.db.rows import Conn
from app.db.sql import QUERIES
from app.domain import DeadLetter, QueueAttributes


async def tuples(conn: Conn, stmt: prepared.Statement, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The statement's rows, decoded as app.db.statements decodes them, each a tuple in column order."""
    columns, found = await prepared.execute(conn, stmt, [prepared.encode(params[p]) for p in stmt.params])
    return prepared.decoded(columns, found)


async def rows(conn: Conn, stmt: prepared.Statement, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The statement's rows as dicts of column name -> decoded value (to compare with psycopg's)."""
    columns, found = await prepared.execute(conn, stmt, [prepared.encode(params[p]) for p in stmt.params])
    return [dict(zip(columns, values, strict=True)) for values in prepared.decoded(columns, found)]


@pytest_asyncio.fixture
async def conn(db: Database) -> AsyncIterator[Conn]:
    async with db.connection() as connection:
        yield connection


def test_placeholders_are_numbered_in_order_of_first_use() -> None:
    stmt = prepared.statement("x", "SELECT %(b)s::int + %(a)s::int, %(b)s::int, 5 %% 3")
    assert stmt.name == b"pqs_x"
    assert stmt.text == b"SELECT $1::int + $2::int, $1::int, 5 % 3"
    assert stmt.params == ("b", "a")
    with pytest.raises(ValueError, match="placeholder"):
        prepared.statement("y", "SELECT %s")


async def test_values_arrive_as_postgresql_reads_them(conn: Conn) -> None:
    lease = uuid4()
    tricky = ['a "quoted" \\ value', "{braces, commas}", "NULL", "", "é ✓"]
    now = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    stmt = prepared.statement(
        "values_check",
        "SELECT %(n)s::bigint = 9007199254740993 AS a, %(flag)s::boolean AS b, %(none)s::int IS NULL AS c,"
        " %(now)s::timestamptz = '2026-01-01 21:34:05.678901+00' AS d, %(ids)s::bigint[] = '{1,2,3}' AS e,"
        " %(leases)s::uuid[] = ARRAY[%(lease)s::uuid, NULL] AS f, %(texts)s::text[] AS texts,"
        " %(docs)s::jsonb[] AS docs, %(raw)s::json AS raw",
    )
    docs = [prepared.JsonText(json.dumps({"k": 'v "q" \\ é'})), None, prepared.JsonText("[1, 2]")]
    params = {
        "n": 9007199254740993,
        "flag": True,
        "none": None,
        "now": now,
        "ids": [1, 2, 3],
        "leases": [lease, None],
        "lease": lease,
        "texts": tricky,
        "docs": docs,
        "raw": b'{"x": 1}',
    }
    columns, values = await prepared.execute(conn, stmt, [prepared.encode(params[p]) for p in stmt.params])
    answer = {column: value for column, [value] in zip(columns, values, strict=True)}  # one row
    assert [answer[c] for c in "abcdef"] == [b"t"] * 6
    # Read back by psycopg: the same text array and the same JSON documents.
    expected_docs = [None if d is None else Jsonb(json.loads(d)) for d in docs]
    check = await conn.execute(
        "SELECT %s::text[] = %s::text[] AS texts, %s::jsonb[] = %s::jsonb[] AS docs",
        (answer["texts"].decode(), tricky, answer["docs"].decode(), expected_docs),
    )
    assert await check.fetchone() == {"texts": True, "docs": True}


async def test_rows_decode_as_psycopg_would(conn: Conn) -> None:
    sql = (
        "SELECT 7::bigint AS id, 3 AS receive_count, true AS dead, false AS inserted, %(m)s::uuid AS message_id,"
        ' NULL::uuid AS lease_id, \'{"b": [1, 2.5, "x"], "a": null}\'::jsonb AS body, \'g ✓\' AS group_id,'
        " NULL::text AS dedup_id, %(t)s::timestamptz AS sent_at, 1.25::float8 AS seconds"
    )
    params = {"m": uuid4(), "t": datetime(2026, 5, 6, 7, 8, 9, 10, tzinfo=UTC)}
    [ours] = await rows(conn, prepared.statement("decode_check", sql), params)
    cursor = await conn.execute(sql, params)
    assert ours == await cursor.fetchone()
    assert isinstance(ours["message_id"], UUID)


async def test_a_queue_row_decodes_as_psycopg_would(conn: Conn) -> None:
    # queue_get reads `q.*`: a column added to `queues` needs its decoder (DECODERS), or this fails.
    assert await queue_insert(conn, "dlq", QueueAttributes(deduplication_scope="group"), None)
    dlq = await queue_get(conn, "dlq")
    assert dlq is not None
    assert await queue_insert(conn, "source", QueueAttributes(dead_letter=DeadLetter("dlq", 3)), dlq.id)
    stmt = prepared.statement("queue_check", QUERIES["queue_get"].text)
    for name in ("dlq", "source"):
        cursor = await conn.execute(QUERIES["queue_get"].sql, {"name": name})
        assert await rows(conn, stmt, {"name": name}) == [await cursor.fetchone()]


async def test_tuples_are_the_rows_in_column_order_in_and_out_of_a_transaction(conn: Conn) -> None:
    # Several rows with a NULL in some of them (columns are decoded one at a time).
    stmt = prepared.statement(
        "tuples_check",
        "SELECT i AS ord, CASE WHEN i %% 2 = 0 THEN i * 10 END AS id, i > 1 AS inserted, 'g' || i AS group_id"
        " FROM generate_series(1, %(n)s::int) AS i ORDER BY i",
    )
    expected = [(i, i * 10 if i % 2 == 0 else None, i > 1, f"g{i}") for i in range(1, 5)]
    assert await tuples(conn, stmt, {"n": 4}) == expected
    assert [tuple(row.values()) for row in await rows(conn, stmt, {"n": 4})] == expected
    assert await tuples(conn, stmt, {"n": 0}) == []
    async with conn.transaction():
        assert await tuples(conn, stmt, {"n": 4}) == expected


async def test_errors_are_psycopg_errors_with_their_diagnostics(conn: Conn) -> None:
    await conn.execute("CREATE TEMPORARY TABLE error_check (id int CONSTRAINT error_check_key PRIMARY KEY)")
    stmt = prepared.statement("error_check", "INSERT INTO error_check (id) VALUES (%(id)s)")
    await rows(conn, stmt, {"id": 1})
    with pytest.raises(errors.UniqueViolation) as caught:
        await rows(conn, stmt, {"id": 1})
    assert caught.value.diag.constraint_name == "error_check_key"
    # The connection is idle again and psycopg can use it.
    cursor = await conn.execute("SELECT count(*) AS n FROM error_check")
    assert await cursor.fetchone() == {"n": 1}


async def on_server(conn: Conn) -> frozenset[str]:
    """The names of the statements prepared on `conn`'s session."""
    cursor = await conn.execute("SELECT name FROM pg_prepared_statements")
    return frozenset(row["name"] for row in await cursor.fetchall())


async def test_a_statement_the_server_forgot_is_prepared_again(conn: Conn) -> None:
    stmt = prepared.statement("forgotten", "SELECT %(x)s::int + 1 AS id")
    assert await rows(conn, stmt, {"x": 1}) == [{"id": 2}]
    await conn.execute("DEALLOCATE ALL")
    assert await rows(conn, stmt, {"x": 2}) == [{"id": 3}]
    assert prepared.recorded(conn) == await on_server(conn) == {"pqs_forgotten"}


async def test_a_miss_heals_that_statement_and_keeps_the_record_of_the_others(conn: Conn) -> None:
    # A miss of one statement once made the record forget them all, including one prepared again
    # after the drop, which from then on failed with "already exists".
    first = prepared.statement("heal_first", "SELECT %(x)s::int + 1 AS id")
    second = prepared.statement("heal_second", "SELECT %(x)s::int + 2 AS id")
    assert await rows(conn, first, {"x": 0}) == [{"id": 1}]
    assert await rows(conn, second, {"x": 0}) == [{"id": 2}]
    await conn.execute("DEALLOCATE pqs_heal_first")
    for x in (1, 2):
        assert await rows(conn, first, {"x": x}) == [{"id": x + 1}]
        assert await rows(conn, second, {"x": x}) == [{"id": x + 2}]
        assert prepared.recorded(conn) == await on_server(conn) == {"pqs_heal_first", "pqs_heal_second"}
    await conn.execute("DEALLOCATE ALL")  # both gone: each heals on its own next run
    assert await rows(conn, second, {"x": 3}) == [{"id": 5}]
    assert await rows(conn, first, {"x": 3}) == [{"id": 4}]
    assert prepared.recorded(conn) == await on_server(conn)


async def test_a_name_taken_on_the_connection_is_replaced_by_ours(conn: Conn) -> None:
    await conn.execute("PREPARE pqs_taken AS SELECT 0 AS id")
    stmt = prepared.statement("taken", "SELECT %(x)s::int + 1 AS id")
    for x in (1, 2):  # not once, and not a lasting "already exists"
        assert await rows(conn, stmt, {"x": x}) == [{"id": x + 1}]
    assert prepared.recorded(conn) == await on_server(conn) == {"pqs_taken"}


async def test_a_large_parameter_is_sent_whole(conn: Conn) -> None:
    payload = json.dumps([{"i": i, "pad": "x" * 100} for i in range(40_000)]).encode()  # ~4.7 MB
    stmt = prepared.statement(
        "large_check", "SELECT json_array_length(%(doc)s::json) AS id, octet_length(%(doc)s::text) AS receive_count"
    )
    assert await rows(conn, stmt, {"doc": payload}) == [{"id": 40_000, "receive_count": len(payload)}]


async def test_psycopg_prepares_nothing_on_a_pooled_connection(conn: Conn) -> None:
    # By default psycopg prepares a statement on its sixth run; on the pool's connections it must
    # not, or its DEALLOCATE ALL after a rollback would drop ours (module docstring).
    ours = prepared.statement("beside", "SELECT %(x)s::int AS id")
    assert await rows(conn, ours, {"x": 1}) == [{"id": 1}]
    for _ in range(10):
        cursor = await conn.execute("SELECT %(x)s::int AS id", {"x": 2})
        assert await cursor.fetchone() == {"id": 2}
    assert await rows(conn, ours, {"x": 3}) == [{"id": 3}]
    assert prepared.recorded(conn) == await on_server(conn) == {"pqs_beside"}


async def test_a_rollback_keeps_our_statements(conn: Conn) -> None:
    stmt = prepared.statement("after_rollback", "SELECT %(x)s::int * 2 AS id")
    assert await rows(conn, stmt, {"x": 1}) == [{"id": 2}]
    for _ in range(10):
        await conn.execute("SELECT 1")
    with pytest.raises(ZeroDivisionError):
        async with conn.transaction():
            await conn.execute("SELECT 1")
            raise ZeroDivisionError
    assert prepared.recorded(conn) == await on_server(conn) == {"pqs_after_rollback"}
    assert await rows(conn, stmt, {"x": 3}) == [{"id": 6}]


async def test_a_statement_prepared_in_a_transaction_outlives_its_rollback(conn: Conn) -> None:
    stmt = prepared.statement("in_transaction", "SELECT %(x)s::int * 3 AS id")
    with pytest.raises(ZeroDivisionError):
        async with conn.transaction():
            assert await rows(conn, stmt, {"x": 1}) == [{"id": 3}]
            cursor = await conn.execute("SELECT 1 AS id")  # psycopg goes on in the same transaction
            assert await cursor.fetchone() == {"id": 1}
            raise ZeroDivisionError
    assert prepared.recorded(conn) == await on_server(conn) == {"pqs_in_transaction"}
    async with conn.transaction():
        assert await rows(conn, stmt, {"x": 2}) == [{"id": 6}]


async def test_in_a_transaction_a_dropped_statement_aborts_it_and_is_healed(conn: Conn) -> None:
    stmt = prepared.statement("dropped_in_transaction", "SELECT %(x)s::int + 10 AS id")
    assert await rows(conn, stmt, {"x": 1}) == [{"id": 11}]
    await conn.execute("DEALLOCATE pqs_dropped_in_transaction")
    with pytest.raises(errors.InvalidSqlStatementName):
        async with conn.transaction():
            await rows(conn, stmt, {"x": 2})
    assert prepared.recorded(conn) == await on_server(conn) == set()
    async with conn.transaction():
        assert await rows(conn, stmt, {"x": 3}) == [{"id": 13}]
    assert prepared.recorded(conn) == await on_server(conn) == {"pqs_dropped_in_transaction"}


async def test_in_a_transaction_a_taken_name_aborts_it_and_is_replaced_even_if_gone_meanwhile(conn: Conn) -> None:
    stmt = prepared.statement("taken_in_transaction", "SELECT %(x)s::int + 20 AS id")
    await conn.execute("PREPARE pqs_taken_in_transaction AS SELECT 0 AS id")
    with pytest.raises(errors.DuplicatePreparedStatement):
        async with conn.transaction():
            await rows(conn, stmt, {"x": 1})
    await conn.execute("DEALLOCATE pqs_taken_in_transaction")  # before ours could replace it
    assert await rows(conn, stmt, {"x": 2}) == [{"id": 22}]
    assert prepared.recorded(conn) == await on_server(conn) == {"pqs_taken_in_transaction"}


async def test_the_engine_runs_again_a_transaction_that_met_a_statement_gone_or_taken(db_url: str) -> None:
    database = Database(db_url, min_size=1, max_size=1)  # one connection: the one the statements are on
    await database.open()
    try:
        stmt = prepared.statement("retried", "SELECT %(x)s::int + 1 AS id")
        runs = 0

        async def work(conn: Conn) -> list[dict[str, object]]:
            nonlocal runs
            runs += 1
            return await rows(conn, stmt, {"x": runs})

        async with database.connection() as conn:
            await conn.execute("PREPARE pqs_retried AS SELECT 0 AS id")  # the name taken
        assert await database.run(work) == [{"id": 3}]
        assert runs == 2
        async with database.connection() as conn:
            await conn.execute("DEALLOCATE pqs_retried")  # the statement gone
        assert await database.run(work) == [{"id": 5}]
        assert runs == 4
        async with database.connection() as conn:
            assert prepared.recorded(conn) == await on_server(conn) == {"pqs_retried"}
    finally:
        await database.close()
