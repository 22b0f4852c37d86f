"""Message move tasks: SQS's StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    # One row per task, advanced by the maintenance leader (app/service/move_tasks.py). A few
    # rows per dead-letter queue (the last 10 are kept), so no index beyond the two below.
    op.create_table(
        "message_move_tasks",
        sa.Column("id", sa.UUID(), nullable=False),
        # The dead-letter queue the messages leave; the tasks go with it.
        sa.Column("source_queue_id", sa.Integer(), nullable=False),
        # NULL: each message goes back to its own source queue. Set NULL when that queue is
        # deleted, while destination_name stays: the runner then fails the task.
        sa.Column("destination_queue_id", sa.Integer(), nullable=True),
        sa.Column("destination_name", sa.Text(), nullable=True),
        # NULL: as fast as the runner goes.
        sa.Column("max_per_second", sa.Integer(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("to_move", sa.BigInteger(), nullable=False),
        sa.Column("moved", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("started_at", TS, nullable=False),
        # The last message of the dead-letter queue when the task started: later arrivals stay.
        sa.Column("before_id", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "status IN ('RUNNING', 'COMPLETED', 'CANCELLED', 'FAILED')", name="message_move_tasks_status_check"
        ),
        sa.CheckConstraint(
            "max_per_second IS NULL OR max_per_second BETWEEN 1 AND 500",
            name="message_move_tasks_max_per_second_check",
        ),
        sa.CheckConstraint(
            "destination_queue_id IS NULL OR destination_name IS NOT NULL",
            name="message_move_tasks_destination_check",
        ),
        sa.ForeignKeyConstraint(["source_queue_id"], ["queues.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["destination_queue_id"], ["queues.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name="message_move_tasks_pkey"),
    )
    # A source's tasks, newest first (ListMessageMoveTasks, and keeping the last 10).
    op.create_index("message_move_tasks_source_idx", "message_move_tasks", ["source_queue_id", "started_at"])
    # At most one running task per dead-letter queue (SQS's rule), race-free.
    op.create_index(
        "message_move_tasks_running_idx",
        "message_move_tasks",
        ["source_queue_id"],
        unique=True,
        postgresql_where=sa.text("status = 'RUNNING'"),
    )
    # A destination queue's delete sets its tasks' destination NULL through this index.
    op.create_index(
        "message_move_tasks_destination_idx",
        "message_move_tasks",
        ["destination_queue_id"],
        postgresql_where=sa.text("destination_queue_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_table("message_move_tasks")
