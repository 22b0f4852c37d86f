"""Queues: which queues may name this one as their dead-letter queue (SQS's RedriveAllowPolicy)

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column on queues (NULL: any queue may, the default and every existing queue's):
    # it is read only when another queue names this one, but it is an attribute like the others
    # (compared by an idempotent create, shown by GET), and NULL costs a bit in the row's null
    # bitmap of the row every send reads. At most 10 names, as SQS's sourceQueueArns.
    op.add_column("queues", sa.Column("dead_letter_for", ARRAY(sa.Text()), nullable=True))
    op.create_check_constraint(
        op.f("queues_dead_letter_for_check"), "queues", "coalesce(cardinality(dead_letter_for), 0) <= 10"
    )


def downgrade() -> None:
    op.drop_constraint(op.f("queues_dead_letter_for_check"), "queues")
    op.drop_column("queues", "dead_letter_for")
