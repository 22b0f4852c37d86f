"""API keys: the sealed SQS secret access key of each key

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # SigV4 clients send an HMAC made with their secret, so the service must hold the secret
    # itself: it is stored sealed under a server key kept out of the database (app/sqs/secrets.py).
    # Keys made before have none (NULL) and cannot sign SQS requests until made again.
    op.add_column("api_keys", sa.Column("sqs_secret", postgresql.BYTEA(), nullable=True))


def downgrade() -> None:
    op.drop_column("api_keys", "sqs_secret")
