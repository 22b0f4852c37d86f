"""Hot statements over libpq: prepared once per connection, run without psycopg's cursor layer.

Why: measured on the bench machine, psycopg's async `execute` of an already prepared statement
costs ~90 µs of client CPU (cursor, query conversion, adaptation, row factory, its generator
driven wait), whatever the statement; the same statement sent through psycopg's libpq wrapper
(`psycopg.pq`, a documented module) costs ~40 µs. The service runs its hot statements (send,
receive, ack) once per group-commit flush, in the one process that serves every request, so that
difference was a fifth of the service's CPU per message in a round trip.

What: a `Statement` is a named SQL block whose `%(name)s` placeholders are numbered `$1..$n` in
order of first appearance. `rows(conn, statement, params)` prepares it on that connection the
first time it runs there (server side, named `pqs_<block>`), then sends it with its values in
PostgreSQL's text input form (`encode`) and waits on the socket with the event loop. Results come
in PostgreSQL's text output form, decoded by column name (DECODERS) into the values psycopg would
have given (timestamps depend on DateStyle, which the pooled sessions set to ISO). A PostgreSQL
error is raised as psycopg's own exception class (`psycopg.errors.error_from_result`), a lost
connection as psycopg's OperationalError, so `app.db.engine` translates both as it does psycopg's.

The connection stays psycopg's: it comes from the pool, nothing else uses it meanwhile, and it is
idle again when the call returns. Cancelled while the statement runs, it is left busy, and the
pool discards it. Only a statement that is its own transaction takes this path: psycopg ends a
rolled-back transaction with `DEALLOCATE ALL`, which drops our statements too, and the error that
tells us so would abort a transaction we ran inside (outside one, the statement is prepared again
and run once more). Inside the caller's transaction the same statement goes through psycopg.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID
from weakref import WeakKeyDictionary

from psycopg import errors, pq, sql
from psycopg.rows import tuple_row

from app.db.rows import Conn

Value = bytes | None
Row = tuple[Value, ...]

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# Raised when a connection no longer has a statement we prepared on it (DISCARD ALL,
# DEALLOCATE ALL by someone else): it is prepared again, once.
_NO_SUCH_STATEMENT = "26000"
_OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)


@dataclass(frozen=True, slots=True)
class Statement:
    """A hot statement: its server-side name, its text with $n parameters, their names, and its
    text as psycopg takes it (for a run inside a transaction)."""

    name: bytes
    text: bytes
    params: tuple[str, ...]
    source: sql.SQL


def statement(name: str, text: str) -> Statement:
    """The SQL `text` (psycopg's %(name)s placeholders) as Statement `name`."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in order:
            order.append(match[1])
        return f"${order.index(match[1]) + 1}"

    numbered = _PLACEHOLDER.sub(number, text)
    if "%" in numbered.replace("%%", ""):
        raise ValueError(f"statement {name!r} has a placeholder that is not %(name)s")
    return Statement(f"pqs_{name}".encode(), numbered.replace("%%", "%").encode(), tuple(order), sql.SQL(text))


# Per connection, the statements prepared on it. Keyed by psycopg's PGconn: a reconnection is a new
# PGconn, with nothing prepared.
_prepared: WeakKeyDictionary[pq.abc.PGconn, set[bytes]] = WeakKeyDictionary()


async def execute(conn: Conn, stmt: Statement, values: Sequence[Value]) -> tuple[tuple[str, ...], list[Row]]:
    """Run `stmt` on `conn` with `values` (text, in `stmt.params` order); its column names and rows."""
    pgconn = conn.pgconn
    names = _prepared.get(pgconn)
    if names is None:
        names = _prepared[pgconn] = set()
    for attempt in (1, 2):
        if stmt.name not in names:
            pgconn.send_prepare(stmt.name, stmt.text)
            _check(await _result(pgconn), pgconn)
            names.add(stmt.name)
        pgconn.send_query_prepared(stmt.name, values)
        result = await _result(pgconn)
        if result.status in _OK:
            return tuple((result.fname(i) or b"").decode() for i in range(result.nfields)), _rows(result)
        error = errors.error_from_result(result, encoding=_encoding(pgconn))
        if error.sqlstate == _NO_SUCH_STATEMENT and attempt == 1:
            names.clear()  # a DEALLOCATE ALL dropped every statement of ours on this connection
            continue
        raise error
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _rows(result: pq.abc.PGresult) -> list[Row]:
    value = result.get_value
    width = range(result.nfields)
    return [tuple(value(row, column) for column in width) for row in range(result.ntuples)]


def _check(result: pq.abc.PGresult, pgconn: pq.abc.PGconn) -> None:
    if result.status not in _OK:
        raise errors.error_from_result(result, encoding=_encoding(pgconn))


def _encoding(pgconn: pq.abc.PGconn) -> str:
    # The pool's connections speak UTF8 (psycopg's default); the name PostgreSQL gives it is not a
    # Python codec name.
    client = pgconn.parameter_status(b"client_encoding")
    return "utf-8" if client in (None, b"UTF8") else client.decode()


async def _result(pgconn: pq.abc.PGconn) -> pq.abc.PGresult:
    """Send what libpq holds for the server, then the statement's result (the last one, as a
    multi-result answer never comes from one prepared statement)."""
    loop = asyncio.get_running_loop()
    while pgconn.flush():  # a large send (a 1,000-message batch) may not go out at once
        await _ready(loop, pgconn.socket, write=True)
    last: pq.abc.PGresult | None = None
    while True:
        pgconn.consume_input()
        while not pgconn.is_busy():
            result = pgconn.get_result()
            if result is None:
                if last is None:  # pragma: no cover - libpq answers every sent statement
                    raise errors.InternalError("no result from the server")
                return last
            last = result
        await _ready(loop, pgconn.socket)


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, *, write: bool = False) -> None:
    """Wait until the socket can be read (or written)."""
    future: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not future.done():
            future.set_result(None)

    if write:
        loop.add_writer(fd, wake)
        try:
            await future
        finally:
            loop.remove_writer(fd)
    else:
        loop.add_reader(fd, wake)
        try:
            await future
        finally:
            loop.remove_reader(fd)


