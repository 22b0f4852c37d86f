"""Messages: typed attributes, sender id and trace header (SQS's MessageAttributes, SenderId,
AWSTraceHeader); the FIFO receive answers them, history keeps the sender

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op
from app.db.migrate import earlier_text

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The new columns are NULL when a message has none of them (as almost every message sent over
# REST), so a send without them writes nothing more. `attributes` keeps the String attributes
# (REST's and SQS's alike, name -> value); `attribute_types` holds the others, name ->
# {"data_type", "value"} (the value in base64 for Binary types).
COLUMNS = (
    ("attribute_types", postgresql.JSONB()),
    ("sender_id", sa.Text()),
    ("trace_header", sa.Text()),
)

# A message's content never changes once sent: the new columns join the guarded ones.
IMMUTABLE = """
CREATE TRIGGER messages_immutable
BEFORE UPDATE OF id, queue_id, message_id, group_id, dedup_id, body, attributes, sent_at,
    attribute_types, sender_id, trace_header
ON messages FOR EACH ROW EXECUTE FUNCTION pqs_message_immutable()
"""
PREVIOUS_IMMUTABLE = """
CREATE TRIGGER messages_immutable
BEFORE UPDATE OF id, queue_id, message_id, group_id, dedup_id, body, attributes, sent_at
ON messages FOR EACH ROW EXECUTE FUNCTION pqs_message_immutable()
"""

# pqs_fifo_receive as migration 0002 wrote it, answering also the new columns and the source
# queue of a dead-lettered message (SQS's DeadLetterQueueSourceArn).
FIFO_RECEIVE = """
CREATE FUNCTION pqs_fifo_receive(
    p_queue_id int, p_limit int, p_visibility_timeout int, p_now timestamptz, p_max_receive_count int
) RETURNS TABLE (
    ord int, dead boolean, id bigint, message_id uuid, lease_id uuid, body jsonb, group_id text,
    dedup_id text, receive_count int, sent_at timestamptz, first_received_at timestamptz,
    attributes jsonb, attribute_types jsonb, sender_id text, trace_header text, source_queue_id int
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_until timestamptz := coalesce(p_now, now()) + make_interval(secs => p_visibility_timeout);
    v_taken int := 0;
    v_ord int := 0;
    v_group text;
    v_old_lease uuid;
    v_lease uuid;
    v_deliver bigint[];
    v_dead bigint[];
    h record;
    -- Servable groups, longest-waiting first (the round robin); rows are locked as fetched.
    groups CURSOR FOR
        SELECT mg.group_id, mg.lease_id
        FROM message_groups mg
        WHERE mg.queue_id = p_queue_id AND mg.available_at <= v_now
        ORDER BY mg.available_at
        FOR UPDATE SKIP LOCKED;
BEGIN
    OPEN groups;
    WHILE v_taken < p_limit LOOP
        FETCH groups INTO v_group, v_old_lease;
        EXIT WHEN NOT FOUND;
        v_ord := v_ord + 1;
        -- The lease of this group ran out: its messages go back to ready, count kept.
        IF v_old_lease IS NOT NULL THEN
            UPDATE messages m SET state = 'ready', lease_id = NULL
            WHERE m.queue_id = p_queue_id AND m.group_id = v_group AND m.lease_id = v_old_lease;
        END IF;
        -- The group's due prefix, at most what the receive still has room for.
        v_deliver := '{}';
        v_dead := '{}';
        FOR h IN
            SELECT m.id, m.receive_count, m.visible_at
            FROM messages m
            WHERE m.queue_id = p_queue_id AND m.group_id = v_group
            ORDER BY m.id
            LIMIT p_limit - v_taken
        LOOP
            EXIT WHEN h.visible_at > v_now;
            IF p_max_receive_count IS NOT NULL AND h.receive_count >= p_max_receive_count THEN
                v_dead := v_dead || h.id;
            ELSE
                v_deliver := v_deliver || h.id;
            END IF;
        END LOOP;
        v_taken := v_taken + cardinality(v_deliver) + cardinality(v_dead);

        IF cardinality(v_deliver) > 0 THEN
            -- A new lease for the group, then its messages in flight under it.
            v_lease := gen_random_uuid();
            UPDATE message_groups mg SET lease_id = v_lease, available_at = v_until
            WHERE mg.queue_id = p_queue_id AND mg.group_id = v_group;
            RETURN QUERY
                UPDATE messages m
                SET state = 'in_flight', lease_id = v_lease, receive_count = m.receive_count + 1,
                    visible_at = v_until, first_received_at = coalesce(m.first_received_at, v_now),
                    last_received_at = v_now
                WHERE m.id = ANY(v_deliver)
                RETURNING v_ord, false, m.id, m.message_id, m.lease_id, m.body, m.group_id, m.dedup_id,
                          m.receive_count, m.sent_at, m.first_received_at, m.attributes,
                          m.attribute_types, m.sender_id, m.trace_header, m.source_queue_id;
        ELSIF cardinality(v_dead) = 0 THEN
            -- Nothing to take (the head is not due, or the group is empty): drop an expired
            -- lease and let the group wait for its head (NULL when it has no message at all).
            PERFORM pqs_group_release(p_queue_id, ARRAY[v_group], false, p_now);
        END IF;
        -- Messages past max_receive_count: returned for the caller to move to the dead-letter
        -- queue; the caller then releases their group if nothing of it was delivered.
        RETURN QUERY
            SELECT v_ord, true, d.id, NULL::uuid, NULL::uuid, NULL::jsonb, v_group, NULL::text,
                   NULL::int, NULL::timestamptz, NULL::timestamptz, NULL::jsonb,
                   NULL::jsonb, NULL::text, NULL::text, NULL::int
            FROM unnest(v_dead) AS d(id);
    END LOOP;
    CLOSE groups;
END $$
"""

# pqs_finish as migration 0010 wrote it, recording also who sent each message in history.
FINISH = """
CREATE OR REPLACE FUNCTION pqs_finish(
    p_queue_id int, p_queue_name text, p_outcome history_outcome, p_ids bigint[], p_lease_ids uuid[],
    p_results jsonb[], p_now timestamptz, p_release boolean
) RETURNS TABLE (entry bigint, id bigint, group_id text, woke boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_entries bigint[];
    v_ids bigint[];
    v_row_groups text[];
    v_groups text[];
    v_woke boolean := false;
BEGIN
    IF p_release THEN
        PERFORM 1 FROM message_groups g
        WHERE g.queue_id = p_queue_id
          AND g.group_id IN (SELECT m.group_id FROM messages m
                             WHERE m.queue_id = p_queue_id AND m.id = ANY(p_ids) AND m.group_id IS NOT NULL)
        ORDER BY g.group_id
        FOR UPDATE OF g;
    END IF;
    WITH r AS (
        SELECT * FROM unnest(p_ids, p_lease_ids, p_results) WITH ORDINALITY AS r(id, lease_id, result, entry)
    ),
    gone AS (
        DELETE FROM messages m
        USING r
        WHERE m.id = r.id AND (r.lease_id IS NULL OR m.lease_id = r.lease_id) AND m.queue_id = p_queue_id
        RETURNING m.*, r.result, r.entry
    ),
    recorded AS (
        INSERT INTO message_history (
            queue_id, queue_name, message_id, sequence_number, group_id, dedup_id, sent_at,
            first_received_at, last_received_at, finished_at, receive_count, outcome, result, error,
            sender_id
        )
        SELECT g.queue_id, p_queue_name, g.message_id, g.id, g.group_id, g.dedup_id, g.sent_at,
               g.first_received_at, g.last_received_at, coalesce(p_now, now()),
               g.receive_count, p_outcome, g.result, g.last_error, g.sender_id
        FROM gone g
    )
    SELECT array_agg(g.entry), array_agg(g.id), array_agg(g.group_id),
           array_agg(DISTINCT g.group_id) FILTER (WHERE g.group_id IS NOT NULL)
    INTO v_entries, v_ids, v_row_groups, v_groups
    FROM gone g;
    IF p_release AND v_groups IS NOT NULL THEN
        SELECT coalesce(bool_or(rel.available_at IS NOT NULL), false) INTO v_woke
        FROM pqs_group_release(p_queue_id, v_groups, true, p_now) AS rel;
    END IF;
    RETURN QUERY
        SELECT u.entry, u.id, u.group_id, v_woke
        FROM unnest(coalesce(v_entries, '{}'), coalesce(v_ids, '{}'), coalesce(v_row_groups, '{}'))
            AS u(entry, id, group_id);
END $$
"""

DROP_FIFO_RECEIVE = "DROP FUNCTION pqs_fifo_receive(int, int, int, timestamptz, int)"


def upgrade() -> None:
    for name, kind in COLUMNS:
        op.add_column("messages", sa.Column(name, kind, nullable=True))
    op.execute("DROP TRIGGER messages_immutable ON messages")
    op.execute(IMMUTABLE)
    # The answer's columns change, which CREATE OR REPLACE cannot do.
    op.execute(DROP_FIFO_RECEIVE)
    op.execute(FIFO_RECEIVE)
    op.add_column("message_history", sa.Column("sender_id", sa.Text(), nullable=True))
    op.execute(FINISH)


def downgrade() -> None:
    previous_finish = earlier_text("0010_history_written_once.py", "FINISH")
    op.execute(previous_finish.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.drop_column("message_history", "sender_id")
    op.execute(DROP_FIFO_RECEIVE)
    op.execute(earlier_text("0002_server_side_functions.py", "FIFO_RECEIVE"))
    op.execute("DROP TRIGGER messages_immutable ON messages")
    op.execute(PREVIOUS_IMMUTABLE)
    for name, _ in reversed(COLUMNS):
        op.drop_column("messages", name)
