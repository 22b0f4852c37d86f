"""Connections of their own, outside the pool: for the CLI and the bench (`on_connection`), the
maintenance leader's session, and the wake-up listener and publisher of a service process.

They are made as the pool's are (dict rows, autocommit: a transaction only where one is opened)
but without its session settings. One statement here is hot: the publisher's NOTIFY round, sent
up to 200 times a second under load; it runs prepared (app.db.prepared), which the publisher's
connection allows since it always goes straight to the server (`direct_url`), never through a
transaction pooler.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import NamedTuple, TypeVar

import psycopg
from psycopg.rows import dict_row

from app.db.rows import Conn
from app.db.statements import NoRow, execute, fetch_one, statement

T = TypeVar("T")
# The channel of wake-ups (queries: queue_wake, queue_wake_many, queue_listen).
CHANNEL = "pqs_queue"


class Leader(NamedTuple):
    """Whether this session took the maintenance leader's lock."""

    leader: bool


_WAKE_MANY = statement("queue_wake_many", NoRow, hot=True)
_LISTEN = statement("queue_listen", NoRow)
_TRY_LEAD = statement("maintenance_try_lead", Leader)
_STILL_LEAD = statement("maintenance_still_lead", NoRow)


async def connect(url: str) -> Conn:
    """A new connection of its own (close it, or use it as an async context manager)."""
    return await psycopg.AsyncConnection.connect(url, row_factory=dict_row, autocommit=True)


@asynccontextmanager
async def session(url: str) -> AsyncIterator[Conn]:
    """A connection of its own for the block, closed after it."""
    async with await connect(url) as conn:
        yield conn


async def on_connection(url: str, work: Callable[[Conn], Awaitable[T]]) -> T:
    """Run `work` in one transaction on a connection of its own (for the CLI and the bench)."""
    async with session(url) as conn, conn.transaction():
        return await work(conn)


def backend_pid(conn: Conn) -> int:
    """The server process of the session (who sent a NOTIFY)."""
    return conn.info.backend_pid


async def wake_queues(conn: Conn, queue_ids: Sequence[int]) -> None:
    """Send one wake-up per queue to every listening process."""
    await execute(conn, _WAKE_MANY, {"queue_ids": list(queue_ids)})


async def listen(conn: Conn) -> None:
    """Receive every process's wake-ups on this session from now on (see wake_ups)."""
    await execute(conn, _LISTEN)


async def wake_ups(conn: Conn) -> AsyncIterator[tuple[int, str]]:
    """The wake-ups a listening session receives, as they come: (sender's backend pid, payload)."""
    async for note in conn.notifies():
        yield note.pid, note.payload


async def try_lead(conn: Conn, key: int) -> bool:
    """Take the session advisory lock `key` if no other session holds it."""
    row = await fetch_one(conn, _TRY_LEAD, {"key": key})
    return bool(row and row.leader)


async def still_lead(conn: Conn) -> None:
    """Use the leader's session, so that a lost one shows (its lock went with it)."""
    await execute(conn, _STILL_LEAD)
