"""What a backfill is given and what it answers: the column mapping, the source's format, the
refusals made before a row is read, the result, and what every Spark task carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING

from app.domain import QueueAttributes
from app.pipeline.backfill.faults import Fault
from app.pipeline.session import PipelineError

if TYPE_CHECKING:
    from app.domain import Queue

FORMATS = ("parquet", "csv", "json")
SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}


class BackfillRefused(PipelineError):
    """Some rows cannot be enqueued; nothing was written."""


@dataclass(frozen=True)
class Mapping:
    """Which source columns make a message. Without `body`, the columns not mapped to a group,
    dedup id or attributes are the body (a JSON object). A string body column of a Parquet or
    CSV file holds JSON text unless `body_text`; in JSON lines every value is JSON already."""

    body: str | None = None
    group_id: str | None = None
    dedup_id: str | None = None
    attributes: str | None = None
    key: str | None = None
    order_by: str | None = None
    body_text: bool = False

    def columns(self) -> list[str]:
        """The source columns named."""
        named = (self.body, self.group_id, self.dedup_id, self.attributes, self.key, self.order_by)
        return [c for c in named if c is not None]

    def mapped(self) -> frozenset[str]:
        """The columns that are not part of a default body."""
        return frozenset(c for c in (self.group_id, self.dedup_id, self.attributes) if c)


@dataclass(frozen=True)
class BackfillResult:
    """What a run did: rows read, enqueued, already there (an earlier run or attempt), and
    duplicates by dedup id (answered, not enqueued)."""

    queue: str
    rows: int = 0
    enqueued: int = 0
    already: int = 0
    duplicates: int = 0
    tasks: int = 0


@dataclass(frozen=True)
class Task:
    """What every Spark task needs (pickled to the executors)."""

    database_url: str
    queue: str
    queue_id: int
    attributes: QueueAttributes
    mapping: Mapping
    parse_string_body: bool
    dedup_window: int
    fault: Fault | None = None
    mapped: frozenset[str] = field(default_factory=frozenset)
    # False when no backfill enqueued into the queue before: every row is new, no look-up.
    look_up: bool = True


def source_format(source: str, fmt: str | None) -> str:
    """The source's format: given, or from its suffix."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise PipelineError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
        return fmt
    suffix = PurePath(source.rstrip("/")).suffix.lower()
    if suffix not in SUFFIXES:
        raise PipelineError(f"cannot tell the format of {source} from its name: give --format ({', '.join(FORMATS)})")
    return SUFFIXES[suffix]


def check_mapping(queue: Queue, mapping: Mapping, fmt: str) -> None:
    """What can be refused before reading a single row."""
    attrs = queue.attributes
    if fmt == "json" and any("'" in c or "]" in c for c in mapping.columns()):
        raise PipelineError("JSON-lines column names cannot contain ' or ]")
    if queue.fifo and mapping.group_id is None:
        raise BackfillRefused(
            f"{queue.name} is a FIFO queue: map a column to group ids (--group-id); nothing was written"
        )
    if queue.fifo and mapping.dedup_id is None and not attrs.content_based_deduplication:
        raise BackfillRefused(
            f"{queue.name} is a FIFO queue without content-based deduplication: every row needs a dedup id, "
            "map a column to it (--dedup-id); nothing was written"
        )
    if not queue.fifo and mapping.group_id is not None:
        raise BackfillRefused(f"{queue.name} is a standard queue: group ids are for FIFO queues; nothing was written")
