"""The maintenance loop has exactly one leader among processes (session advisory lock)."""

from __future__ import annotations

import asyncio

import psycopg

from app.db.engine import Database
from app.service.maintenance import Maintenance
from tests.reads import messages_rows_read


async def _until(predicate: object, seconds: float = 5.0) -> bool:
    for _ in range(int(seconds / 0.02)):
        if predicate():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.02)
    return False


async def test_one_leader_and_takeover(db: Database) -> None:
    loops = [Maintenance(db, interval=0.05) for _ in range(3)]
    for loop in loops:
        loop.start()
    try:
        assert await _until(lambda: any(m.is_leader for m in loops))
        await asyncio.sleep(0.3)  # several rounds: nobody else may become leader meanwhile
        leaders = [m for m in loops if m.is_leader]
        assert len(leaders) == 1
        # The leader stops (its connection, and so its lock, goes): another takes over.
        await leaders[0].stop()
        rest = [m for m in loops if m is not leaders[0]]
        assert await _until(lambda: any(m.is_leader for m in rest))
        await asyncio.sleep(0.2)
        assert sum(m.is_leader for m in rest) == 1
    finally:
        for loop in loops:
            await loop.stop()


async def test_a_round_with_nothing_to_expire_does_not_walk_the_backlog(db_url: str) -> None:
    # 20k fresh messages in a FIFO queue (1,000 groups) and 20k in a standard queue, vacuumed and
    # analysed: nothing is past retention. Planned generically, as the pooled sessions plan
    # (app.db.engine), the retention queries estimate a third of the table as expired and walk a
    # whole index of the queue with a heap fetch per entry: 10M queued messages took 19 s a
    # round, every 5 s. The maintenance plans its statements for their values instead.
    with psycopg.connect(db_url, autocommit=True) as setup:
        setup.execute(
            "INSERT INTO queues (id, name, fifo, visibility_timeout, delay_seconds, retention_seconds,"
            " max_message_bytes, receive_wait_seconds, content_based_deduplication, deduplication_scope)"
            " OVERRIDING SYSTEM VALUE VALUES (1, 'f.fifo', true, 30, 0, 345600, 1048576, 0, false, 'queue'),"
            " (2, 's', false, 30, 0, 345600, 1048576, 0, false, 'queue')"
        )
        setup.execute(
            "INSERT INTO messages (queue_id, message_id, group_id, body, sent_at, visible_at)"
            " SELECT q, gen_random_uuid(), CASE WHEN q = 1 THEN 'g' || (i % 1000) END, '1', now(), now()"
            " FROM generate_series(1, 2) AS q, generate_series(1, 20000) AS i"
        )
        setup.execute(
            "INSERT INTO message_groups (queue_id, group_id, available_at)"
            " SELECT 1, 'g' || g, now() FROM generate_series(0, 999) AS g"
        )
        setup.execute("VACUUM (ANALYZE) messages")
        # VACUUM leaves the table's last, partial block range unsummarized, and a BRIN scan reads
        # an unsummarized range whole (up to 128 pages a query, whatever the backlog): summarize
        # it too, so that what is counted below is what the plans read.
        setup.execute("SELECT brin_summarize_new_values('messages_sent_at_brin_idx')")
    database = Database(db_url, min_size=1, max_size=1)  # one backend: its statistics are flushed
    await database.open()
    try:
        maintenance = Maintenance(database)
        before = await messages_rows_read(db_url, database)
        rounds = 7  # past psycopg's prepare threshold (5): the prepared statements' plans count
        for _ in range(rounds):
            report = await maintenance.run_once()
            assert report.expired == 0
        read = await messages_rows_read(db_url, database) - before
    finally:
        await database.close()
    # Walking one queue's index reads its 20k rows a round.
    assert read < 1_000, f"{read} rows of messages read in {rounds} rounds"
