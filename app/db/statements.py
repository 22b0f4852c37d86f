"""The one way the repository runs SQL: a named statement in, typed rows out.

A `Statement` carries its name (a block of queries/*.sql, or a variant composed from blocks, see
app.db.sql), its text and the type of its rows: a NamedTuple whose fields are the statement's
columns, in order. `fetch` answers the rows, `execute` the number of rows the statement touched.

How it runs is the statement's own business, not the caller's. A hot one (the per-message paths:
send, receive, ack, nack, visibility, the queue look-up) goes through app.db.prepared: prepared
once per pooled connection, sent over libpq, its text answers decoded column by column. Any other
goes through psycopg, planned per call. Either way a row is built as a tuple of the row type
(`tuple.__new__`, one C call per row), not a dict keyed by column name: a send of 1,000 answers
1,000 rows, and building a dict per row was most of that answer's cost. A driver error is
raised translated (app.db.errors).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, NamedTuple, TypeVar

from psycopg import AsyncCursor, errors, sql
from psycopg.abc import Buffer
from psycopg.rows import BaseRowFactory, RowMaker

from app.db import prepared
from app.db.errors import translate
from app.db.rows import Conn
from app.db.sql import QUERIES

R = TypeVar("R", bound=tuple[Any, ...])


class NoRow(NamedTuple):
    """The row type of a statement whose rows, if any, are not read (run with `execute`)."""


class StatementError(Exception):
    """A statement answered other columns than its row type names (a programming error)."""


@dataclass(frozen=True, slots=True, eq=False)
class Statement(Generic[R]):
    """A named statement: its SQL text, its row type, and whether it runs prepared (hot)."""

    name: str
    text: str
    row: type[R]
    hot: bool = False
    fields: tuple[str, ...] = field(init=False)
    sql: sql.SQL = field(init=False)
    prepared: prepared.Statement | None = field(init=False)
    make: Callable[[Iterable[Any]], R] = field(init=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "fields", tuple(getattr(self.row, "_fields", ())))
        set_(self, "sql", sql.SQL(self.text))  # a trusted literal from our own files
        set_(self, "prepared", prepared.statement(self.name, self.text) if self.hot else None)
        set_(self, "make", partial(tuple.__new__, self.row))


def statement(name: str, row: type[R], *, hot: bool = False) -> Statement[R]:
    """The named block or variant `name` of app.db.sql, answering rows of type `row`."""
    return Statement(name, QUERIES[name].text, row, hot)


async def fetch(conn: Conn, stmt: Statement[R], params: Mapping[str, Any]) -> list[R]:
    """Run `stmt` with its named `params`; its rows."""
    try:
        if stmt.prepared is not None:
            values = [prepared.encode(params[p]) for p in stmt.prepared.params]
            result = await prepared.run(conn, stmt.prepared, values)
            if not result.ntuples:
                return []
            columns = prepared.columns(result)
            _check(stmt, columns)
            return prepared.decoded(columns, prepared.by_column(result), stmt.make)
        cursor = conn.cursor(row_factory=_row_factory(stmt))
        await cursor.execute(stmt.sql, params)
        return await cursor.fetchall() if cursor.description else []
    except errors.Error as exc:
        raised = translate(exc)
        if raised is exc:
            raise
        raise raised from exc


async def fetch_one(conn: Conn, stmt: Statement[R], params: Mapping[str, Any]) -> R | None:
    """Run `stmt`; its first row, or None."""
    found = await fetch(conn, stmt, params)
    return found[0] if found else None


async def execute(conn: Conn, stmt: Statement[Any], params: Mapping[str, Any] | None = None) -> int:
    """Run `stmt` for its effect; how many rows it touched (its rows, if any, are not read)."""
    try:
        if stmt.prepared is not None:
            values = [prepared.encode((params or {})[p]) for p in stmt.prepared.params]
            result = await prepared.run(conn, stmt.prepared, values)
            return result.command_tuples or 0
        cursor = await conn.execute(stmt.sql, params)
        return cursor.rowcount
    except errors.Error as exc:
        raised = translate(exc)
        if raised is exc:
            raise
        raise raised from exc


async def copy_in(conn: Conn, stmt: Statement[NoRow], text: Iterable[Buffer | str]) -> None:
    """Run the COPY .. FROM STDIN statement `stmt` with `text` (COPY text format, whole lines per
    chunk)."""
    async with conn.cursor().copy(stmt.sql) as copy:
        for chunk in text:
            await copy.write(chunk)


def _check(stmt: Statement[Any], columns: Sequence[str]) -> None:
    if tuple(columns) != stmt.fields:
        raise StatementError(f"statement {stmt.name} answers {tuple(columns)}, its row type names {stmt.fields}")


def _row_factory(stmt: Statement[R]) -> BaseRowFactory[R]:
    def maker(cursor: AsyncCursor[Any]) -> RowMaker[R]:
        if cursor.description is not None:
            _check(stmt, [column.name for column in cursor.description])
        return stmt.make

    return maker  # type: ignore[return-value]
