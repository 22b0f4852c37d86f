"""Schema of PQS as SQLAlchemy Core metadata: the source of truth Alembic compares against.

Runtime queries do not go through SQLAlchemy; they are the named SQL blocks in `queries/*.sql`.
Triggers and functions live in the migrations (see `alembic/versions`).

Tables
- queues           one row per queue with its SQS-style attributes.
- messages         the hot table: every message not yet finished (ready, delayed or in flight).
- message_groups   one row per FIFO message group: its lease (the one receive that may hold
                   messages of the group in flight) and when the group can next be served.
- message_dedup    deduplication ids remembered for the dedup window, independent of messages.
- receive_attempts what a receive with an attempt id handed out, so a retry gets the same.
- message_consumers which consumer id received a message, under which lease (for `release`).
- message_history  append-only record of every finished message (acked, dead-lettered, expired,
                   purged); the Spark pipeline reads it. Rows leave only through pqs_history_prune.
- history_exports  the pipeline's archive batches: which history ids went to which archive, and
                   whether that write is committed (the archive's watermark) and pruned.
- message_move_tasks SQS's message move tasks: a redrive of a dead-letter queue advanced by the
                   maintenance leader at a bounded rate; the last 10 per queue are kept.
- backfill_keys    one key per row a backfill enqueued, so a rerun enqueues nothing twice.
- queue_minutes    per queue and minute: messages sent, acked and dead-lettered (each process's
                   counts, added at its flush) and the leader's latest count; kept 24 hours.
- queue_group_census per FIFO queue: its largest groups and oldest heads as the maintenance leader last counted.
- api_keys         API keys: public key id, SHA-256 of the key (never the key), scopes, revocation,
                   the sealed SQS secret access key.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    MetaData,
    Sequence,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, JSONB, UUID

metadata = MetaData(
    naming_convention={
        "ix": "%(table_name)s_%(column_0_N_name)s_idx",
        "uq": "%(table_name)s_%(column_0_N_name)s_key",
        "ck": "%(table_name)s_%(constraint_name)s_check",
        "fk": "%(table_name)s_%(column_0_N_name)s_fkey",
        "pk": "%(table_name)s_pkey",
    }
)

TS = DateTime(timezone=True)

message_state = Enum("ready", "in_flight", name="message_state", metadata=metadata)
dedup_scope = Enum("queue", "group", name="dedup_scope", metadata=metadata)
history_outcome = Enum("acked", "dead_lettered", "expired", "purged", name="history_outcome", metadata=metadata)

# Sequence numbers: one sequence for all queues, so a number names a message service-wide.
message_seq = Sequence("message_seq", metadata=metadata)

queues = Table(
    "queues",
    metadata,
    Column("id", Integer, Identity(), primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("fifo", Boolean, nullable=False),
    Column("visibility_timeout", Integer, nullable=False),
    Column("delay_seconds", Integer, nullable=False),
    Column("retention_seconds", Integer, nullable=False),
    Column("max_message_bytes", Integer, nullable=False),
    Column("receive_wait_seconds", Integer, nullable=False),
    Column("content_based_deduplication", Boolean, nullable=False),
    Column("deduplication_scope", dedup_scope, nullable=False),
    Column(
        "dead_letter_queue_id",
        Integer,
        ForeignKey("queues.id", ondelete="RESTRICT"),
        nullable=True,
    ),
    Column("max_receive_count", Integer, nullable=True),
    Column("created_at", TS, nullable=False, server_default=func.now()),
    Column("updated_at", TS, nullable=False, server_default=func.now()),
    # The queues that may name this one as their dead-letter queue; NULL: any (SQS's allowAll).
    Column("dead_letter_for", ARRAY(Text), nullable=True),
    CheckConstraint(r"name ~ '^[A-Za-z0-9_-]{1,75}(\.fifo)?$'", name="name"),
    CheckConstraint(r"fifo = (name ~ '\.fifo$')", name="fifo_suffix"),
    CheckConstraint("visibility_timeout BETWEEN 0 AND 43200", name="visibility_timeout"),
    CheckConstraint("delay_seconds BETWEEN 0 AND 900", name="delay_seconds"),
    CheckConstraint("retention_seconds BETWEEN 60 AND 1209600", name="retention_seconds"),
    CheckConstraint("max_message_bytes BETWEEN 1024 AND 1048576", name="max_message_bytes"),
    CheckConstraint("receive_wait_seconds BETWEEN 0 AND 20", name="receive_wait_seconds"),
    CheckConstraint(
        "(dead_letter_queue_id IS NULL) = (max_receive_count IS NULL) AND coalesce(max_receive_count, 1) >= 1",
        name="dead_letter",
    ),
    CheckConstraint("dead_letter_queue_id <> id", name="dead_letter_not_self"),
    CheckConstraint("coalesce(cardinality(dead_letter_for), 0) <= 10", name="dead_letter_for"),
)

# A queue's tags (SQS's TagQueue): apart from `queues`, whose row every send reads (0012).
queue_tags = Table(
    "queue_tags",
    metadata,
    Column("queue_id", Integer, ForeignKey("queues.id", ondelete="CASCADE"), primary_key=True),
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)

message_groups = Table(
    "message_groups",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    Column("group_id", Text, primary_key=True),
    # The receive that currently holds this group; NULL when no message of it is in flight.
    Column("lease_id", UUID(as_uuid=True), nullable=True),
    # When the group can next be served: its head's due time, or its lease's expiry.
    # NULL means the group has no message at all.
    Column("available_at", TS, nullable=True),
    # Target of the messages -> groups lease foreign key.
    UniqueConstraint("queue_id", "group_id", "lease_id"),
    CheckConstraint("lease_id IS NULL OR available_at IS NOT NULL", name="lease_has_expiry"),
    Index(
        "message_groups_available_idx",
        "queue_id",
        "available_at",
        postgresql_where=text("available_at IS NOT NULL"),
    ),
)

messages = Table(
    "messages",
    metadata,
    # The sequence number: ordering inside a group and the row's identity.
    Column("id", BigInteger, message_seq, primary_key=True, server_default=message_seq.next_value()),
    Column("queue_id", Integer, nullable=False),
    Column("message_id", UUID(as_uuid=True), nullable=False),
    Column("group_id", Text, nullable=True),
    Column("dedup_id", Text, nullable=True),
    Column("body", JSONB, nullable=False),
    Column("attributes", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("state", message_state, nullable=False, server_default=text("'ready'")),
    # Identifies the receive holding this message; part of its receipt handle.
    Column("lease_id", UUID(as_uuid=True), nullable=True),
    Column("receive_count", Integer, nullable=False, server_default=text("0")),
    Column("sent_at", TS, nullable=False),
    # Ready: when it becomes due. In flight: when its visibility timeout ends.
    Column("visible_at", TS, nullable=False),
    Column("first_received_at", TS, nullable=True),
    Column("last_received_at", TS, nullable=True),
    Column("last_error", JSONB, nullable=True),
    # Set on messages in a dead-letter queue: where redrive sends them back to.
    Column("source_queue_id", Integer, ForeignKey("queues.id", ondelete="SET NULL"), nullable=True),
    # Attributes of other data types than String (SQS's MessageAttributes; migration 0014):
    # name -> {"data_type", "value" (base64 for Binary types)}. NULL when none.
    Column("attribute_types", JSONB, nullable=True),
    # The key that sent the message (SQS's SenderId) and its AWSTraceHeader; NULL when none.
    Column("sender_id", Text, nullable=True),
    Column("trace_header", Text, nullable=True),
    CheckConstraint("(state = 'in_flight') = (lease_id IS NOT NULL)", name="lease_iff_in_flight"),
    CheckConstraint(
        "receive_count >= 0 AND (receive_count = 0) = (first_received_at IS NULL)"
        " AND (state = 'ready' OR receive_count >= 1)",
        name="receive_count",
    ),
    # At most one lease per group holds messages in flight: an in-flight message of a group
    # must carry the lease its group row holds now.
    ForeignKeyConstraint(
        ["queue_id", "group_id", "lease_id"],
        ["message_groups.queue_id", "message_groups.group_id", "message_groups.lease_id"],
        name="messages_group_lease_fkey",
    ),
    # Standard queues: receive scans due messages oldest first.
    Index(
        "messages_standard_due_idx",
        "queue_id",
        "visible_at",
        postgresql_where=text("group_id IS NULL"),
    ),
    # FIFO queues: a group's messages in sequence order (the head is the first entry).
    Index(
        "messages_group_order_idx",
        "queue_id",
        "group_id",
        "id",
        postgresql_where=text("group_id IS NOT NULL"),
    ),
    # FIFO queues: the messages a lease holds (also serves the lease foreign key).
    Index(
        "messages_group_lease_idx",
        "queue_id",
        "group_id",
        "lease_id",
        postgresql_where=text("lease_id IS NOT NULL AND group_id IS NOT NULL"),
    ),
    # Retention: cheap to maintain because sent_at grows with insertion order.
    Index("messages_sent_at_brin_idx", "sent_at", postgresql_using="brin"),
    # Deleting a queue: the foreign key's SET NULL finds the dead-letter messages that came from
    # it (without this, a scan of the whole table). Only DLQ messages have a source.
    Index(
        "messages_source_queue_idx",
        "source_queue_id",
        postgresql_where=text("source_queue_id IS NOT NULL"),
    ),
)

message_dedup = Table(
    "message_dedup",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    # '' for queue-wide scope, the group id for group scope.
    Column("scope_key", Text, primary_key=True),
    Column("dedup_id", Text, primary_key=True),
    Column("message_id", UUID(as_uuid=True), nullable=False),
    Column("sequence_number", BigInteger, nullable=False),
    Column("expires_at", TS, nullable=False),
    Index("message_dedup_expires_at_idx", "expires_at"),
)

receive_attempts = Table(
    "receive_attempts",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    Column("attempt_id", Text, primary_key=True),
    Column("sequence_numbers", ARRAY(BigInteger), nullable=False),
    Column("lease_ids", ARRAY(UUID(as_uuid=True)), nullable=False),
    Column("expires_at", TS, nullable=False),
)

message_consumers = Table(
    "message_consumers",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("queue_id", Integer, nullable=False),
    Column("consumer_id", Text, nullable=False),
    Column("lease_id", UUID(as_uuid=True), nullable=False),
    Index("message_consumers_consumer_idx", "queue_id", "consumer_id"),
)

message_history = Table(
    "message_history",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("queue_id", Integer, nullable=False),
    Column("queue_name", Text, nullable=False),
    Column("message_id", UUID(as_uuid=True), nullable=False),
    Column("sequence_number", BigInteger, nullable=False),
    Column("group_id", Text, nullable=True),
    Column("dedup_id", Text, nullable=True),
    Column("sent_at", TS, nullable=False),
    Column("first_received_at", TS, nullable=True),
    Column("last_received_at", TS, nullable=True),
    Column("finished_at", TS, nullable=False),
    Column("receive_count", Integer, nullable=False),
    Column("outcome", history_outcome, nullable=False),
    Column("result", JSONB, nullable=True),
    Column("error", JSONB, nullable=True),
    # Who sent the message (SQS's SenderId; migration 0014).
    Column("sender_id", Text, nullable=True),
    Index("message_history_finished_at_brin_idx", "finished_at", postgresql_using="brin"),
    # A queue's history newest first (the dashboard's history page; migration 0016).
    Index("message_history_queue_idx", "queue_id", "id"),
)

history_exports = Table(
    "history_exports",
    metadata,
    # The batch number; it is also the `batch` partition of the archive's Parquet files.
    Column("id", BigInteger, Identity(), primary_key=True),
    # Where the batch was written (the archive's URI).
    Column("archive", Text, nullable=False),
    # The history ids of the batch: from_id < id <= to_id.
    Column("from_id", BigInteger, nullable=False),
    Column("to_id", BigInteger, nullable=False),
    # Set together when the Parquet write succeeded and held every row of the range.
    Column("rows", BigInteger, nullable=True),
    Column("committed_at", TS, nullable=True),
    Column("pruned_at", TS, nullable=True),
    Column("started_at", TS, nullable=False, server_default=func.now()),
    CheckConstraint("to_id > from_id AND from_id >= 0", name="range"),
    CheckConstraint("(rows IS NULL) = (committed_at IS NULL) AND coalesce(rows, 0) >= 0", name="committed"),
    CheckConstraint("pruned_at IS NULL OR committed_at IS NOT NULL", name="pruned_after_commit"),
    # At most one batch of an archive is in progress at a time.
    Index("history_exports_pending_idx", "archive", unique=True, postgresql_where=text("committed_at IS NULL")),
    Index("history_exports_archive_idx", "archive", "to_id"),
)

message_move_tasks = Table(
    "message_move_tasks",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    # The dead-letter queue the messages leave; the tasks go with it.
    Column("source_queue_id", Integer, ForeignKey("queues.id", ondelete="CASCADE"), nullable=False),
    # NULL: each message goes back to its own source queue. Set NULL when that queue is deleted,
    # while destination_name stays: the runner then fails the task.
    Column("destination_queue_id", Integer, ForeignKey("queues.id", ondelete="SET NULL"), nullable=True),
    Column("destination_name", Text, nullable=True),
    # NULL: as fast as the runner goes.
    Column("max_per_second", Integer, nullable=True),
    Column("status", Text, nullable=False),
    Column("to_move", BigInteger, nullable=False),
    Column("moved", BigInteger, nullable=False, server_default=text("0")),
    Column("failure_reason", Text, nullable=True),
    Column("started_at", TS, nullable=False),
    # The last message of the dead-letter queue when the task started: later arrivals stay.
    Column("before_id", BigInteger, nullable=False),
    CheckConstraint("status IN ('RUNNING', 'COMPLETED', 'CANCELLED', 'FAILED')", name="status"),
    CheckConstraint("max_per_second IS NULL OR max_per_second BETWEEN 1 AND 500", name="max_per_second"),
    CheckConstraint("destination_queue_id IS NULL OR destination_name IS NOT NULL", name="destination"),
    Index("message_move_tasks_source_idx", "source_queue_id", "started_at"),
    # At most one running task per dead-letter queue (SQS's rule), race-free.
    Index(
        "message_move_tasks_running_idx",
        "source_queue_id",
        unique=True,
        postgresql_where=text("status = 'RUNNING'"),
    ),
    Index(
        "message_move_tasks_destination_idx",
        "destination_queue_id",
        postgresql_where=text("destination_queue_id IS NOT NULL"),
    ),
)

backfill_keys = Table(
    "backfill_keys",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    # SHA-256 of the row's identity (see app/pipeline/backfill/); kept for good, unlike dedup ids.
    Column("key", BYTEA, primary_key=True),
    CheckConstraint("octet_length(key) = 32", name="key"),
)

queue_minutes = Table(
    "queue_minutes",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    Column("minute", TS, primary_key=True),
    Column("sent", BigInteger, nullable=False, server_default=text("0")),
    Column("acked", BigInteger, nullable=False, server_default=text("0")),
    Column("dead_lettered", BigInteger, nullable=False, server_default=text("0")),
    # The maintenance leader's latest count in that minute; NULL: none fell in it.
    Column("visible", BigInteger, nullable=True),
    Column("in_flight", BigInteger, nullable=True),
    Column("delayed", BigInteger, nullable=True),
    Column("oldest_age_seconds", Float, nullable=True),
    CheckConstraint("minute = date_trunc('minute', minute)", name="minute"),
    Index("queue_minutes_minute_idx", "minute"),
)

queue_group_census = Table(
    "queue_group_census",
    metadata,
    Column("queue_id", Integer, primary_key=True),
    Column("counted_at", TS, nullable=False),
    Column("group_count", BigInteger, nullable=False),
    # The largest groups, and those with the oldest heads: [{"group_id", "messages"}], in order.
    Column("largest", JSONB, nullable=False),
    Column("oldest", JSONB, nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    # The public part of the key (`pqs_<id>_<secret>`): lookup, listing and revocation use it.
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    # SHA-256 of the whole key; the key itself is shown once and never stored.
    Column("secret_hash", BYTEA, nullable=False),
    # [{"queues": glob, "actions": [...]}], checked by app.access before it is written.
    Column("scopes", JSONB, nullable=False),
    Column("created_at", TS, nullable=False, server_default=func.now()),
    Column("revoked_at", TS, nullable=True),
    # The SQS secret access key sealed under the server key (app/sealing.py); NULL for keys
    # made before it existed, which cannot sign SQS requests.
    Column("sqs_secret", BYTEA, nullable=True),
    CheckConstraint("id ~ '^[0-9a-f]{12}$'", name="id"),
    CheckConstraint("octet_length(secret_hash) = 32", name="secret_hash"),
    CheckConstraint("jsonb_typeof(scopes) = 'array' AND jsonb_array_length(scopes) > 0", name="scopes"),
)
