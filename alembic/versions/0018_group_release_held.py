"""A FIFO group still leased after some of its messages left waits only for those left

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

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
# otherwise write its group's row again at every ack but the last.
GROUP_RELEASE = """
CREATE OR REPLACE FUNCTION pqs_group_release(
    p_queue_id int, p_group_ids text[], p_served boolean, p_now timestamptz
) RETURNS TABLE (group_id text, available_at timestamptz) LANGUAGE sql AS $$
    WITH head AS (
        SELECT t.group_id,
               (SELECT m.visible_at FROM messages m
                WHERE m.queue_id = p_queue_id AND m.group_id = t.group_id
                ORDER BY m.id
                LIMIT 1) AS visible_at
        FROM unnest(p_group_ids) AS t(group_id)
    ),
    released AS (
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
    ),
    held AS (
        UPDATE message_groups g
        SET available_at = (
            SELECT max(m.visible_at) FROM messages m
            WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id AND m.lease_id = g.lease_id
        )
        FROM head h
        WHERE g.queue_id = p_queue_id
          AND g.group_id = h.group_id
          -- (NULL, nothing left under the lease, is `released`'s; an expiry that stays as it
          -- was, as when a receive's messages all had one timeout, is not written again)
          AND (
              SELECT max(m.visible_at) FROM messages m
              WHERE m.queue_id = g.queue_id AND m.group_id = g.group_id AND m.lease_id = g.lease_id
          ) < g.available_at
        RETURNING g.group_id, g.available_at
    )
    SELECT released.group_id, released.available_at FROM released
    UNION ALL
    SELECT held.group_id, held.available_at FROM held WHERE held.available_at <= coalesce(p_now, now())
$$
"""


def _previous(migration: str, name: str) -> str:
    """A function as an earlier migration wrote it, read from there (not written out again)."""
    path = Path(__file__).with_name(migration)
    spec = importlib.util.spec_from_file_location(f"pqs_migration_{migration[:4]}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(getattr(module, name))


def upgrade() -> None:
    op.execute(GROUP_RELEASE)


def downgrade() -> None:
    previous = _previous("0002_server_side_functions.py", "GROUP_RELEASE")
    op.execute(previous.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
