"""app.db.prepared: hot statements run over libpq on a pooled connection, against a real server.

What a repository function relies on: values go in as PostgreSQL reads them and come back as
psycopg would have given them; errors are psycopg's classes with their diagnostics; a statement
the server forgot is prepared again; a large parameter is sent whole; and the connection is left
as psycopg expects it, usable by psycopg itself afterwards.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID, uuid4

import pytest
import pytest_asyncio
from psycopg import errors
from psycopg.types.json import Jsonb

from app.db import prepared
from app.db.engine import Database
from app.db.rows import Conn


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
    columns, [row] = await prepared.execute(conn, stmt, [prepared.encode(params[p]) for p in stmt.params])
    answer = dict(zip(columns, row, strict=True))
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
    [ours] = await prepared.rows(conn, prepared.statement("decode_check", sql), params)
    cursor = await conn.execute(sql, params)
    assert ours == await cursor.fetchone()
    assert isinstance(ours["message_id"], UUID)


async def test_tuples_are_the_rows_in_column_order_in_and_out_of_a_transaction(conn: Conn) -> None:
    # Several rows with a NULL in some of them (columns are decoded one at a time).
    stmt = prepared.statement(
        "tuples_check",
        "SELECT i AS ord, CASE WHEN i %% 2 = 0 THEN i * 10 END AS id, i > 1 AS inserted, 'g' || i AS group_id"
        " FROM generate_series(1, %(n)s::int) AS i ORDER BY i",
    )
    expected = [(i, i * 10 if i % 2 == 0 else None, i > 1, f"g{i}") for i in range(1, 5)]
    assert await prepared.tuples(conn, stmt, {"n": 4}) == expected
    assert [tuple(row.values()) for row in await prepared.rows(conn, stmt, {"n": 4})] == expected
    assert await prepared.tuples(conn, stmt, {"n": 0}) == []
    async with conn.transaction():  # through psycopg
        assert await prepared.tuples(conn, stmt, {"n": 4}) == expected


async def test_errors_are_psycopg_errors_with_their_diagnostics(conn: Conn) -> None:
    await conn.execute("CREATE TEMPORARY TABLE error_check (id int CONSTRAINT error_check_key PRIMARY KEY)")
    stmt = prepared.statement("error_check", "INSERT INTO error_check (id) VALUES (%(id)s)")
    await prepared.rows(conn, stmt, {"id": 1})
    with pytest.raises(errors.UniqueViolation) as caught:
        await prepared.rows(conn, stmt, {"id": 1})
    assert caught.value.diag.constraint_name == "error_check_key"
    # The connection is idle again and psycopg can use it.
    cursor = await conn.execute("SELECT count(*) AS n FROM error_check")
    assert await cursor.fetchone() == {"n": 1}


async def test_a_statement_the_server_forgot_is_prepared_again(conn: Conn) -> None:
    stmt = prepared.statement("forgotten", "SELECT %(x)s::int + 1 AS id")
    assert await prepared.rows(conn, stmt, {"x": 1}) == [{"id": 2}]
    await conn.execute("DEALLOCATE ALL")
    assert await prepared.rows(conn, stmt, {"x": 2}) == [{"id": 3}]


async def test_a_large_parameter_is_sent_whole(conn: Conn) -> None:
    payload = json.dumps([{"i": i, "pad": "x" * 100} for i in range(40_000)]).encode()  # ~4.7 MB
    stmt = prepared.statement(
        "large_check", "SELECT json_array_length(%(doc)s::json) AS id, octet_length(%(doc)s::text) AS receive_count"
    )
    assert await prepared.rows(conn, stmt, {"doc": payload}) == [{"id": 40_000, "receive_count": len(payload)}]


async def test_psycopg_prepares_its_own_statements_beside_ours(conn: Conn) -> None:
    ours = prepared.statement("beside", "SELECT %(x)s::int AS id")
    assert await prepared.rows(conn, ours, {"x": 1}) == [{"id": 1}]
    for _ in range(6):  # psycopg prepares a statement after its fifth run on a connection
        cursor = await conn.execute("SELECT %(x)s::int AS id", {"x": 2})
        assert await cursor.fetchone() == {"id": 2}
    assert await prepared.rows(conn, ours, {"x": 3}) == [{"id": 3}]
    cursor = await conn.execute("SELECT name FROM pg_prepared_statements ORDER BY name")
    names = [row["name"] for row in await cursor.fetchall()]
    assert "pqs_beside" in names and any(name.startswith("_pg3_") for name in names), names


async def test_statements_survive_psycopg_dropping_them_after_a_rollback(conn: Conn) -> None:
    # psycopg ends a rolled-back transaction with DEALLOCATE ALL when it has prepared statements of
    # its own (after a statement's fifth run), which drops ours too.
    stmt = prepared.statement("after_rollback", "SELECT %(x)s::int * 2 AS id")
    assert await prepared.rows(conn, stmt, {"x": 1}) == [{"id": 2}]
    for _ in range(6):
        await conn.execute("SELECT 1")
    with pytest.raises(ZeroDivisionError):
        async with conn.transaction():
            await conn.execute("SELECT 1")
            raise ZeroDivisionError
    cursor = await conn.execute("SELECT count(*) AS n FROM pg_prepared_statements WHERE name = 'pqs_after_rollback'")
    assert await cursor.fetchone() == {"n": 0}
    # Inside a transaction the statement goes through psycopg, and the transaction is not aborted.
    async with conn.transaction():
        assert await prepared.rows(conn, stmt, {"x": 2}) == [{"id": 4}]
        cursor = await conn.execute("SELECT 1 AS id")
        assert await cursor.fetchone() == {"id": 1}
    # Outside one, it is prepared again.
    assert await prepared.rows(conn, stmt, {"x": 3}) == [{"id": 6}]
