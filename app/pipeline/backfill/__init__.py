"""`pqs pipeline backfill`: rows of Parquet, CSV or JSON-lines files -> messages of a queue."""

from app.pipeline.backfill.plan import (
    KEY_PREFIX,
    BackfillRefused,
    Fault,
    FaultPoint,
    Mapping,
    _claim,
    _copy_lines,
    _enqueue,
    _key_text,
    _queue,
    _Rows,
    _Task,
    python_staged,
    records,
    run_backfill,
)

__all__ = [
    "KEY_PREFIX",
    "BackfillRefused",
    "Fault",
    "FaultPoint",
    "Mapping",
    "_Rows",
    "_Task",
    "_claim",
    "_copy_lines",
    "_enqueue",
    "_key_text",
    "_queue",
    "python_staged",
    "records",
    "run_backfill",
]
