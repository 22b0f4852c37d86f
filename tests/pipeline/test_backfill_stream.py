"""A backfill task into a queue no backfill had enqueued into stages its rows as they arrive,
before its claim; when the claim finds some of their keys claimed already, only the other rows
are enqueued, in their order, and the staged ones are not."""

from __future__ import annotations

import asyncio
import hashlib
import json

import psycopg
import pyarrow as pa
import pytest
from psycopg.rows import dict_row

from app.domain import QueueAttributes
from app.pipeline.backfill.plan import existing_queue
from app.pipeline.backfill.rows import KEY_PREFIX, Rows, copy_lines
from app.pipeline.backfill.spec import Mapping, Task
from app.pipeline.backfill.task import enqueue_rows
from tests.pipeline.test_backfill import counts, make_queue, messages

pytestmark = pytest.mark.xdist_group("pipeline")


def handed_row(record: str) -> tuple[dict[str, str | None], str]:
    """(handed() row of a row Python stages, its backfill key's hex digits)."""
    identity = hashlib.sha256(record.encode()).hexdigest()
    key0 = hashlib.sha256(bytes.fromhex(identity) + bytes(8)).hexdigest()
    row = {"key0": KEY_PREFIX + key0, "identity": identity, "record": record, "staged": None, "dedup_key": None}
    return row, key0


def batches(rows: list[dict[str, str | None]], size: int) -> list[pa.RecordBatch]:
    """The rows as Spark hands them to a task: record batches of `size` rows, text columns."""
    schema = pa.schema([(name, pa.string()) for name in rows[0]])
    return [pa.RecordBatch.from_pylist(rows[i : i + size], schema=schema) for i in range(0, len(rows), size)]


def test_rows_whose_key_was_claimed_already_are_not_enqueued_after_staging(db_url: str) -> None:
    make_queue(db_url, "jobs.fifo")
    queue = existing_queue(db_url, "jobs.fifo")
    mapping = Mapping(group_id="g", dedup_id="d")
    task = Task(
        database_url=db_url,
        queue=queue.name,
        queue_id=queue.id,
        attributes=queue.attributes,
        mapping=mapping,
        parse_string_body=False,
        dedup_window=300,
        mapped=mapping.mapped(),
        look_up=False,  # staged as they arrive
    )
    rows = [handed_row(json.dumps({"g": "g1", "d": f"d{n}", "n": n})) for n in range(5)]
    with psycopg.connect(db_url) as conn:  # rows 0 and 3 were enqueued by an earlier attempt
        for _, key in (rows[0], rows[3]):
            conn.execute("INSERT INTO backfill_keys (queue_id, key) VALUES (%s, %s)", (queue.id, bytes.fromhex(key)))

    outcome = asyncio.run(enqueue_rows(task, batches([row for row, _ in rows], 2), None))

    assert outcome == (3, 2, 0)
    assert [m["body"]["n"] for m in messages(db_url, "jobs.fifo")] == [1, 2, 4]
    assert counts(db_url) == (3, 5)
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        dedup = conn.execute("SELECT dedup_id FROM message_dedup ORDER BY dedup_id").fetchall()
    assert [d["dedup_id"] for d in dedup] == ["d1", "d2", "d4"]


def test_a_task_stages_the_rows_of_a_claim_with_repeated_dedup_keys_marked() -> None:
    task = Task(
        database_url="unused",
        queue="jobs.fifo",
        queue_id=1,
        attributes=QueueAttributes(fifo=True),
        mapping=Mapping(group_id="g", dedup_id="d"),
        parse_string_body=False,
        dedup_window=300,
    )
    rows = Rows(task)
    staged = ["g1\td0\t\t{}\t{}\t0", "g1\td1\t\t{}\t{}\t0", "g1\td0\t\t{}\t{}\t0"]
    for n, text in enumerate(staged):  # a batch a row: d0 comes again in the last one
        dedup = text.split("\t")[1]
        batch = {"key0": f"k{n}", "identity": f"i{n}", "record": None, "staged": text, "dedup_key": f"\t{dedup}"}
        rows.add(batches([batch], 1)[0])

    text = b"".join(bytes(chunk) for chunk in rows.stage_text([0, 2]))

    lines = [line.split(b"\t") for line in text.splitlines()]
    assert [(line[0], line[2], line[-1]) for line in lines] == [(b"0", b"g1", b"f"), (b"2", b"g1", b"t")]
    assert all(len(line[1]) == 32 for line in lines)  # a new message id each, as 32 hex digits
    assert rows.repeated()
    assert bytes(copy_lines(pa.array(["a", "b"]), pa.scalar("x"))) == b"a\tx\nb\tx\n"
