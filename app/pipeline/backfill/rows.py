"""A task's rows as Arrow arrays: their backfill keys, repeated dedup keys, and the COPY text of
the keys' and the staging table's rows, made with Arrow's kernels."""

from __future__ import annotations

import collections
import hashlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from app.ids import random_uuid_hex
from app.pipeline.backfill.entry import python_staged

if TYPE_CHECKING:
    import pyarrow as pa

    from app.pipeline.backfill.spec import Task

COPY_CHUNK_ROWS = 20_000  # lines per write to a COPY stream
KEY_PREFIX = "\\\\x"  # a bytea's hex digits follow; COPY text doubles the backslash


def _key(key0: str, identity: str, seen: dict[str, int]) -> str:
    """A row's backfill key as COPY text: SHA-256 of its identity and of its occurrence number
    among the task's rows of that identity so far (8 bytes, big-endian; all of them are in this
    task, see plan.placed()). Spark computed it for a first occurrence (`key0`); rows repeated
    whole are rare, their keys are computed here. `seen` counts the identities."""
    occurrence = seen.get(identity, 0)
    seen[identity] = occurrence + 1
    if not occurrence:
        return key0
    return KEY_PREFIX + hashlib.sha256(bytes.fromhex(identity) + occurrence.to_bytes(8, "big")).hexdigest()


