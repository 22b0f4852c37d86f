"""Dashboard: each queue's activity per minute, and its largest and oldest FIFO groups as last counted

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    # One row per queue and minute (docs/dashboard.md): what every process counted in memory and
    # added at its flush (sent, acked, dead-lettered), and the maintenance leader's latest count
    # of the queue in that minute (NULL: no count fell in it). Kept 24 hours. No foreign key: a
    # flush must not fail because a queue was deleted meanwhile (its rows are cleared with it,
    # and a late flush's go with the 24 hours).
    op.create_table(
        "queue_minutes",
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("minute", TS, nullable=False),
        sa.Column("sent", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("acked", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("dead_lettered", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("visible", sa.BigInteger(), nullable=True),
        sa.Column("in_flight", sa.BigInteger(), nullable=True),
        sa.Column("delayed", sa.BigInteger(), nullable=True),
        sa.Column("oldest_age_seconds", sa.Float(), nullable=True),
        sa.CheckConstraint("minute = date_trunc('minute', minute)", name="queue_minutes_minute_check"),
        sa.PrimaryKeyConstraint("queue_id", "minute", name="queue_minutes_pkey"),
    )
    # The prune's walk, oldest first, whatever the queue.
    op.create_index("queue_minutes_minute_idx", "queue_minutes", ["minute"])
    # One row per FIFO queue: its largest groups and those with the oldest heads, as the
    # maintenance leader last counted them (app/service/metrics_loop.py). The counting reads
    # every message of the queue, so it is done there, spaced by its cost, never on a request.
    op.create_table(
        "queue_group_census",
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("counted_at", TS, nullable=False),
        # How many groups held messages; the largest ones and those with the oldest heads (the
        # lowest head sequence numbers), each [{"group_id", "messages"}], in that order.
        sa.Column("group_count", sa.BigInteger(), nullable=False),
        sa.Column("largest", JSONB(), nullable=False),
        sa.Column("oldest", JSONB(), nullable=False),
        sa.PrimaryKeyConstraint("queue_id", name="queue_group_census_pkey"),
    )


def downgrade() -> None:
    op.drop_table("queue_group_census")
    op.drop_index("queue_minutes_minute_idx", table_name="queue_minutes")
    op.drop_table("queue_minutes")
