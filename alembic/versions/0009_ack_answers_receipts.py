"""pqs_ack answers which of its receipts it acked (their positions), not the sequence numbers

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# One group-commit flush acks the receipts of several requests in one call. Two of them may name
# one message under two leases: the stale receipt of a receive whose visibility timeout ran out
# (its ack retried through an outage, say) and the current one of the receive that got it again.
# Only the current one acks it, but an answer of sequence numbers alone told both callers their
# ack had succeeded. The function now answers the position (1-based) in its arrays of each receipt
# that acked a message: the caller maps it back to the whole receipt it sent, with nothing to decode
# but an integer (an answer of leases cost the service a UUID to parse per acked message).
# Otherwise as migration 0002 wrote it.
ACK = """
CREATE FUNCTION pqs_ack(
    p_queue_id int, p_queue_name text, p_ids bigint[], p_lease_ids uuid[], p_results jsonb[],
    p_now timestamptz
) RETURNS TABLE (entry bigint, woke boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_entries bigint[];
    v_groups text[];
    v_woke boolean := false;
BEGIN
    PERFORM 1 FROM message_groups g
    WHERE g.queue_id = p_queue_id
      AND g.group_id IN (SELECT m.group_id FROM messages m
                         WHERE m.queue_id = p_queue_id AND m.id = ANY(p_ids) AND m.group_id IS NOT NULL)
    ORDER BY g.group_id
    FOR UPDATE OF g;
    WITH r AS (
        SELECT * FROM unnest(p_ids, p_lease_ids, p_results) WITH ORDINALITY AS r(id, lease_id, result, entry)
    ),
    acked AS (
        DELETE FROM messages m
        USING r
        WHERE m.id = r.id AND m.lease_id = r.lease_id AND m.queue_id = p_queue_id
        RETURNING m.*, r.result, r.entry
    ),
    recorded AS (
        INSERT INTO message_history (
            queue_id, queue_name, message_id, sequence_number, group_id, dedup_id, sent_at,
            first_received_at, last_received_at, finished_at, receive_count, outcome, result, error
        )
        SELECT a.queue_id, p_queue_name, a.message_id, a.id, a.group_id, a.dedup_id, a.sent_at,
               a.first_received_at, a.last_received_at, coalesce(p_now, now()),
               a.receive_count, 'acked', a.result, a.last_error
        FROM acked a
    )
    SELECT array_agg(a.entry), array_agg(DISTINCT a.group_id) FILTER (WHERE a.group_id IS NOT NULL)
    INTO v_entries, v_groups
    FROM acked a;
    IF v_groups IS NOT NULL THEN
        SELECT coalesce(bool_or(rel.available_at IS NOT NULL), false) INTO v_woke
        FROM pqs_group_release(p_queue_id, v_groups, true, p_now) AS rel;
    END IF;
    RETURN QUERY SELECT unnest(coalesce(v_entries, '{}'::bigint[])), v_woke;
END $$
"""

# The function as migration 0002 wrote it.
PREVIOUS = """
CREATE FUNCTION pqs_ack(
    p_queue_id int, p_queue_name text, p_ids bigint[], p_lease_ids uuid[], p_results jsonb[],
    p_now timestamptz
) RETURNS TABLE (id bigint, woke boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_ids bigint[];
    v_groups text[];
    v_woke boolean := false;
BEGIN
    PERFORM 1 FROM message_groups g
    WHERE g.queue_id = p_queue_id
      AND g.group_id IN (SELECT m.group_id FROM messages m
                         WHERE m.queue_id = p_queue_id AND m.id = ANY(p_ids) AND m.group_id IS NOT NULL)
    ORDER BY g.group_id
    FOR UPDATE OF g;

    WITH r AS (
        SELECT * FROM unnest(p_ids, p_lease_ids, p_results) AS r(id, lease_id, result)
    ),
    acked AS (
        DELETE FROM messages m
        USING r
        WHERE m.id = r.id AND m.lease_id = r.lease_id AND m.queue_id = p_queue_id
        RETURNING m.*, r.result
    ),
    recorded AS (
        INSERT INTO message_history (
            queue_id, queue_name, message_id, sequence_number, group_id, dedup_id, sent_at,
            first_received_at, last_received_at, finished_at, receive_count, outcome, result, error
        )
        SELECT a.queue_id, p_queue_name, a.message_id, a.id, a.group_id, a.dedup_id, a.sent_at,
               a.first_received_at, a.last_received_at, coalesce(p_now, now()),
               a.receive_count, 'acked', a.result, a.last_error
        FROM acked a
    )
    SELECT array_agg(a.id), array_agg(DISTINCT a.group_id) FILTER (WHERE a.group_id IS NOT NULL)
    INTO v_ids, v_groups
    FROM acked a;

    IF v_groups IS NOT NULL THEN
        SELECT coalesce(bool_or(rel.available_at IS NOT NULL), false) INTO v_woke
        FROM pqs_group_release(p_queue_id, v_groups, true, p_now) AS rel;
    END IF;
    RETURN QUERY SELECT unnest(coalesce(v_ids, '{}'::bigint[])), v_woke;
END $$
"""

DROP = "DROP FUNCTION pqs_ack(int, text, bigint[], uuid[], jsonb[], timestamptz)"


def upgrade() -> None:
    # The answer's columns change, which CREATE OR REPLACE cannot do.
    op.execute(DROP)
    op.execute(ACK)


def downgrade() -> None:
    op.execute(DROP)
    op.execute(PREVIOUS)
