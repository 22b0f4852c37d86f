"""One function moves finished messages into history: pqs_finish (ack, purge, expiry, dead letters)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from app.db.migrate import earlier_text

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The columns a finished message leaves in message_history, and where each comes from, were
# written four times: in pqs_ack (migrations 0002, 0009) and in the message_dead_letter,
# message_purge and message_expire blocks; a column added to history had to be added to each.
# pqs_finish is now the one place. It is pqs_ack made general: it removes the messages it is
# given (under their receipts where a lease is given, else as held by the caller) and records
# each in history with the caller's outcome (and result, for an ack). With `p_release` it is
# the ack: the FIFO groups locked first, released after, `woke` telling whether one has
# something due; the other movers lock and release groups themselves, as before. It answers,
# per message removed, its position in the call, its sequence number and its group.
#
# The ack's cost is unchanged (one function call per statement, as pqs_ack was; a lease
# compared only where given): tests/db/test_function_cost.py bounds its buffers, and the bench's
# consume scenario times it. Purge and expiry now pick their messages first (in the caller's
# statement, by the same indexes) and hand their sequence numbers over; a dead letter is
# copied into its dead-letter queue first, then finished (app/db/moves.py).
FINISH = """
CREATE FUNCTION pqs_finish(
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
            first_received_at, last_received_at, finished_at, receive_count, outcome, result, error
        )
        SELECT g.queue_id, p_queue_name, g.message_id, g.id, g.group_id, g.dedup_id, g.sent_at,
               g.first_received_at, g.last_received_at, coalesce(p_now, now()),
               g.receive_count, p_outcome, g.result, g.last_error
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

DROP_FINISH = "DROP FUNCTION pqs_finish(int, text, history_outcome, bigint[], uuid[], jsonb[], timestamptz, boolean)"
DROP_ACK = "DROP FUNCTION pqs_ack(int, text, bigint[], uuid[], jsonb[], timestamptz)"


def upgrade() -> None:
    op.execute(FINISH)
    op.execute(DROP_ACK)


def downgrade() -> None:
    op.execute(earlier_text("0009_ack_answers_receipts.py", "ACK"))
    op.execute(DROP_FINISH)
