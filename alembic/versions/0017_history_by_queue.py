"""Index the message history by queue, so a queue's recent history is a short index read

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The dashboard's history page (GET /v1/queues/{name}/history) reads a queue's newest finished
# messages. message_history had only its primary key and a BRIN on finished_at: a quiet queue's
# last 20 rows among 10M of busy queues' meant reading the table back from its end until 20 of
# its rows turned up. (queue_id, id) walked backwards is the queue's history newest first,
# whatever the other queues wrote. Its price: every finished message (ack, dead letter, expiry,
# purge) adds one more btree entry (docs/dashboard.md). Built CONCURRENTLY, outside the
# migration's transaction, as 0007: a plain build would hold off every ack while it reads the
# table. A build that failed leaves an invalid index of this name behind; a rerun drops it first.
INDEX = "message_history_queue_idx"


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
        op.execute(f"CREATE INDEX CONCURRENTLY {INDEX} ON message_history (queue_id, id)")


def downgrade() -> None:
    op.drop_index(INDEX, table_name="message_history")
