"""A receive whose client never had the answer can be undone: the receive count goes back down

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The message state rule of migration 0001 (pqs_message_transition) gains one move, for
# message_give_back: a receive whose client left before it had any of the answer is undone.
#   in_flight -> ready  a receive undone: lease cleared, count - 1; a message back to no receive
#                       at all has no first receipt either (the receive_count CHECK wants that)
# Counts still never jump, and go back only by one, with the lease that counted them. What the
# rule can no longer tell from a mistake is a return (a nack) that also takes its receive back;
# message_nack keeps the count, and tests/db/test_rules.py pins what is still refused.
TRANSITION = """
CREATE OR REPLACE FUNCTION pqs_message_transition() RETURNS trigger LANGUAGE plpgsql AS $$
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
  IF OLD.lease_id IS NOT NULL AND NEW.lease_id IS NULL AND NEW.receive_count = OLD.receive_count - 1
     AND (NEW.receive_count > 0 AND NEW.first_received_at = OLD.first_received_at
          OR NEW.receive_count = 0 AND NEW.first_received_at IS NULL) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'message %: % (lease %, received %) -> % (lease %, received %) is not allowed',
    OLD.id, OLD.state, OLD.lease_id, OLD.receive_count, NEW.state, NEW.lease_id, NEW.receive_count
    USING ERRCODE = 'check_violation', CONSTRAINT = 'messages_state_transition';
END $$
"""

# The rule as migration 0001 wrote it.
PREVIOUS = """
CREATE OR REPLACE FUNCTION pqs_message_transition() RETURNS trigger LANGUAGE plpgsql AS $$
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
"""


def upgrade() -> None:
    op.execute(TRANSITION)


def downgrade() -> None:
    op.execute(PREVIOUS)
