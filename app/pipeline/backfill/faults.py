"""The backfill's test hook: a task that fails before or after its commit, on purpose.

run_backfill takes a Fault only from tests (tests/pipeline/test_backfill.py); a production run
passes none. It travels to the tasks in their Task, and only the task's transaction
(task.enqueue_rows) acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# Where the test hook (Fault) fails a task: inside its transaction, after the insert, or after
# the commit.
FaultPoint = Literal["before_commit", "after_commit"]


class InjectedFailure(RuntimeError):
    """The failure a test asked for (see Fault)."""


@dataclass(frozen=True)
class Fault:
    """A test hook: the first attempt of task 0 (when it has rows) fails at `when`, before or
    after its commit. It first appends "<when> <messages it enqueued>" to the file `record`: the
    task runs in a Spark Python worker, so a file is how a test learns that the failure happened."""

    when: FaultPoint
    record: str

    def inject(self, when: FaultPoint, enqueued: int) -> None:
        """Record the failure and raise it, if it is asked for at `when`."""
        if when != self.when:
            return
        with Path(self.record).open("a", encoding="utf-8") as record:
            record.write(f"{when} {enqueued}\n")
        raise InjectedFailure(f"injected failure {when.replace('_', ' ')} (test)")
