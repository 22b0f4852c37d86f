"""Backlogs written straight into the tables with generate_series: millions of messages in seconds
instead of minutes of HTTP sends, so the consume side is measured on its own.

Rows look like sends made them: sequence numbers from `message_seq` in order, `ready`, due now
(sent a little apart, oldest first), and for FIFO a `message_groups` row per group that is
available from its head's due time (or keeps its place when it already has messages).
"""

from __future__ import annotations

import contextlib
import time

import psycopg

# Split big backlogs so that no single statement holds millions of rows in one transaction.
CHUNK_ROWS = 1_000_000
# Rows are spaced this far apart in sent/visible time, oldest first.
SPACING_SECONDS = 0.00001

_MESSAGES = """
INSERT INTO messages (id, queue_id, message_id, group_id, body, sent_at, visible_at)
SELECT nextval('message_seq'), %(queue_id)s, gen_random_uuid(), s.group_id, %(body)s::jsonb, s.t, s.t
FROM (
    SELECT i,
           CASE WHEN %(group_count)s::int = 0 THEN NULL
                WHEN %(group_count)s::int = 1 THEN %(prefix)s
                ELSE %(prefix)s || mod(i - 1, %(group_count)s::int)::text END AS group_id,
           now() - make_interval(secs => (%(count)s - i) * %(spacing)s::float8) AS t
    FROM generate_series(1, %(count)s::int) AS i
) s
ORDER BY s.i
"""

_GROUPS = """
INSERT INTO message_groups AS g (queue_id, group_id, available_at)
SELECT %(queue_id)s,
       CASE WHEN %(group_count)s::int = 1 THEN %(prefix)s ELSE %(prefix)s || k::text END,
       now() - make_interval(secs => %(count)s * %(spacing)s::float8)
FROM generate_series(0, least(%(group_count)s::int, %(count)s::int) - 1) AS k
ORDER BY 2
ON CONFLICT (queue_id, group_id) DO UPDATE
SET available_at = coalesce(g.available_at, excluded.available_at)
"""


def queue_id(database_url: str, name: str) -> int:
    """The id of queue `name` (created through the API first)."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT id FROM queues WHERE name = %s", (name,)).fetchone()
    if row is None:
        raise RuntimeError(f"queue {name} not found in the database the bench preloads")
    return int(row[0])


def preload(
    database_url: str,
    queue: int,
    count: int,
    body: str,
    *,
    group_count: int = 0,
    prefix: str = "g",
) -> float:
    """Add `count` ready messages to queue id `queue`: standard (group_count 0), one group named
    `prefix` (1), or spread round robin over groups `prefix0..prefixN-1`; seconds it took."""
    started = time.perf_counter()
    with psycopg.connect(database_url, autocommit=True) as conn:
        remaining = count
        while remaining > 0:
            chunk = min(remaining, CHUNK_ROWS)
            params = {
                "queue_id": queue,
                "count": chunk,
                "body": body,
                "group_count": group_count,
                "prefix": prefix,
                "spacing": SPACING_SECONDS,
            }
            with conn.transaction():
                if group_count:
                    conn.execute(_GROUPS, params)
                conn.execute(_MESSAGES, params)
            remaining -= chunk
    return time.perf_counter() - started


def settle(database_url: str, checkpoint: bool = True) -> None:
    """VACUUM ANALYZE the hot tables and CHECKPOINT, so that the preload's after-effects do not land
    in the middle of a measurement: plans see the backlog, and the autovacuum that millions of
    fresh inserts call for has been done (left to autovacuum, it ran during the 10M-message
    receive measurement: PostgreSQL at 130-150% CPU for receivers that used 4-8%). A backlog that
    built up over time would have been vacuumed as it grew. A CHECKPOINT the role may not run is
    skipped."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) messages")
        conn.execute("VACUUM (ANALYZE) message_groups")
        if checkpoint:
            with contextlib.suppress(psycopg.Error):
                conn.execute("CHECKPOINT")


def dead_tuples(database_url: str) -> dict[str, dict[str, int]]:
    """Live and dead tuples of the hot tables (pg_stat_user_tables)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, n_live_tup, n_dead_tup FROM pg_stat_user_tables"
            " WHERE relname IN ('messages', 'message_groups') ORDER BY relname"
        ).fetchall()
    return {str(name): {"live": int(live), "dead": int(dead)} for name, live, dead in rows}
