"""`pqs pipeline backfill`: rows of Parquet, CSV or JSON-lines files -> messages of a queue.

- spec.py    the column mapping, the source's format, early refusals, the result, a task's inputs
- plan.py    run_backfill: the source read, rows placed into tasks, the two passes
- task.py    what runs in a Spark task: pass 1's check, pass 2's transaction (claim, enqueue)
- rows.py    a task's rows as Arrow arrays: backfill keys, repeated dedup keys, COPY text
- entry.py   a row Spark did not stage, checked and staged by the API's check_entry
- faults.py  the test hook that fails a task before or after its commit
"""

from app.pipeline.backfill.faults import Fault, FaultPoint, InjectedFailure
from app.pipeline.backfill.plan import run_backfill
from app.pipeline.backfill.spec import BackfillRefused, BackfillResult, Mapping

__all__ = [
    "BackfillRefused",
    "BackfillResult",
    "Fault",
    "FaultPoint",
    "InjectedFailure",
    "Mapping",
    "run_backfill",
]
