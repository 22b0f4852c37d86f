"""initial schema: queues, messages, FIFO groups, dedup ids, history, and the rules the database enforces

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written by hand: the rules the database itself enforces, whatever code writes to it.
RULES = [
    # A message's identity and content never change once sent.
    """
    CREATE FUNCTION pqs_message_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'message % : identity and content columns are immutable', OLD.id
        USING ERRCODE = 'check_violation', CONSTRAINT = 'messages_immutable';
    END $$
    """,
    """
    CREATE TRIGGER messages_immutable
    BEFORE UPDATE OF id, queue_id, message_id, group_id, dedup_id, body, attributes, sent_at
    ON messages FOR EACH ROW EXECUTE FUNCTION pqs_message_immutable()
    """,
    # The allowed state transitions. A row is `ready` (lease NULL) or `in_flight` (lease set);
    # the CHECK constraints keep state and lease in step, this trigger guards the moves:
    #   ready     -> in_flight  a receive: new lease, receive_count + 1
    #   in_flight -> in_flight  a receive after the visibility timeout: new lease, count + 1;
    #                           or the same lease with the count unchanged (visibility change)
    #   in_flight -> ready      a nack or an expired FIFO lease: count unchanged
    # first_received_at is written once. Every finished message leaves by DELETE (into history).
    """
    CREATE FUNCTION pqs_message_transition() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF OLD.first_received_at IS NULL OR NEW.first_received_at = OLD.first_received_at THEN
        IF NEW.lease_id IS NOT NULL AND NEW.lease_id IS DISTINCT FROM OLD.lease_id THEN
          IF NEW.receive_count = OLD.receive_count + 1 AND NEW.last_received_at IS NOT NULL THEN
            RETURN NEW;
          END IF;
        ELSIF NEW.receive_count = OLD.receive_count THEN
          RETURN NEW;
        END IF;
      END IF;
      RAISE EXCEPTION 'message %: % (lease %, received %) -> % (lease %, received %) is not allowed',
        OLD.id, OLD.state, OLD.lease_id, OLD.receive_count, NEW.state, NEW.lease_id, NEW.receive_count
        USING ERRCODE = 'check_violation', CONSTRAINT = 'messages_state_transition';
    END $$
    """,
    """
    CREATE TRIGGER messages_state_transition
    BEFORE UPDATE ON messages FOR EACH ROW
    WHEN (OLD.lease_id IS DISTINCT FROM NEW.lease_id
          OR OLD.receive_count <> NEW.receive_count
          OR OLD.state <> NEW.state
          OR OLD.first_received_at IS DISTINCT FROM NEW.first_received_at)
    EXECUTE FUNCTION pqs_message_transition()
    """,
    # History is append-only: rows are written once; the pipeline may delete exported rows.
    """
    CREATE FUNCTION pqs_history_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'message_history is append-only'
        USING ERRCODE = 'check_violation', CONSTRAINT = 'message_history_append_only';
    END $$
    """,
    """
    CREATE TRIGGER message_history_append_only
    BEFORE UPDATE ON message_history FOR EACH ROW EXECUTE FUNCTION pqs_history_append_only()
    """,
]

UNDO_RULES = [
    "DROP TRIGGER message_history_append_only ON message_history",
    "DROP FUNCTION pqs_history_append_only()",
    "DROP TRIGGER messages_state_transition ON messages",
    "DROP FUNCTION pqs_message_transition()",
    "DROP TRIGGER messages_immutable ON messages",
    "DROP FUNCTION pqs_message_immutable()",
]


def upgrade() -> None:
    op.execute("CREATE SEQUENCE message_seq")
    op.create_table(
        "message_dedup",
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("scope_key", sa.Text(), nullable=False),
        sa.Column("dedup_id", sa.Text(), nullable=False),
        sa.Column("message_id", sa.UUID(), nullable=False),
        sa.Column("sequence_number", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("queue_id", "scope_key", "dedup_id", name=op.f("message_dedup_pkey")),
    )
    op.create_index("message_dedup_expires_at_idx", "message_dedup", ["expires_at"], unique=False)
    op.create_table(
        "message_groups",
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Text(), nullable=False),
        sa.Column("lease_id", sa.UUID(), nullable=True),
        sa.Column("available_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "lease_id IS NULL OR available_at IS NOT NULL", name=op.f("message_groups_lease_has_expiry_check")
        ),
        sa.PrimaryKeyConstraint("queue_id", "group_id", name=op.f("message_groups_pkey")),
        sa.UniqueConstraint(
            "queue_id", "group_id", "lease_id", name=op.f("message_groups_queue_id_group_id_lease_id_key")
        ),
    )
    op.create_index(
        "message_groups_available_idx",
        "message_groups",
        ["queue_id", "available_at"],
        unique=False,
        postgresql_where=sa.text("available_at IS NOT NULL"),
    )
    op.create_table(
        "message_history",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("queue_name", sa.Text(), nullable=False),
        sa.Column("message_id", sa.UUID(), nullable=False),
        sa.Column("sequence_number", sa.BigInteger(), nullable=False),
        sa.Column("group_id", sa.Text(), nullable=True),
        sa.Column("dedup_id", sa.Text(), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_received_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_received_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("receive_count", sa.Integer(), nullable=False),
        sa.Column(
            "outcome",
            sa.Enum("acked", "dead_lettered", "expired", "purged", name="history_outcome"),
            nullable=False,
        ),
        sa.Column("result", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("error", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("message_history_pkey")),
    )
    op.create_index(
        "message_history_finished_at_brin_idx",
        "message_history",
        ["finished_at"],
        unique=False,
        postgresql_using="brin",
    )
    op.create_table(
        "receive_attempts",
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Text(), nullable=False),
        sa.Column("sequence_numbers", postgresql.ARRAY(sa.BigInteger()), nullable=False),
        sa.Column("lease_ids", postgresql.ARRAY(sa.UUID()), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("queue_id", "attempt_id", name=op.f("receive_attempts_pkey")),
    )
    op.create_table(
        "queues",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("fifo", sa.Boolean(), nullable=False),
        sa.Column("visibility_timeout", sa.Integer(), nullable=False),
        sa.Column("delay_seconds", sa.Integer(), nullable=False),
        sa.Column("retention_seconds", sa.Integer(), nullable=False),
        sa.Column("max_message_bytes", sa.Integer(), nullable=False),
        sa.Column("receive_wait_seconds", sa.Integer(), nullable=False),
        sa.Column("content_based_deduplication", sa.Boolean(), nullable=False),
        sa.Column("deduplication_scope", sa.Enum("queue", "group", name="dedup_scope"), nullable=False),
        sa.Column("dead_letter_queue_id", sa.Integer(), nullable=True),
        sa.Column("max_receive_count", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("fifo = (name ~ '\\.fifo$')", name=op.f("queues_fifo_suffix_check")),
        sa.CheckConstraint("name ~ '^[A-Za-z0-9_-]{1,75}(\\.fifo)?$'", name=op.f("queues_name_check")),
        sa.CheckConstraint(
            "(dead_letter_queue_id IS NULL) = (max_receive_count IS NULL) AND coalesce(max_receive_count, 1) >= 1",
            name=op.f("queues_dead_letter_check"),
        ),
        sa.CheckConstraint("dead_letter_queue_id <> id", name=op.f("queues_dead_letter_not_self_check")),
        sa.CheckConstraint("delay_seconds BETWEEN 0 AND 900", name=op.f("queues_delay_seconds_check")),
        sa.CheckConstraint("max_message_bytes BETWEEN 1024 AND 1048576", name=op.f("queues_max_message_bytes_check")),
        sa.CheckConstraint("receive_wait_seconds BETWEEN 0 AND 20", name=op.f("queues_receive_wait_seconds_check")),
        sa.CheckConstraint("retention_seconds BETWEEN 60 AND 1209600", name=op.f("queues_retention_seconds_check")),
        sa.CheckConstraint("visibility_timeout BETWEEN 0 AND 43200", name=op.f("queues_visibility_timeout_check")),
        sa.ForeignKeyConstraint(
            ["dead_letter_queue_id"],
            ["queues.id"],
            name=op.f("queues_dead_letter_queue_id_fkey"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("queues_pkey")),
        sa.UniqueConstraint("name", name=op.f("queues_name_key")),
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.BigInteger(), server_default=sa.text("nextval('message_seq')"), nullable=False),
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.UUID(), nullable=False),
        sa.Column("group_id", sa.Text(), nullable=True),
        sa.Column("dedup_id", sa.Text(), nullable=True),
        sa.Column("body", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "attributes",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "state",
            sa.Enum("ready", "in_flight", name="message_state"),
            server_default=sa.text("'ready'"),
            nullable=False,
        ),
        sa.Column("lease_id", sa.UUID(), nullable=True),
        sa.Column("receive_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("visible_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_received_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_received_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("source_queue_id", sa.Integer(), nullable=True),
        sa.CheckConstraint(
            "(state = 'in_flight') = (lease_id IS NOT NULL)", name=op.f("messages_lease_iff_in_flight_check")
        ),
        sa.CheckConstraint(
            "receive_count >= 0 AND (receive_count = 0) = (first_received_at IS NULL) AND (state = 'ready' OR receive_count >= 1)",
            name=op.f("messages_receive_count_check"),
        ),
        sa.ForeignKeyConstraint(
            ["queue_id", "group_id", "lease_id"],
            ["message_groups.queue_id", "message_groups.group_id", "message_groups.lease_id"],
            name="messages_group_lease_fkey",
        ),
        sa.ForeignKeyConstraint(
            ["source_queue_id"],
            ["queues.id"],
            name=op.f("messages_source_queue_id_fkey"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("messages_pkey")),
    )
    op.create_index(
        "messages_group_lease_idx",
        "messages",
        ["queue_id", "group_id", "lease_id"],
        unique=False,
        postgresql_where=sa.text("lease_id IS NOT NULL AND group_id IS NOT NULL"),
    )
    op.create_index(
        "messages_group_order_idx",
        "messages",
        ["queue_id", "group_id", "id"],
        unique=False,
        postgresql_where=sa.text("group_id IS NOT NULL"),
    )
    op.create_index("messages_sent_at_brin_idx", "messages", ["sent_at"], unique=False, postgresql_using="brin")
    op.create_index(
        "messages_standard_due_idx",
        "messages",
        ["queue_id", "visible_at"],
        unique=False,
        postgresql_where=sa.text("group_id IS NULL"),
    )
    for statement in RULES:
        op.execute(statement)


def downgrade() -> None:
    for statement in UNDO_RULES:
        op.execute(statement)
    op.drop_index("messages_standard_due_idx", table_name="messages", postgresql_where=sa.text("group_id IS NULL"))
    op.drop_index("messages_sent_at_brin_idx", table_name="messages", postgresql_using="brin")
    op.drop_index("messages_group_order_idx", table_name="messages", postgresql_where=sa.text("group_id IS NOT NULL"))
    op.drop_index(
        "messages_group_lease_idx",
        table_name="messages",
        postgresql_where=sa.text("lease_id IS NOT NULL AND group_id IS NOT NULL"),
    )
    op.drop_table("messages")
    op.drop_table("queues")
    op.drop_table("receive_attempts")
    op.drop_index("message_history_finished_at_brin_idx", table_name="message_history", postgresql_using="brin")
    op.drop_table("message_history")
    op.drop_index(
        "message_groups_available_idx",
        table_name="message_groups",
        postgresql_where=sa.text("available_at IS NOT NULL"),
    )
    op.drop_table("message_groups")
    op.drop_index("message_dedup_expires_at_idx", table_name="message_dedup")
    op.drop_table("message_dedup")
    op.execute("DROP SEQUENCE message_seq")
    for enum in ("message_state", "dedup_scope", "history_outcome"):
        op.execute(f"DROP TYPE {enum}")
