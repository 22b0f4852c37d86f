"""Hot statements over libpq: prepared once per connection, run without psycopg's cursor layer.

Why: measured on the bench machine, psycopg's async `execute` of an already prepared statement
costs ~90 µs of client CPU (cursor, query conversion, adaptation, row factory, its generator
driven wait), whatever the statement; the same statement sent through psycopg's libpq wrapper
(`psycopg.pq`, a documented module) costs ~40 µs. The service runs its hot statements (send,
receive, ack) once per group-commit flush, in the one process that serves every request, so that
difference was a fifth of the service's CPU per message in a round trip.

What: a `Statement` is a named SQL block whose `%(name)s` placeholders are numbered `$1..$n` in
order of first appearance. `run(conn, statement, values)` prepares it on that connection the
first time it runs there (server side, named `pqs_<block>`), then sends it with its values in
PostgreSQL's text input form (`encode`) and waits on the socket with the event loop. Results come
in PostgreSQL's text output form, decoded by column name (DECODERS, `decoded`) into the values
psycopg would have given (timestamps in DateStyle ISO, which the pooled sessions set; psycopg, too, reads a
timestamptz only in ISO, so another connection running one of these, a pipeline task's queue
look-up, is no worse off). A PostgreSQL error is raised as psycopg's own exception class
(`psycopg.errors.error_from_result`), a lost connection as psycopg's OperationalError, so
`app.db.engine` translates both as it does psycopg's.

Who owns a connection's prepared statements: this module, alone. psycopg prepares statements of
its own too (`_pg3_*`, on a statement's sixth run on a connection, by default), and whenever it
holds any it ends every rolled-back transaction with `DEALLOCATE ALL` (psycopg/_preparing.py
`clear`, psycopg/transaction.py), which drops ours as well. With two owners, each keeping its own
record of one server-side set, the records drift: ours once forgot a statement it had just
prepared again, and from then on failed to prepare it ("already exists") on every use. So the
pool's connections are made with `prepare_threshold=None` (app.db.engine): psycopg prepares
nothing there and never deallocates, and `_records` is the exact record of what a connection
has. The cost is on psycopg's side: the statements it runs are parsed and planned on every call
(for a nack, measured: ~70 us more than prepared), so those of the per-message paths come here,
in a transaction or not: send (with a FIFO send's queue look-up and group locks), receive, ack,
nack, visibility, and the queue look-up behind the queue cache.

Should a statement still be dropped behind our back (a DEALLOCATE or DISCARD ALL run on the
connection), its next run finds it missing and prepares that one statement again, leaving the
record of the others as it is; a name found taken is deallocated and prepared with our text.
Outside a transaction that happens at once and the statement runs. Inside one, the error has
aborted the transaction: it is raised, the record is healed, and app.db.engine runs the
transaction again (RETRYABLE). Neither ends in a lasting failure.

Behind a transaction pooler (PgBouncer, pool_mode=transaction; PQS_DATABASE_POOLER) a client
connection is not one server session: the next transaction may run on a session that has none
of our statements, and PgBouncer before 1.21 (Debian bookworm ships 1.18) does not carry
protocol-level prepared statements across. A connection marked `unprepared` sends each
statement unnamed instead (Parse, Bind, Execute in one round trip, planned for its values every
time), which any pooler passes through.

The connection stays psycopg's: it comes from the pool, nothing else uses it meanwhile, and it is
idle (or idle in the caller's transaction) again when the call returns; a statement prepared in
a transaction that rolls back stays prepared. Cancelled while the statement runs, the connection
is left busy, and the pool discards it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast
from uuid import UUID
from weakref import WeakKeyDictionary

from psycopg import errors, pq, sql

from app.db.rows import Conn

Value = bytes | None
Column = list[Value]  # a result's values of one column, row by row

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# A statement we prepared is gone from the connection (someone ran DEALLOCATE or DISCARD ALL).
_NO_SUCH_STATEMENT = "26000"
# A statement we have no record of is on the connection (someone prepared it under our name).
_ALREADY_PREPARED = "42P05"
_OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)


@dataclass(frozen=True, slots=True)
class Statement:
    """A hot statement: its server-side name, its text with $n parameters, and their names."""

    name: bytes
    text: bytes
    params: tuple[str, ...]


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
    return Statement(f"pqs_{name}".encode(), numbered.replace("%%", "%").encode(), tuple(order))


@dataclass(slots=True)
class _Record:
    """What this module knows of one connection's prepared statements."""

    # Prepared by us, and not seen gone since.
    prepared: set[bytes] = field(default_factory=set)
    # Found taken by a statement of unknown text: deallocated before ours is prepared.
    taken: set[bytes] = field(default_factory=set)
    # Through a transaction pooler: statements are sent unnamed, nothing is prepared.
    unprepared: bool = False


