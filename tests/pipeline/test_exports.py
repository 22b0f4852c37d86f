"""The archive's bookkeeping in PostgreSQL: history rows leave only through pqs_history_prune()
and only as committed batches; the horizon waits for transactions still writing history."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from app.pipeline import exports
from app.pipeline.session import PipelineError
from tests.pipeline.history import Finished, add_history, history_count

pytestmark = pytest.mark.xdist_group("pipeline")
ARCHIVE = "file:///tmp/pqs-test-archive"


def test_history_rows_cannot_be_deleted_or_truncated_directly(db_url: str) -> None:
    add_history(db_url, [Finished()])
    with psycopg.connect(db_url, autocommit=True) as conn:
        for statement in ("DELETE FROM message_history", "TRUNCATE message_history"):
            with pytest.raises(psycopg.errors.CheckViolation, match="append-only"):
                conn.execute(statement)
        with pytest.raises(psycopg.errors.CheckViolation, match="append-only"):
            conn.execute("UPDATE message_history SET receive_count = 2")
    assert history_count(db_url) == 1


def test_prune_deletes_a_committed_batch_and_nothing_else(db_url: str) -> None:
    ids = add_history(db_url, [Finished(sent=i) for i in range(4)])
    with exports.connect(db_url) as conn:
        batch = exports.begin(conn, ARCHIVE, 0, ids[2])
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="not committed"):
            exports.prune(conn, batch)
        exports.commit(conn, batch, 3)

        assert exports.prune(conn, batch) == 3
        assert exports.prune(conn, batch) == 0  # already pruned
        assert exports.unpruned(conn, ARCHIVE) == []
        # the flag that lets the prune delete does not outlive it
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("DELETE FROM message_history")
    assert history_count(db_url) == 1


def test_prune_deletes_nothing_when_the_range_does_not_hold_what_was_archived(db_url: str) -> None:
    ids = add_history(db_url, [Finished(sent=i) for i in range(3)])
    with exports.connect(db_url) as conn:
        batch = exports.begin(conn, ARCHIVE, 0, ids[-1])
        exports.commit(conn, batch, 2)  # the archive counted 2 of the 3 rows

        with pytest.raises(psycopg.errors.DataException, match="archived 2 rows but its id range holds 3"):
            exports.prune(conn, batch)
    assert history_count(db_url) == 3


def test_one_archive_run_at_a_time(db_url: str) -> None:
    with exports.connect(db_url) as first, exports.connect(db_url) as second:
        exports.lock_archive(first, ARCHIVE)
        with pytest.raises(PipelineError, match="another archive run"):
            exports.lock_archive(second, ARCHIVE)
        exports.lock_archive(second, ARCHIVE + "-other")


def _insert_history(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    row = conn.execute(
        "INSERT INTO message_history (queue_id, queue_name, message_id, sequence_number, sent_at, finished_at,"
        " receive_count, outcome) VALUES (1, 'jobs', gen_random_uuid(), 1, now(), now(), 0, 'purged') RETURNING id"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_horizon_waits_for_a_transaction_still_writing_history(db_url: str) -> None:
    with psycopg.connect(db_url) as slow, psycopg.connect(db_url, autocommit=True) as fast:
        early = _insert_history(slow)  # drawn first, not committed yet
        late = _insert_history(fast)  # drawn second, committed
        found: list[int] = []
        with exports.connect(db_url) as conn:
            waiting = threading.Thread(target=lambda: found.append(exports.history_horizon(conn, timeout=30)))
            waiting.start()
            time.sleep(0.5)
            # An archive that stopped at `late` now would never see `early`.
            assert waiting.is_alive() and found == []
            slow.commit()
            waiting.join(timeout=10)
        assert found == [late] and early < late


def test_horizon_gives_up_on_a_writer_that_stays_open(db_url: str) -> None:
    with psycopg.connect(db_url) as slow:
        _insert_history(slow)
        with exports.connect(db_url) as conn, pytest.raises(PipelineError, match="stayed open"):
            exports.history_horizon(conn, timeout=0.2)


def test_horizon_of_an_empty_history_is_zero(db_url: str) -> None:
    with exports.connect(db_url) as conn:
        assert exports.history_horizon(conn) == 0
        # The horizon relies on ids being drawn one at a time: no session holds a cache of them.
        row = conn.execute(
            "SELECT cache_size FROM pg_sequences WHERE sequencename = 'message_history_id_seq'"
        ).fetchone()
        assert row is not None and row["cache_size"] == 1
