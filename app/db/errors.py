"""Driver errors of a statement become the project's own, here and only here (app.db.statements
runs every statement through `translate`); a lost session or pool becomes Unavailable in
app.db.engine. Above app/db nothing catches, or imports, psycopg.

A violated constraint is told apart by its name, never by the message text:

    queues_dead_letter_queue_id_fkey   QueueInUse   a queue being deleted became another's DLQ
    message_dedup_pkey                 KeyTaken     a plain claim of dedup keys found one taken
    message_move_tasks_running_idx     MoveTaskInProgress   a second running move task of a queue
"""

from __future__ import annotations

from psycopg import errors

from app.errors import MoveTaskInProgress, QueueInUse


class KeyTaken(Exception):
    """A plain insert of claims (a backfill's first try) found a key already claimed: nothing of
    it is left (it ran in a savepoint), and the caller claims again the way a send does."""


# Constraint name -> the error its violation means.
CONSTRAINTS: dict[str, type[Exception]] = {
    "queues_dead_letter_queue_id_fkey": QueueInUse,
    "message_dedup_pkey": KeyTaken,
    "message_move_tasks_running_idx": MoveTaskInProgress,
}


def translate(exc: errors.Error) -> Exception:
    """The project's error for a driver error of a statement: by constraint name, for an
    integrity error whose constraint is listed; else `exc` itself (app.db.engine retries or
    translates what is left: deadlocks, lost sessions)."""
    if isinstance(exc, errors.IntegrityError):
        constraint = exc.diag.constraint_name
        if constraint in CONSTRAINTS:
            return CONSTRAINTS[constraint](f"constraint {constraint} refused the statement")
    return exc