# Keyed by psycopg's PGconn: a reconnection is a new PGconn, with nothing prepared.
_records: WeakKeyDictionary[pq.abc.PGconn, _Record] = WeakKeyDictionary()


def recorded(conn: Conn) -> frozenset[str]:
    """The names of the statements this module holds as prepared on `conn`."""
    record = _records.get(conn.pgconn)
    return frozenset(name.decode() for name in record.prepared) if record else frozenset()


def unprepared(conn: Conn) -> None:
    """Send statements on `conn` unnamed from now on, preparing none (a connection through a
    transaction pooler, which may hand each transaction to another server session)."""
    _records[conn.pgconn] = _Record(unprepared=True)


async def execute(conn: Conn, stmt: Statement, values: Sequence[Value]) -> tuple[tuple[str, ...], list[Column]]:
    """Run `stmt` on `conn` with `values` (text, in `stmt.params` order); its column names and
    values (`by_column`)."""
    result = await run(conn, stmt, values)
    return columns(result), by_column(result)


async def run(conn: Conn, stmt: Statement, values: Sequence[Value]) -> pq.abc.PGresult:
    """Run `stmt` on `conn` with `values` (text, in `stmt.params` order); libpq's result."""
    pgconn = conn.pgconn
    record = _records.get(pgconn) or _records.setdefault(pgconn, _Record())
    if record.unprepared:
        pgconn.send_query_params(stmt.text, values)
        result = await _result(pgconn)
        if result.status not in _OK:
            raise _error(result, pgconn)
        return result
    if stmt.name not in record.prepared:
        await _prepare(pgconn, stmt, record)
    pgconn.send_query_prepared(stmt.name, values)
    result = await _result(pgconn)
    if result.status not in _OK:
        error = _error(result, pgconn)
        if error.sqlstate != _NO_SUCH_STATEMENT:
            raise error
        # Dropped behind our back: this statement alone is prepared again (another dropped with
        # it is found missing on its own next run). Inside a transaction the error aborted it:
        # raised, for app.db.engine to run the transaction again.
        record.prepared.discard(stmt.name)
        if _in_transaction(pgconn):
            raise error
        await _prepare(pgconn, stmt, record)
        pgconn.send_query_prepared(stmt.name, values)
        result = await _result(pgconn)
        if result.status not in _OK:
            raise _error(result, pgconn)
    return result


def columns(result: pq.abc.PGresult) -> tuple[str, ...]:
    """The names of a result's columns."""
    return tuple((result.fname(i) or b"").decode() for i in range(result.nfields))


