"""A FIFO group still leased after some of its messages left waits only for those left

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from app.db.migrate import earlier_text

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# pqs_group_release (migration 0002) as before for a group with nothing left in flight under its
# lease; and now also for a group that still has: its expiry becomes the latest visibility left
# under the lease (group_extend's rule, app/db/queries/finish.sql). The messages that left (acked,
# nacked, moved, expired) held it until their own visibility timeout, which no longer concerns
# it. Before, such a group kept the expiry those messages gave it: a message a worker had shortened
# to 0 s (visible again at once) waited until the receive's visibility timeout, up to 12 hours,
# once the rest of its receive was acked. A group so freed at once (its expiry past) is answered
# too, so that an ack wakes the long polls (pqs_finish wakes when a group is answered with a time).
# The expiry is written only when it shrinks: the messages left can only lower the latest
# visibility under the lease (group_extend set it, under the group's lock, as every change of
# those messages is made), and a FIFO worker that acks a receive's messages one at a time would
# otherwise write its group's row again at every ack but the last. One update serves both
# cases, its look at the lease replacing 0002's NOT EXISTS: a FIFO ack's cost stays as it was.
GROUP_RELEASE = """
CREATE OR REPLACE FUNCTION pqs_group_release(
    p_queue_id int, p_group_ids text[], p_served boolean, p_now timestamptz
) RETURNS TABLE (group_id text, available_at timestamptz) LANGUAGE sql AS $$
    WITH head AS MATERIALIZED (
        -- Per group: its first message's due time, and the latest visibility of the messages
        -- still under its lease (NULL: none). The caller holds the groups' rows (locked), so
        -- the lease read here is the one the update below sees. Materialized: inlined into the
        -- update, it was planned so that an ack's buffers grew with the backlog
        -- (tests/db/test_function_cost.py).
        SELECT t.group_id,
               (SELECT m.visible_at FROM messages m
                WHERE m.queue_id = p_queue_id AND m.group_id = t.group_id
                ORDER BY m.id
                LIMIT 1) AS visible_at,
               -- (the lease as a value: its messages are then found through
               -- messages_group_lease_idx, where a join was planned as a walk of the group's)
               (SELECT max(m.visible_at) FROM messages m
                WHERE m.queue_id = p_queue_id AND m.group_id = t.group_id
                  AND m.lease_id = (SELECT l.lease_id FROM message_groups l
                                    WHERE l.queue_id = p_queue_id AND l.group_id = t.group_id)) AS held_until
        FROM unnest(p_group_ids) AS t(group_id)
    ),
    changed AS (
        -- Nothing left under the lease: released, as before. Something left: the lease stays,
        -- its expiry the latest visibility left, written only when that is earlier than the
        -- expiry it has (as when a receive's messages all had one timeout, it is not).
        UPDATE message_groups g
        SET lease_id = CASE WHEN h.held_until IS NULL THEN NULL ELSE g.lease_id END,
            available_at = CASE
                WHEN h.held_until IS NOT NULL THEN h.held_until
                WHEN h.visible_at IS NULL THEN NULL
                WHEN p_served THEN greatest(h.visible_at, coalesce(p_now, now()))
                WHEN g.lease_id IS NULL THEN greatest(h.visible_at, g.available_at)
                ELSE h.visible_at
            END
        FROM head h
        WHERE g.queue_id = p_queue_id
          AND g.group_id = h.group_id
          AND (h.held_until IS NULL OR h.held_until < g.available_at)
        RETURNING g.group_id, g.available_at, h.held_until IS NOT NULL AS held
    )
    -- Every released group; a held one only when its expiry is already past (free at once).
    SELECT c.group_id, c.available_at FROM changed c
    WHERE NOT c.held OR c.available_at <= coalesce(p_now, now())
$$
"""


def upgrade() -> None:
    op.execute(GROUP_RELEASE)


def downgrade() -> None:
    previous = earlier_text("0002_server_side_functions.py", "GROUP_RELEASE")
    op.execute(previous.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
