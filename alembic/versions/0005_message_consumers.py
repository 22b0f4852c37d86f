"""Consumer ids of receives, so that `release` can return everything a consumer holds

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # One row per message last received with a consumer id, under the lease of that receive. A
    # row whose lease no longer matches the message (acked, received again, timed out) is stale
    # and ignored; maintenance deletes such rows. No foreign key: acks stay free of the check.
    op.create_table(
        "message_consumers",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("consumer_id", sa.Text(), nullable=False),
        sa.Column("lease_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("message_consumers_pkey")),
    )
    op.create_index("message_consumers_consumer_idx", "message_consumers", ["queue_id", "consumer_id"])


def downgrade() -> None:
    op.drop_index("message_consumers_consumer_idx", table_name="message_consumers")
    op.drop_table("message_consumers")
