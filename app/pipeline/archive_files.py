"""The archive's files, written by Spark tasks in Python: each task reads one id range of the
history straight into Arrow (the ADBC PostgreSQL driver: COPY in binary, decoded in C++) and
writes it with pyarrow as one Parquet file per queue and day it holds, at
`queue=<name>/day=<yyyy-mm-dd>/batch=<n>/part-<task>.parquet`.

A file's name depends only on its batch, partition and task, and it appears under that name
whole: it is written under a hidden temporary name (a leading `.`, which Spark, pyarrow and
DuckDB skip when they list a directory) and then renamed. A retried or speculative attempt of a
task therefore replaces its files instead of adding to them; what a run that died left of a
batch is removed before the batch is written again (`remove_batch`), as the next run may cut the
batch into other tasks. Decision record: docs/decisions/archive-arrow-tasks.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import pyarrow as pa
    from pyarrow import fs as pafs

# The archive's columns as they are in its files, in order, with their Arrow types (the
# timestamps are instants: Parquet's TIMESTAMP(MICROS, isAdjustedToUTC=true)); the partition
# columns queue, day and batch are in the path only. archive.archive_schema() is Spark's view.
FILE_COLUMNS = (
    ("id", "int64"),
    ("queue_id", "int32"),
    ("message_id", "string"),
    ("sequence_number", "int64"),
    ("group_id", "string"),
    ("dedup_id", "string"),
    ("sent_at", "timestamp"),
    ("first_received_at", "timestamp"),
    ("last_received_at", "timestamp"),
    ("finished_at", "timestamp"),
    ("receive_count", "int32"),
    ("outcome", "string"),
    ("result", "string"),
    ("error", "string"),
)
PARTITION_COLUMNS = (("queue", "string"), ("day", "date"), ("batch", "int64"))
# What Spark escapes in a partition value (ExternalCatalogUtils): its reader decodes each `%XX`
# into one character, so only these ASCII characters may be escaped; any other stays as it is.
ESCAPED = frozenset([*map(chr, range(1, 0x20)), *"\"#%'*/:=?\\\x7f{[]^"])


@dataclass(frozen=True)
class Task:
    """One Spark task of a batch: history ids from_id < id <= to_id, into the batch's partitions."""

    database_url: str
    archive: str  # the archive's URI
    batch: int
    index: int
    from_id: int
    to_id: int


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type of a column type named in FILE_COLUMNS / PARTITION_COLUMNS."""
    import pyarrow as pa

    types = {
        "int32": pa.int32(),
        "int64": pa.int64(),
        "string": pa.string(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "date": pa.date32(),
    }
    return types[name]


def file_schema() -> pa.Schema:
    """The schema of every Parquet file of the archive."""
    import pyarrow as pa

    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in FILE_COLUMNS])


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's filesystem of the archive's URI and the archive's path in it: file: (local),
    hdfs:// (through Hadoop's libhdfs), s3:// and s3a:// (pyarrow's S3, with the usual AWS
    settings: its environment variables, ~/.aws, an instance's role)."""
    from pyarrow import fs as pafs

    if urlsplit(uri).scheme == "s3a":
        uri = "s3" + uri.removeprefix("s3a")
    return pafs.FileSystem.from_uri(uri)  # type: ignore[no-any-return]


def partition_value(value: str) -> str:
    """A partition value as a path segment, escaped as Spark escapes one (`%XX` for the ASCII
    characters of ESCAPED), which Spark's reader, and pyarrow's, turn back into the value."""
    return "".join(f"%{ord(c):02X}" if c in ESCAPED else c for c in value)


def remove_batch(uri: str, batch: int) -> int:
    """Remove the `batch=<n>` directories of a batch from the archive (what an interrupted write
    of it left); how many there were. Other batches are not touched."""
    from pyarrow import fs as pafs

    fs, root = filesystem(uri)
    if fs.get_file_info(root).type != pafs.FileType.Directory:
        return 0
    removed = 0
    for queue in _directories(fs, root, "queue="):
        for day in _directories(fs, queue, "day="):
            path = f"{day}/batch={int(batch)}"
            if fs.get_file_info(path).type == pafs.FileType.Directory:
                fs.delete_dir(path)
                removed += 1
    return removed


def _directories(fs: pafs.FileSystem, path: str, prefix: str) -> Iterator[str]:
    from pyarrow import fs as pafs

    for info in fs.get_file_info(pafs.FileSelector(path)):
        if info.type == pafs.FileType.Directory and info.base_name.startswith(prefix):
            yield info.path


def write_tasks(tasks: Iterable[Task]) -> Iterator[int]:
    """A Spark partition's tasks, each written (the rows each wrote)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    for task in tasks:
        yield write_task(task, attempt)


def write_task(task: Task, attempt: int = 0) -> int:
    """Read the task's id range from PostgreSQL into Arrow and write its partition files; the
    rows it wrote. `attempt` keeps the temporary names of two attempts of a task apart."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from app.pipeline.exports import history_rows_query

    rows = read_range(task.database_url, history_rows_query(task.from_id, task.to_id))
    if rows.num_rows == 0:
        return 0
    days = pc.cast(rows["finished_at"], pa.date32()).combine_chunks()  # UTC days: the timestamps are UTC
    queues = pc.dictionary_encode(rows["queue_name"]).combine_chunks()
    # One sort by (queue, day) as one integer, so each partition's rows are one slice; the sort
    # is stable, so each file holds its rows in id order.
    key = pc.add(
        pc.multiply(pc.cast(queues.indices, pa.int64()), 1 << 32),
        pc.cast(pc.cast(days, pa.int32()), pa.int64()),
    )
    order = pc.sort_indices(key)
    data = rows.select([name for name, _ in FILE_COLUMNS]).cast(file_schema()).take(order)
    keys = pc.take(key, order)
    ends = pc.run_end_encode(keys).run_ends.to_pylist()
    fs, root = filesystem(task.archive)
    start = 0
    for end in ends:
        first = order[start].as_py()
        queue = queues.dictionary[queues.indices[first].as_py()].as_py()
        day = days[first].as_py().isoformat()
        directory = f"{root}/queue={partition_value(queue)}/day={day}/batch={task.batch}"
        fs.create_dir(directory, recursive=True)
        name = f"part-{task.index:05d}.parquet"
        temporary = f"{directory}/.{name}.{attempt}.tmp"
        pq.write_table(data.slice(start, end - start), temporary, filesystem=fs)
        fs.move(temporary, f"{directory}/{name}")
        start = end
    return int(rows.num_rows)


def read_range(database_url: str, query: str) -> pa.Table:
    """The rows of `query`, read by the ADBC PostgreSQL driver (COPY in binary into Arrow)."""
    import adbc_driver_postgresql.dbapi as adbc

    with adbc.connect(database_url) as conn, conn.cursor() as cursor:
        cursor.execute(query)
        return cursor.fetch_arrow_table()
