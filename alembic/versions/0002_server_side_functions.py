"""Receive, ack and group release as server-side functions: one round trip each; a FIFO
receive locks groups one at a time

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written by hand and reviewed. Each function is one statement from the service's side, so a
# receive or an ack costs one round trip and is atomic by itself.

# After messages of locked groups were acked, returned, moved or expired: a group with no
# message left in flight under its lease drops the lease. Its next turn:
#   no message left        NULL (drops out of the available index)
#   served (ack, nack)     when its head is due but not before now: the back of the rotation
#   not served, no lease   keeps its place (picked by a receive that had no room for it)
#   not served, lease gone when its head is due
GROUP_RELEASE = """
CREATE FUNCTION pqs_group_release(p_queue_id int, p_group_ids text[], p_served boolean, p_now timestamptz)
RETURNS TABLE (group_id text, available_at timestamptz) LANGUAGE sql AS $$
    WITH head AS (
        SELECT t.group_id,
               (SELECT m.visible_at FROM messages m
                WHERE m.queue_id = p_queue_id AND m.group_id = t.group_id
                ORDER BY m.id
                LIMIT 1) AS visible_at
        FROM unnest(p_group_ids) AS t(group_id)
    )
    UPDATE message_groups g
    SET lease_id = NULL,
        available_at = CASE
            WHEN h.visible_at IS NULL THEN NULL
            WHEN p_served THEN greatest(h.visible_at, coalesce(p_now, now()))
            WHEN g.lease_id IS NULL THEN greatest(h.visible_at, g.available_at)
            ELSE h.visible_at
        END
    FROM head h
    WHERE g.queue_id = p_queue_id
      AND g.group_id = h.group_id
      AND NOT EXISTS (
          SELECT 1 FROM messages m
          WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id AND m.lease_id = g.lease_id
      )
    RETURNING g.group_id, g.available_at
$$
"""

# Ack (both kinds): lock the groups of the named messages in group order (FIFO; standard
# messages have none), move the messages whose receipt is current to history as acked with
# the caller's result, and release the groups that have nothing left in flight. Returns the
# sequence numbers acked, each with `woke`: a released group has something due, so the caller
# should wake long-polls after the commit (NOTIFY is not sent from here: a NOTIFY in every ack
# transaction would serialise their commits on PostgreSQL's notify lock).
ACK = """
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

# A FIFO receive: the steps of a receive (pick, expire, heads, deliver) run inside the server,
# with an explicit cursor so that a group is locked only when the receive still has room for
# it (a FOR loop would prefetch, and so lock, many groups at once).
FIFO_RECEIVE = """
CREATE FUNCTION pqs_fifo_receive(
    p_queue_id int, p_limit int, p_visibility_timeout int, p_now timestamptz, p_max_receive_count int
) RETURNS TABLE (
    ord int, dead boolean, id bigint, message_id uuid, lease_id uuid, body jsonb, group_id text,
    dedup_id text, receive_count int, sent_at timestamptz, first_received_at timestamptz,
    attributes jsonb
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
                          m.receive_count, m.sent_at, m.first_received_at, m.attributes;
        ELSIF cardinality(v_dead) = 0 THEN
            -- Nothing to take (the head is not due, or the group is empty): drop an expired
            -- lease and let the group wait for its head (NULL when it has no message at all).
            PERFORM pqs_group_release(p_queue_id, ARRAY[v_group], false, p_now);
        END IF;
        -- Messages past max_receive_count: returned for the caller to move to the dead-letter
        -- queue; the caller then releases their group if nothing of it was delivered.
        RETURN QUERY
            SELECT v_ord, true, d.id, NULL::uuid, NULL::uuid, NULL::jsonb, v_group, NULL::text,
                   NULL::int, NULL::timestamptz, NULL::timestamptz, NULL::jsonb
            FROM unnest(v_dead) AS d(id);
    END LOOP;
    CLOSE groups;
END $$
"""


def upgrade() -> None:
    for function in (GROUP_RELEASE, ACK, FIFO_RECEIVE):
        op.execute(function)


def downgrade() -> None:
    op.execute("DROP FUNCTION pqs_fifo_receive(int, int, int, timestamptz, int)")
    op.execute("DROP FUNCTION pqs_ack(int, text, bigint[], uuid[], jsonb[], timestamptz)")
    op.execute("DROP FUNCTION pqs_group_release(int, text[], boolean, timestamptz)")
