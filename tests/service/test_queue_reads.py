"""Statements about one whole queue (its stats, a purge, a delete) read that queue's messages, not
the table: measured in rows of `messages` read, next to a backlog in other queues."""

from __future__ import annotations

import psycopg

from app.db.engine import Database
from app.service.queues import QueueService
from tests.reads import messages_rows_read

BACKLOG = 20_000  # messages in each of two other queues, a standard and a FIFO one


def _load(url: str) -> None:
    """Queues 1 (FIFO) and 2 (standard) with BACKLOG messages each; queue 3 ('small', 10
    messages) with its dead-letter queue 4 holding 5 messages that came from it. Analysed."""
    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute(
            "INSERT INTO queues (id, name, fifo, visibility_timeout, delay_seconds, retention_seconds,"
            " max_message_bytes, receive_wait_seconds, content_based_deduplication, deduplication_scope)"
            " OVERRIDING SYSTEM VALUE VALUES (1, 'f.fifo', true, 30, 0, 345600, 1048576, 0, false, 'queue'),"
            " (2, 's', false, 30, 0, 345600, 1048576, 0, false, 'queue'),"
            " (3, 'small', false, 30, 0, 345600, 1048576, 0, false, 'queue'),"
            " (4, 'small-dlq', false, 30, 0, 345600, 1048576, 0, false, 'queue')"
        )
        setup.execute("SELECT setval('queues_id_seq', 10)")
        setup.execute("UPDATE queues SET dead_letter_queue_id = 4, max_receive_count = 3 WHERE id = 3")
        setup.execute(
            "INSERT INTO messages (queue_id, message_id, group_id, body, sent_at, visible_at)"
            " SELECT q, gen_random_uuid(), CASE WHEN q = 1 THEN 'g' || (i %% 1000) END, '1', now(), now()"
            " FROM generate_series(1, 2) AS q, generate_series(1, %s) AS i",
            (BACKLOG,),
        )
        setup.execute(
            "INSERT INTO message_groups (queue_id, group_id, available_at)"
            " SELECT 1, 'g' || g, now() FROM generate_series(0, 999) AS g"
        )
        setup.execute(
            "INSERT INTO messages (queue_id, message_id, body, sent_at, visible_at, source_queue_id)"
            " SELECT CASE WHEN i <= 10 THEN 3 ELSE 4 END, gen_random_uuid(), '1', now(), now(),"
            " CASE WHEN i > 10 THEN 3 END FROM generate_series(1, 15) AS i"
        )
        setup.execute("VACUUM (ANALYZE) messages")


async def test_stats_purge_and_delete_of_a_small_queue_do_not_read_the_backlog(db_url: str) -> None:
    # Both indexes of messages by queue are partial (standard, FIFO): `queue_id = $1` alone
    # matched neither, so the stats and the purge read the whole table. And deleting a queue
    # sets source_queue_id to NULL in the dead-letter messages that came from it (the foreign
    # key's ON DELETE SET NULL): with no index on that column, another scan of the whole table.
    _load(db_url)
    database = Database(db_url, min_size=1, max_size=1)  # one backend: its statistics are flushed
    await database.open()
    try:
        queues = QueueService(database)
        before = await messages_rows_read(db_url, database)
        for _ in range(7):  # past psycopg's prepare threshold (5): the generic plan counts too
            _, stats = await queues.get("small")
            assert stats.visible == 10
        assert await queues.purge("small") == 10
        await queues.delete("small")
        read = await messages_rows_read(db_url, database) - before
    finally:
        await database.close()
    # The dead-letter messages stay where they are, with no source left to go back to.
    with psycopg.connect(db_url) as conn:
        left = conn.execute("SELECT count(*), count(source_queue_id) FROM messages WHERE queue_id = 4").fetchone()
    assert left == (5, 0)
    # One scan of the table reads the 40k messages of the backlog.
    assert read < 1_000, f"{read} rows of messages read"
