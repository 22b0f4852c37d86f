"""Queues: their tags (SQS's TagQueue, UntagQueue, ListQueueTags)

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A table rather than a jsonb column on queues: a queue row is read by every send and filled
    # into the queue cache (`SELECT q.*`), while tags are read only by ListQueueTags; kept apart,
    # they add nothing to those reads, and tagging upserts and deletes single keys instead of
    # rewriting the queue row. The rows go with their queue (ON DELETE CASCADE).
    op.create_table(
        "queue_tags",
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["queue_id"], ["queues.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("queue_id", "key"),
    )


def downgrade() -> None:
    op.drop_table("queue_tags")
