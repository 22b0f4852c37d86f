"""The archive's bookkeeping in PostgreSQL (table history_exports, migration 0006).

The watermark lives in the database, next to the rows it describes, because pruning must be
decided there: pqs_history_prune() deletes a batch's rows only when the batch is committed and
its id range still holds exactly the rows the archive counted. A batch is recorded (pending)
before its Parquet files are written and committed after they are, so a run that dies in
between leaves a pending batch that the next run writes again over the same range.

History ids are drawn when rows are inserted, not when they commit, so a row with a smaller id
can commit after one with a larger id. A batch never goes past the horizon: the last id drawn,
taken once every transaction that may still be writing history has ended. Those are the holders
of the table's row-exclusive lock, found in pg_locks and waited for without taking any lock
(writers are never blocked).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row

from app.db.sql import load
from app.pipeline.session import PipelineError

SQL = load(Path(__file__).with_name("queries"))
Conn = psycopg.Connection[DictRow]
# Advisory lock class of an archive run (two-key form: class, hash of the archive URI).
ARCHIVE_LOCK_CLASS = 0x5041
HORIZON_POLL_SECONDS = 0.02


@dataclass(frozen=True)
class Export:
    """One archive batch: history ids from_id < id <= to_id; `rows` once committed."""

    id: int
    from_id: int
    to_id: int
    rows: int | None = None


def connect(database_url: str) -> Conn:
    """A connection of the driver's own, in autocommit mode."""
    try:
        return psycopg.connect(database_url, autocommit=True, row_factory=dict_row)
    except psycopg.OperationalError as exc:
        raise PipelineError(f"cannot connect to the database: {exc}".strip()) from None


def _one(conn: Conn, name: str, params: dict[str, Any] | None = None) -> DictRow:
    row = conn.execute(SQL[name].sql, params or {}).fetchone()
    assert row is not None, name
    return row


def history_horizon(conn: Conn, timeout: float = 60.0) -> int:
    """The largest history id below which every row is committed (or rolled back) for good."""
    last = int(_one(conn, "history_last_id")["last_id"])
    running: list[str] = _one(conn, "history_writers")["vxids"]
    deadline = time.monotonic() + timeout
    while running:
        running = _one(conn, "history_writers_left", {"vxids": running})["vxids"]
        if running and time.monotonic() > deadline:
            raise PipelineError(
                f"{len(running)} transaction(s) writing message_history stayed open for over {timeout:.0f} s; "
                "nothing was archived, try again"
            )
        if running:
            time.sleep(HORIZON_POLL_SECONDS)
    return last


def lock_archive(conn: Conn, archive: str) -> None:
    """Hold the archive's run lock for as long as `conn` is open (or fail at once)."""
    if not _one(conn, "archive_lock", {"lock_class": ARCHIVE_LOCK_CLASS, "archive": archive})["locked"]:
        raise PipelineError(f"another archive run is writing {archive}; try again when it is done")


def pending(conn: Conn, archive: str) -> Export | None:
    """The archive's started and not committed batch, if any."""
    row = conn.execute(SQL["export_pending"].sql, {"archive": archive}).fetchone()
    return Export(row["id"], row["from_id"], row["to_id"]) if row else None


def watermark(conn: Conn, archive: str) -> int:
    """Every history id up to this one is in a committed batch of the archive."""
    return int(_one(conn, "export_watermark", {"archive": archive})["watermark"])


def begin(conn: Conn, archive: str, from_id: int, to_id: int) -> Export:
    """Record a new batch (pending) before writing it."""
    row = _one(conn, "export_begin", {"archive": archive, "from_id": from_id, "to_id": to_id})
    return Export(row["id"], from_id, to_id)


def commit(conn: Conn, export: Export, rows: int) -> None:
    """The batch's files are committed with `rows` rows: move the watermark."""
    cur = conn.execute(SQL["export_commit"].sql, {"id": export.id, "rows": rows})
    if cur.rowcount != 1:
        raise PipelineError(f"archive batch {export.id} was committed by someone else")


def range_count(conn: Conn, from_id: int, to_id: int) -> int:
    """History rows with from_id < id <= to_id."""
    return int(_one(conn, "history_range_count", {"from_id": from_id, "to_id": to_id})["n"])


def id_bounds(conn: Conn) -> tuple[int, int]:
    """Smallest and largest history id (0, 0 when empty)."""
    row = _one(conn, "history_id_bounds")
    return int(row["low"]), int(row["high"])


def unpruned(conn: Conn, archive: str) -> list[Export]:
    """Committed batches whose rows are still in message_history, oldest first."""
    rows = conn.execute(SQL["export_unpruned"].sql, {"archive": archive}).fetchall()
    return [Export(r["id"], r["from_id"], r["to_id"], r["rows"]) for r in rows]


def prune(conn: Conn, export: Export) -> int:
    """Delete a committed batch's rows from history (in one transaction); how many."""
    return int(_one(conn, "export_prune", {"id": export.id})["deleted"])


def history_rows_query(from_id: int, to_id: int) -> str:
    """The archive's columns of history rows from_id < id <= to_id, as SQL for Spark."""
    return SQL["history_rows"].text.format(from_id=int(from_id), to_id=int(to_id))