def _keys(key0: pa.ChunkedArray, identity: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    """The backfill keys of a task's rows (COPY text), in their order: `key0` unless an identity
    repeats (a row repeated whole, rare), then counted by _key."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pc.count_distinct(identity).as_py() == len(identity):
        return key0
    seen: dict[str, int] = {}
    return pa.array(
        [_key(k, i, seen) for k, i in zip(key0.to_pylist(), identity.to_pylist(), strict=True)], pa.string()
    )


def _repeats(dedup: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """Whether each row's dedup key (dedup_key_text; null: none) is an earlier row's ("t"/"f"),
    None when no key repeats (the common case, told by one count). The rule is
    app.service.enqueue.repeats, a send's, over Arrow arrays: the first row with a key is
    enqueued, a repeat is answered as its duplicate, not inserted (a property test holds the
    two to the same answers)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keyed = len(dedup) - dedup.null_count
    if not keyed or pc.count_distinct(dedup).as_py() == keyed:
        return None
    seen: set[str] = set()
    flags: list[str] = []
    for key in dedup.to_pylist():
        flags.append("t" if key is not None and key in seen else "f")
        if key is not None:
            seen.add(key)
    return pa.array(flags, pa.string())


def copy_lines(*columns: pa.Array | pa.Scalar) -> memoryview:
    """COPY text of rows: the text columns (a scalar: the same for every row) joined by tabs, a
    line each, made by Arrow's kernels; a view of the result's bytes. As large strings (64-bit
    offsets): rows of bodies up to a queue's largest can pass 2 GB in one chunk."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wide = pa.large_string()
    joined = pc.binary_join_element_wise(*(c.cast(wide) for c in columns), pa.scalar("\t", wide))
    lines = pc.binary_join_element_wise(joined, pa.scalar("", wide), pa.scalar("\n", wide))  # a line, its break
    _, offsets, data = lines.buffers()
    at = memoryview(offsets).cast("q")
    return memoryview(data)[at[lines.offset] : at[lines.offset + len(lines)]]


def _positions(start: int, count: int) -> pa.Array:
    import pyarrow as pa

    return pa.array(range(start, start + count), pa.int64())


def key_text(keys: pa.ChunkedArray | pa.Array) -> Iterator[memoryview]:
    """The task's keys as COPY text (position, key), in chunks."""
    import pyarrow as pa

    for start in range(0, len(keys), COPY_CHUNK_ROWS):
        part = keys.slice(start, COPY_CHUNK_ROWS)
        if isinstance(part, pa.ChunkedArray):
            part = part.combine_chunks()
        yield copy_lines(_positions(start, len(part)).cast(pa.string()), part)


def _stage_text(positions: pa.Array, staged: pa.Array, repeat: pa.Array | None) -> Iterator[memoryview]:
    """The staging table's COPY text of rows, in chunks: position, a new message id, the row's
    staged text, and whether an earlier row of these has its dedup key (_repeats; None: none)."""
    import pyarrow as pa

    for start in range(0, len(positions), COPY_CHUNK_ROWS):
        count = min(COPY_CHUNK_ROWS, len(positions) - start)
        # one draw of random ids for a chunk, as a send's batch, as 32 hex digits each
        offsets = pa.py_buffer(array("i", range(0, 32 * count + 1, 32)).tobytes())
        ids = pa.StringArray.from_buffers(count, offsets, pa.py_buffer(random_uuid_hex(count).encode()))
        flags = pa.scalar("f") if repeat is None else repeat.slice(start, count)
        yield copy_lines(positions.slice(start, count).cast(pa.string()), ids, staged.slice(start, count), flags)


class Rows:
    """A task's rows as Spark hands them over (plan.handed(), Arrow record batches), kept as Arrow
    arrays: key0 and identity (for the backfill keys), and with staging text, every row's
    staged text and dedup key (a row Spark did not stage is staged by python_staged as it
    arrives) or, without (pass 1), the records Python checks."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.count = 0
        self.columns: dict[str, list[pa.Array]] = collections.defaultdict(list)

    def add(self, batch: pa.RecordBatch) -> None:
        """Keep a batch's rows."""
        for name in ("key0", "identity", "record"):
            self.columns[name].append(batch.column(name))
        if "staged" in batch.schema.names:
            staged, dedup = self._filled(batch)
            self.columns["staged"].append(staged)
            self.columns["dedup_key"].append(dedup)
        self.count += batch.num_rows

    def _filled(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
        """The batch's staged text and dedup keys, those of the rows Spark did not stage made by
        python_staged (checked in pass 1: a refusal now means the source changed during the run)."""
        import pyarrow as pa

        staged, dedup = batch.column("staged"), batch.column("dedup_key")
        if not staged.null_count:
            return staged, dedup
        texts, keys = staged.to_pylist(), dedup.to_pylist()
        for i, record in enumerate(batch.column("record").to_pylist()):
            if texts[i] is None:
                texts[i], keys[i] = python_staged(self.task, record)
        return pa.array(texts, pa.string()), pa.array(keys, pa.string())

    def column(self, name: str) -> pa.ChunkedArray:
        import pyarrow as pa

        return pa.chunked_array(self.columns[name], pa.string())

    def arriving(self, batches: Iterable[pa.RecordBatch]) -> Iterator[memoryview]:
        """Keep the batches as they arrive, and yield each one's staging-table COPY text (no
        repeats marked: see repeated())."""
        for batch in batches:
            start = self.count
            self.add(batch)
            yield from _stage_text(_positions(start, batch.num_rows), self.columns["staged"][-1], None)

    def keys(self) -> pa.ChunkedArray | pa.Array:
        return _keys(self.column("key0"), self.column("identity"))

    def repeated(self) -> bool:
        """Whether a dedup key repeats among the rows."""
        return _repeats(self.column("dedup_key")) is not None

    def stage_text(self, ords: Sequence[int]) -> Iterator[memoryview]:
        """The staging table's COPY text of the rows at `ords` (in order), taken a chunk at a time."""
        import pyarrow as pa

        positions = pa.array(ords, pa.int64())
        staged = self.column("staged").cast(pa.large_string())
        repeat = _repeats(self.column("dedup_key").take(positions))
        for start in range(0, len(positions), COPY_CHUNK_ROWS):
            part = positions.slice(start, COPY_CHUNK_ROWS)
            flags = None if repeat is None else repeat.slice(start, len(part))
            yield from _stage_text(part, staged.take(part).combine_chunks(), flags)
