"""The server-side functions (receive, ack) cost the same whatever the backlog.

EXPLAIN cannot look inside a PL/pgSQL function, so instead each function is run under
EXPLAIN (ANALYZE, BUFFERS), whose buffer counts include the statements the function runs:
a receive of 10 and the ack of those 10 must touch about as many buffers with 100k messages
in 2,000 groups as with 2k messages in 200 groups. A scan of the message or group table
would grow with the backlog and fail here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from app.db.engine import SESSION_SETTINGS
from app.db.sql import QUERIES
from tests.conftest import create_database, drop_database

Conn = psycopg.Connection[tuple[Any, ...]]
# One worker runs the whole module (pytest-xdist), so its module-scoped loads are made once: spread
# over workers, each would make its own, and again after every run of another module's tests.
pytestmark = pytest.mark.xdist_group("function-cost")


def _load(conn: Conn, groups: int, per_group: int) -> None:
    conn.execute(
        "INSERT INTO queues (id, name, fifo, visibility_timeout, delay_seconds, retention_seconds,"
        " max_message_bytes, receive_wait_seconds, content_based_deduplication, deduplication_scope)"
        " OVERRIDING SYSTEM VALUE VALUES (1, 'f.fifo', true, 30, 0, 345600, 1048576, 0, false, 'queue'),"
        " (2, 's', false, 30, 0, 345600, 1048576, 0, false, 'queue')"
    )
    total = groups * per_group
    conn.execute(
        "INSERT INTO messages (queue_id, message_id, group_id, body, sent_at, visible_at)"
        " SELECT 1, gen_random_uuid(), 'g' || (i %% %s), jsonb_build_object('i', i), now() - interval '1 hour',"
        " now() - interval '1 hour' FROM generate_series(1, %s) AS i",
        (groups, total),
    )
    conn.execute(
        "INSERT INTO message_groups (queue_id, group_id, available_at)"
        " SELECT 1, 'g' || g, now() - interval '1 hour' - (g || ' ms')::interval FROM generate_series(0, %s) AS g",
        (groups - 1,),
    )
    conn.execute(
        "INSERT INTO messages (queue_id, message_id, body, sent_at, visible_at)"
        " SELECT 2, gen_random_uuid(), jsonb_build_object('i', i), now(), now() - interval '1 hour'"
        " FROM generate_series(1, %s) AS i",
        (total,),
    )
    conn.execute("VACUUM ANALYZE")


def _buffers(conn: Conn, sql: str, params: dict[str, Any]) -> int:
    """Shared buffers touched by one statement, run for real under EXPLAIN ANALYZE."""
    row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    top = (row[0] if not isinstance(row[0], str) else json.loads(row[0]))[0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


@pytest.fixture(scope="module")
def loaded_scales(server_url: str, template_db: str) -> Iterator[dict[str, str]]:
    """Names of two databases `_load`ed once per module, small and large, as templates for `scales`:
    a load and its VACUUM ANALYZE took several seconds, a copy of the result a fraction of that."""
    names = {size: f"pqs_t_{uuid.uuid4().hex[:16]}" for size in ("small", "large")}
    try:
        for size, (groups, per_group) in {"small": (200, 10), "large": (2000, 50)}.items():
            with psycopg.connect(create_database(server_url, names[size], template_db), autocommit=True) as conn:
                _load(conn, groups, per_group)
        yield names
    finally:
        for name in names.values():
            drop_database(server_url, name)


@pytest.fixture
def scales(server_url: str, loaded_scales: dict[str, str]) -> Iterator[dict[str, Conn]]:
    """A copy of each loaded database of this test's own (the test receives and acks in them):
    the same pages, statistics and visibility map as the load left."""
    names = {size: f"pqs_t_{uuid.uuid4().hex[:16]}" for size in loaded_scales}
    conns: dict[str, Conn] = {}
    try:
        for size, template in loaded_scales.items():
            conns[size] = psycopg.connect(create_database(server_url, names[size], template), autocommit=True)
        yield conns
    finally:
        for conn in conns.values():
            conn.close()
        for name in names.values():
            drop_database(server_url, name)


def _receive_then_ack(conn: Conn, queue_id: int) -> tuple[int, int]:
    # Warm up: the first call in a session plans the functions' statements.
    conn.execute(
        "SELECT count(*) FROM pqs_finish(%s, 'q', 'acked', '{}', '{}', '{}', NULL, true)", (queue_id,)
    ).fetchone()
    if queue_id == 1:
        sql = "SELECT * FROM pqs_fifo_receive(%(queue_id)s, %(limit)s, %(visibility_timeout)s, NULL, NULL)"
    else:
        sql = QUERIES["message_receive_standard"].text
    params = {"queue_id": queue_id, "limit": 10, "visibility_timeout": 30, "max_receive_count": None, "now": None}
    receive_cost = _buffers(conn, sql, params)
    held = conn.execute(
        "SELECT id, lease_id FROM messages WHERE queue_id = %s AND state = 'in_flight'", (queue_id,)
    ).fetchall()
    assert len(held) == 10
    ack_cost = _buffers(
        conn,
        QUERIES["message_ack"].text,
        {
            "queue_id": queue_id,
            "queue_name": "q",
            "ids": [r[0] for r in held],
            "lease_ids": [r[1] for r in held],
            "results": [None] * 10,
            "now": None,
        },
    )
    assert conn.execute("SELECT count(*) FROM messages WHERE state = 'in_flight'").fetchone() == (0,)
    return receive_cost, ack_cost


def _least_cost(conn: Conn, queue_id: int, tries: int = 3) -> tuple[int, int]:
    """The fewest buffers of a few receive-and-ack rounds: a one-off extra (a page split in an
    index, a hint bit, a concurrent vacuum) is not the statement's cost, while a scan would cost
    as much every round (seen once under a loaded test run: an ack at 230 buffers where 184 is
    usual)."""
    costs = [_receive_then_ack(conn, queue_id) for _ in range(tries)]
    return min(c[0] for c in costs), min(c[1] for c in costs)


@pytest.mark.parametrize("settings", [{}, SESSION_SETTINGS], ids=["postgres-defaults", "pooled-session"])
@pytest.mark.parametrize("queue_id", [1, 2], ids=["fifo", "standard"])
def test_receive_and_ack_cost_does_not_grow_with_the_backlog(
    scales: dict[str, Conn], queue_id: int, settings: dict[str, str]
) -> None:
    # Both ways the functions' statements may be planned: PostgreSQL's defaults, and the pooled
    # sessions' (app.db.engine), where they keep one generic plan each from the first call.
    for conn in scales.values():
        for setting, value in settings.items():
            conn.execute(f"SET {setting} = {value}")  # type: ignore[arg-type]
    small = _least_cost(scales["small"], queue_id)
    large = _least_cost(scales["large"], queue_id)
    for step, low, high in zip(("receive", "ack"), small, large, strict=True):
        assert high <= 1.5 * low + 30, f"{step}: {low} buffers at 2k messages but {high} at 100k"
    print(f"buffers (receive, ack): 2k messages {small}, 100k messages {large}")
