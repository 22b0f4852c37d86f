"""API keys: hashed keys with queue-scoped grants, for access control

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A key is found by its public id (the primary key): one index lookup per cache miss. Only
    # SHA-256 of the key is kept; the key itself is shown once, when it is made.
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("secret_hash", postgresql.BYTEA(), nullable=False),
        sa.Column("scopes", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("id ~ '^[0-9a-f]{12}$'", name=op.f("api_keys_id_check")),
        sa.CheckConstraint("octet_length(secret_hash) = 32", name=op.f("api_keys_secret_hash_check")),
        sa.CheckConstraint(
            "jsonb_typeof(scopes) = 'array' AND jsonb_array_length(scopes) > 0", name=op.f("api_keys_scopes_check")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("api_keys_pkey")),
    )


def downgrade() -> None:
    op.drop_table("api_keys")