# -- encoding values ------------------------------------------------------------------------------


class JsonText(str):
    """JSON already encoded (canonical text), for a json or jsonb value or array element."""

    __slots__ = ()


def encode(value: object) -> Value:
    """A parameter in PostgreSQL's text input form: None is NULL, a list a one-dimensional array."""
    if value is None:
        return None
    if isinstance(value, bool):  # before int: a bool is an int
        return b"t" if value else b"f"
    if isinstance(value, bytes):
        return value
    if isinstance(value, datetime):
        return value.isoformat().encode()
    if isinstance(value, list | tuple):
        return ("{" + ",".join(_element(v) for v in value) + "}").encode()
    return str(value).encode()  # int, str, UUID, JsonText


def _element(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int | UUID) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):  # text or JsonText: quoted, with backslashes and quotes escaped
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"no array element form for {type(value).__name__}")


def _boolean(value: bytes) -> bool:
    return value == b"t"


def _uuid(value: bytes) -> UUID:
    return UUID(value.decode())


def _timestamp(value: bytes) -> datetime:
    return datetime.fromisoformat(value.decode())


# How each column the hot statements answer with is read from PostgreSQL's text output.
DECODERS: dict[str, Callable[[bytes], Any]] = {
    "id": int,
    "ord": int,
    "slot": int,
    "receive_count": int,
    "dead": _boolean,
    "inserted": _boolean,
    "woke": _boolean,
    "message_id": _uuid,
    "lease_id": _uuid,
    "body": json.loads,
    "attributes": json.loads,
    "group_id": bytes.decode,
    "dedup_id": bytes.decode,
    "sent_at": _timestamp,
    "first_received_at": _timestamp,
    "seconds": float,
}


async def rows(conn: Conn, stmt: Statement, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Run `stmt` with its named `params`; the rows as dicts of Python values (DECODERS). Inside
    a transaction block, through psycopg (see the module docstring)."""
    if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        cursor = await conn.execute(stmt.source, _psycopg_values(params))
        return await cursor.fetchall() if cursor.description else []
    columns, found = await execute(conn, stmt, [encode(params[name]) for name in stmt.params])
    return [dict(zip(columns, values, strict=True)) for values in _decoded(columns, found)]


async def tuples(conn: Conn, stmt: Statement, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """As rows(), but each row a tuple in the statement's column order: for answers of a row per
    entry of a large batch, where building a dict per row was most of the cost (a send of 1,000:
    about 2.9 ms of dicts against 0.8 ms)."""
    if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        cursor = conn.cursor(row_factory=tuple_row)
        await cursor.execute(stmt.source, _psycopg_values(params))
        return await cursor.fetchall() if cursor.description else []
    columns, found = await execute(conn, stmt, [encode(params[name]) for name in stmt.params])
    return _decoded(columns, found)


def _psycopg_values(params: dict[str, Any]) -> dict[str, Any]:
    # psycopg adapts bytes as bytea: a JSON document goes as text.
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in params.items()}


def _decoded(columns: Sequence[str], found: list[Row]) -> list[tuple[Any, ...]]:
    """The rows' text values decoded column by column (one decoder call per value, no per-row
    dispatch); NULL stays None."""
    if not found:
        return []
    decoded = [
        list(map(DECODERS[column], values))
        if None not in values
        else [None if value is None else DECODERS[column](value) for value in values]
        for column, values in zip(columns, zip(*found, strict=True), strict=True)
    ]
    return list(zip(*decoded, strict=True))
