"""Per-table autovacuum settings for the hot tables

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every message is inserted, updated at least once and deleted, and every group row is updated
# on each receive and ack: these tables churn through dead tuples far faster than their size
# suggests. Vacuum them after a fixed number of dead rows instead of a fraction of the table,
# without the cost-based sleeps, so dead tuples stay bounded under steady load. Some free space
# per page lets updates stay on the page (HOT) where no indexed column changes.
HOT_TABLES = {
    "messages": "fillfactor = 90",
    "message_groups": "fillfactor = 70",
    "message_dedup": "fillfactor = 90",
}
AUTOVACUUM = (
    "autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,"
    " autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 20000,"
    " autovacuum_analyze_scale_factor = 0.05, autovacuum_vacuum_cost_delay = 0"
)
RESET = (
    "fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,"
    " autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold,"
    " autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay"
)


def upgrade() -> None:
    for table, fill in HOT_TABLES.items():
        op.execute(f"ALTER TABLE {table} SET ({fill}, {AUTOVACUUM})")


def downgrade() -> None:
    for table in HOT_TABLES:
        op.execute(f"ALTER TABLE {table} RESET ({RESET})")
