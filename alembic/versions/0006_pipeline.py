"""The Spark pipeline: archive batches (the watermark), sanctioned pruning of history, backfill keys

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# History rows leave only through pqs_history_prune(): a statement-level guard (no per-row cost)
# refuses DELETE and TRUNCATE unless that function set the transaction-local flag around its own
# DELETE. UPDATE stays refused by message_history_append_only (migration 0001).
HISTORY_DELETE_GUARD = """
CREATE FUNCTION pqs_history_delete_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('pqs.history_prune', true) IS DISTINCT FROM 'on' THEN
    RAISE EXCEPTION 'message_history is append-only: rows leave only through pqs_history_prune() after they were archived'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'message_history_append_only';
  END IF;
  RETURN NULL;
END $$
"""

# Prune one committed archive batch: delete exactly its id range, and only if the range still
# holds exactly the rows the archive counted when it committed (history below an export's upper
# bound never changes, so anything else means something is wrong: nothing is deleted then). The
# export row is locked first, so two prunes of one batch run one after the other.
HISTORY_PRUNE = """
CREATE FUNCTION pqs_history_prune(p_export bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  e history_exports%ROWTYPE;
  v_deleted bigint;
BEGIN
  SELECT * INTO e FROM history_exports WHERE id = p_export FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'history export % does not exist', p_export USING ERRCODE = 'no_data_found';
  END IF;
  IF e.committed_at IS NULL THEN
    RAISE EXCEPTION 'history export % is not committed: its rows are not archived yet', p_export
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  IF e.pruned_at IS NOT NULL THEN
    RETURN 0;
  END IF;
  PERFORM set_config('pqs.history_prune', 'on', true);
  DELETE FROM message_history WHERE id > e.from_id AND id <= e.to_id;
  GET DIAGNOSTICS v_deleted = ROW_COUNT;
  PERFORM set_config('pqs.history_prune', 'off', true);
  IF v_deleted <> e.rows THEN
    RAISE EXCEPTION 'history export % archived % rows but its id range holds %; nothing pruned',
      p_export, e.rows, v_deleted USING ERRCODE = 'data_exception';
  END IF;
  UPDATE history_exports SET pruned_at = now() WHERE id = p_export;
  RETURN v_deleted;
END $$
"""

UPGRADE_SQL = [
    HISTORY_DELETE_GUARD,
    """
    CREATE TRIGGER message_history_delete_guard
    BEFORE DELETE OR TRUNCATE ON message_history FOR EACH STATEMENT EXECUTE FUNCTION pqs_history_delete_guard()
    """,
    HISTORY_PRUNE,
]

DOWNGRADE_SQL = [
    "DROP FUNCTION pqs_history_prune(bigint)",
    "DROP TRIGGER message_history_delete_guard ON message_history",
    "DROP FUNCTION pqs_history_delete_guard()",
]


def upgrade() -> None:
    # One row per archive batch. The archive's watermark is the largest to_id of its committed
    # batches; a batch with committed_at NULL was started and is finished (same range) by the next run.
    op.create_table(
        "history_exports",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("archive", sa.Text(), nullable=False),
        sa.Column("from_id", sa.BigInteger(), nullable=False),
        sa.Column("to_id", sa.BigInteger(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=True),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pruned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("to_id > from_id AND from_id >= 0", name=op.f("history_exports_range_check")),
        sa.CheckConstraint(
            "(rows IS NULL) = (committed_at IS NULL) AND coalesce(rows, 0) >= 0",
            name=op.f("history_exports_committed_check"),
        ),
        sa.CheckConstraint(
            "pruned_at IS NULL OR committed_at IS NOT NULL", name=op.f("history_exports_pruned_after_commit_check")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("history_exports_pkey")),
    )
    op.create_index(
        "history_exports_pending_idx",
        "history_exports",
        ["archive"],
        unique=True,
        postgresql_where=sa.text("committed_at IS NULL"),
    )
    op.create_index("history_exports_archive_idx", "history_exports", ["archive", "to_id"])
    # One row per source row a backfill enqueued (or found to be a duplicate): kept for good, so
    # exactly-once does not depend on the queue's deduplication window.
    op.create_table(
        "backfill_keys",
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("key", postgresql.BYTEA(), nullable=False),
        sa.CheckConstraint("octet_length(key) = 32", name=op.f("backfill_keys_key_check")),
        sa.PrimaryKeyConstraint("queue_id", "key", name=op.f("backfill_keys_pkey")),
    )
    for statement in UPGRADE_SQL:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE_SQL:
        op.execute(statement)
    op.drop_table("backfill_keys")
    op.drop_index("history_exports_archive_idx", table_name="history_exports")
    op.drop_index("history_exports_pending_idx", table_name="history_exports")
    op.drop_table("history_exports")