async def _prepare(pgconn: pq.abc.PGconn, stmt: Statement, record: _Record) -> None:
    """Prepare `stmt` on the connection and record it. A statement already there under its name
    (prepared behind our back, its text unknown) is replaced by ours: at once outside a
    transaction; inside one, whose error aborted it, when app.db.engine runs it again."""
    if stmt.name in record.taken:
        record.taken.discard(stmt.name)
        pgconn.send_query(sql.SQL("DEALLOCATE {}").format(sql.Identifier(stmt.name.decode())).as_bytes(None))
        result = await _result(pgconn)
        if result.status not in _OK:
            error = _error(result, pgconn)
            # Gone meanwhile, the name is free; but inside a transaction the error aborted it.
            if error.sqlstate != _NO_SUCH_STATEMENT or _in_transaction(pgconn):
                raise error
    pgconn.send_prepare(stmt.name, stmt.text)
    result = await _result(pgconn)
    if result.status not in _OK:
        error = _error(result, pgconn)
        if error.sqlstate != _ALREADY_PREPARED:
            raise error
        record.taken.add(stmt.name)
        if _in_transaction(pgconn):
            raise error
        await _prepare(pgconn, stmt, record)
        return
    record.prepared.add(stmt.name)


def _in_transaction(pgconn: pq.abc.PGconn) -> bool:
    return pgconn.transaction_status != pq.TransactionStatus.IDLE


def by_column(result: pq.abc.PGresult) -> list[Column]:
    """A result's values column by column, each in PostgreSQL's text output form (None: NULL).
    By column, not by row: `decoded` decodes a column at a time, and a row's tuple made from a
    generator cost a frame per row (50 rows of 3 columns: half the time of rows then zip(*rows))."""
    value = result.get_value
    height = range(result.ntuples)
    return [[value(row, column) for row in height] for column in range(result.nfields)]


def _error(result: pq.abc.PGresult, pgconn: pq.abc.PGconn) -> errors.Error:
    return errors.error_from_result(result, encoding=_encoding(pgconn))


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


def _queue_names(value: bytes) -> list[str]:
    """A text[] of queue names: `{a,b}`. Names hold no comma, quote, backslash or space, so an
    element is quoted only when it reads as NULL (`"NULL"`), and the quotes are all to strip."""
    inner = value[1:-1].decode()
    return [name.strip('"') for name in inner.split(",")] if inner else []


def _uuid(value: bytes) -> UUID:
    return UUID(value.decode())


def _timestamp(value: bytes) -> datetime:
    return datetime.fromisoformat(value.decode())


# How each column the hot statements answer with is read from PostgreSQL's text output.
DECODERS: dict[str, Callable[[bytes], Any]] = {
    "id": int,
    "entry": int,
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
    "attribute_types": json.loads,
    "sender_id": bytes.decode,
    "trace_header": bytes.decode,
    "source_queue_id": int,
    "group_id": bytes.decode,
    "dedup_id": bytes.decode,
    "sent_at": _timestamp,
    "first_received_at": _timestamp,
    "seconds": float,
    # A queue row (queue_get).
    "name": bytes.decode,
    "fifo": _boolean,
    "visibility_timeout": int,
    "delay_seconds": int,
    "retention_seconds": int,
    "max_message_bytes": int,
    "receive_wait_seconds": int,
    "content_based_deduplication": _boolean,
    "deduplication_scope": bytes.decode,
    "dead_letter_queue_id": int,
    "dead_letter_queue_name": bytes.decode,
    "max_receive_count": int,
    "created_at": _timestamp,
    "updated_at": _timestamp,
    "dead_letter_for": _queue_names,
}


def decoded(
    columns: Sequence[str], found: list[Column], make: Callable[[Iterable[Any]], Any] | None = None
) -> list[Any]:
    """The rows of `found` (`by_column`'s values), decoded column by column (one decoder call per
    value, no per-row dispatch); NULL stays None. Each row a tuple in the statement's column order, or `make` of
    that tuple's values (app.db.statements: `tuple.__new__` of a row type, one C call per row):
    for answers of a row per entry of a large batch, building a dict per row was most of the cost
    (a send of 1,000: about 2.9 ms of dicts against 0.8 ms)."""
    if not found or not found[0]:
        return []
    decoded = [
        list(map(DECODERS[column], cast(list[bytes], values)))  # no NULL among them
        if None not in values
        else [None if value is None else DECODERS[column](value) for value in values]
        for column, values in zip(columns, found, strict=True)
    ]
    rows = zip(*decoded, strict=True)
    return list(rows) if make is None else list(map(make, rows))
