"""`pqs pipeline backfill`: rows of Parquet, CSV or JSON-lines files -> messages of a queue, each
row exactly once, however often the run is repeated or one of its tasks retried.

A row enters the queue as a send's entry does, by the enqueue rules of app/service/enqueue.py,
the module MessageService's send uses. It is checked by the API's rules (check_entry), its dedup
scope and key are enqueue's (dedup_scope_key, dedup_key_text), a repeat of a dedup key in a task
is a duplicate of its first row (enqueue.repeats, in Arrow: rows.py), and each Spark task
enqueues its rows with `enqueue.enqueue_staged`, the staged sibling of a send's
`enqueue.enqueue_entries`: the same group fence before sequence numbers are drawn, the same
`message_insert` block, and `enqueue.wake_after_commit` after the commit. So dedup windows, FIFO
groups and long polls behave as for a send, and a send and a backfilled row deduplicate against
each other.

Exactly once. A dedup id is forgotten when its window ends, so it cannot carry this: every row
has a backfill key, kept for good in `backfill_keys`, the SHA-256 of the row's identity (the whole
row as JSON, or the `key` column) and of its occurrence number among identical rows. Identical
rows always land in one task (FIFO: by group; standard: by identity), so the keys come out the
same however the rows are split. A task claims its rows' keys in the transaction that enqueues
them: an attempt that fails before its commit leaves nothing, a retry after it finds the keys
claimed and enqueues nothing, a re-run enqueues 0. A duplicate by dedup id keeps its key too (it
is answered, like a duplicate send).

Two passes. Nothing is written unless every row can be enqueued: pass 1 checks the new rows
that Spark could not vouch for and refuses the run with the reasons; pass 2 reads the source
again (it must not change during a run) and enqueues. Into a queue that never had a backfill,
when Spark vouches for every row, pass 1 is skipped: a row that needs Python after all stops
pass 2's shuffle before any task writes, and the run goes on with both passes.

Staging. Where Spark can prove what check_entry accepts and writes (app/pipeline/staging.py),
the JVM makes the row's staging text; every other row is checked and staged by check_entry in
Python. A task gets its rows as Arrow record batches and makes its COPY text with Arrow's
kernels, so Python touches a row only when Spark did not stage it or when a key repeats. In its
one transaction a task COPYs its keys into a temporary table and claims them, COPYs the rows
whose key it claimed into another, and runs one insert. Into a queue with no earlier backfill
the rows are COPYed as they arrive, before the claim, and staged again only if some keys were
claimed already.

docs/pipeline.md describes the design for maintainers; `pqs bench pipeline` measures it and
docs/performance.md holds the current figures.

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
