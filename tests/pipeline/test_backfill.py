"""`pqs pipeline backfill`: rows of files become messages exactly once, through the API's
enqueue path: re-runs and retried tasks enqueue nothing twice, whatever the dedup window did;
FIFO order, dedup and wake-ups behave as for sends; nothing is written when a row is refused."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pyarrow.parquet as pq
import pytest
from psycopg.rows import dict_row
from pyspark import SparkContext
from pyspark.sql import Row, SparkSession
from rich.console import Console

from app.db.engine import Database
from app.db.queues import queue_insert
from app.db.sessions import on_connection
from app.domain import QueueAttributes, SendEntry, SendResult
from app.pipeline.backfill import BackfillRefused, Fault, FaultPoint, Mapping, run_backfill
from app.pipeline.progress import Progress
from app.service.messages import MessageService
from app.service.wakeup import Wakeup

pytestmark = pytest.mark.xdist_group("pipeline")


def make_queue(db_url: str, name: str, **attributes: Any) -> None:
    attrs = QueueAttributes(fifo=name.endswith(".fifo"), **attributes)
    asyncio.run(on_connection(db_url, lambda conn: queue_insert(conn, name, attrs, None)))


def messages(db_url: str, queue: str) -> list[dict[str, Any]]:
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        return conn.execute(
            "SELECT m.id, m.body, m.group_id, m.dedup_id, m.attributes FROM messages m"
            " JOIN queues q ON q.id = m.queue_id WHERE q.name = %s ORDER BY m.id",
            (queue,),
        ).fetchall()


def counts(db_url: str) -> tuple[int, int]:
    """(messages, backfill keys) in the database."""
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM backfill_keys)").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def write_parquet(spark: SparkSession, path: Path, rows: list[dict[str, Any]]) -> str:
    spark.createDataFrame(rows).repartition(3).write.parquet(str(path))
    return str(path)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> str:
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def write_jsonl(path: Path, rows: list[Any]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_parquet_rows_are_enqueued_once(spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress) -> None:
    make_queue(db_url, "jobs")
    rows = [{"id": i, "task": "resize", "size": i % 4} for i in range(40)]
    rows += [{"id": 3, "task": "resize", "size": 3}]  # the same row twice: two messages
    source = write_parquet(spark, tmp_path / "in.parquet", rows)

    first = run_backfill(spark, db_url, "jobs", source, progress)

    assert (first.rows, first.enqueued, first.already, first.duplicates) == (41, 41, 0, 0)
    bodies = sorted(json.dumps(m["body"], sort_keys=True) for m in messages(db_url, "jobs"))
    assert bodies == sorted(json.dumps(r, sort_keys=True) for r in rows)

    again = run_backfill(spark, db_url, "jobs", source, progress, partitions=3)

    assert (again.rows, again.enqueued, again.already) == (41, 0, 41)
    assert counts(db_url) == (41, 41)


def backfill_jobs(context: SparkContext) -> set[int]:
    """Ids of the Spark jobs of backfills so far (Progress names a job's group after its step)."""
    tracker = context.statusTracker()
    return {job for step in range(1, 5) for job in tracker.getJobIdsForGroup(f"pqs-backfill-{step}")}


def test_rerun_looks_up_keys_in_a_task_per_core(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    # Each look-up task reads the queue's keys whole: a re-run of 6 tasks would read them 6 times.
    make_queue(db_url, "jobs.fifo", content_based_deduplication=True)
    rows = [{"id": i, "account": f"a{i % 7}"} for i in range(30)]
    source = write_parquet(spark, tmp_path / "in.parquet", rows)
    mapping = Mapping(group_id="account")
    run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=mapping, partitions=6)
    context = spark.sparkContext
    before = backfill_jobs(context)

    again = run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=mapping, partitions=6)

    assert (again.rows, again.enqueued, again.already) == (30, 0, 30)
    tracker = context.statusTracker()
    job = tracker.getJobInfo(max(backfill_jobs(context) - before))  # pass 1's: a re-run ends there
    assert job is not None
    last_stage = tracker.getStageInfo(max(job.stageIds))
    assert last_stage is not None
    assert last_stage.numTasks == context.defaultParallelism == 2


def test_fifo_csv_keeps_group_order_and_dedup(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    make_queue(db_url, "orders.fifo")
    rows = [
        {"seq": str(i), "account": f"a{i % 3}", "order": f"o{i}", "payload": json.dumps({"n": i})} for i in range(30)
    ]
    # o4's dedup id again, later in the same group: a duplicate of o4 (as a second send would be)
    rows.append({"seq": "30", "account": "a1", "order": "o4", "payload": json.dumps({"n": 99})})
    source = write_csv(tmp_path / "orders.csv", rows)
    mapping = Mapping(body="payload", group_id="account", dedup_id="order", order_by="seq")

    result = run_backfill(spark, db_url, "orders.fifo", source, progress, mapping=mapping)

    assert (result.rows, result.enqueued, result.duplicates) == (31, 30, 1)
    enqueued = messages(db_url, "orders.fifo")
    for group in ("a0", "a1", "a2"):
        in_group = [m["body"]["n"] for m in enqueued if m["group_id"] == group]
        assert in_group == [i for i in range(30) if f"a{i % 3}" == group]  # source order
    assert {m["dedup_id"] for m in enqueued} == {f"o{i}" for i in range(30)}
    with psycopg.connect(db_url) as conn:
        groups = conn.execute("SELECT count(*) FROM message_groups WHERE available_at IS NOT NULL").fetchone()
    assert groups == (3,)

    assert run_backfill(spark, db_url, "orders.fifo", source, progress, mapping=mapping).enqueued == 0


def test_json_lines_with_attributes_and_a_natural_key(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    make_queue(db_url, "mail")
    rows = [{"key": f"k{i}", "body": {"to": f"u{i}", "cc": None}, "attrs": {"kind": "welcome"}} for i in range(5)]
    rows.append({"key": "k5", "body": "plain text", "attrs": None})
    source = write_jsonl(tmp_path / "mail.jsonl", rows)
    mapping = Mapping(body="body", attributes="attrs", key="key")

    result = run_backfill(spark, db_url, "mail", source, progress, mapping=mapping)

    assert result.enqueued == 6
    enqueued = {json.dumps(m["body"], sort_keys=True): m["attributes"] for m in messages(db_url, "mail")}
    assert enqueued['{"cc": null, "to": "u0"}'] == {"kind": "welcome"}  # null fields kept
    assert enqueued['"plain text"'] == {}

    # the key column decides: the same keys with other bodies are already there
    changed = write_jsonl(tmp_path / "changed.jsonl", [{**r, "body": "changed"} for r in rows])
    assert run_backfill(spark, db_url, "mail", changed, progress, mapping=mapping).enqueued == 0


def test_exactly_once_does_not_depend_on_the_dedup_window(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    make_queue(db_url, "jobs.fifo")
    source = write_jsonl(tmp_path / "in.jsonl", [{"g": "g1", "d": f"d{i}", "n": i} for i in range(10)])
    mapping = Mapping(group_id="g", dedup_id="d")
    assert run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=mapping).enqueued == 10
    with psycopg.connect(db_url) as conn:  # every dedup id's window has ended
        conn.execute("UPDATE message_dedup SET expires_at = now() - interval '1 second'")

    again = run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=mapping)

    assert (again.enqueued, again.already) == (0, 10)
    assert counts(db_url) == (10, 10)


@pytest.mark.parametrize("when", ["before_commit", "after_commit"])
def test_a_retried_task_enqueues_no_duplicate(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress, when: FaultPoint
) -> None:
    make_queue(db_url, "jobs.fifo")
    rows = [{"g": f"g{i % 5}", "d": f"d{i}", "n": i} for i in range(50)]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    mapping = Mapping(group_id="g", dedup_id="d")
    record = tmp_path / "failures"

    result = run_backfill(
        spark, db_url, "jobs.fifo", source, progress, mapping=mapping, partitions=2, fault=Fault(when, str(record))
    )

    # The first attempt of task 0 failed, once, after enqueuing some of the rows in its
    # transaction; its retry found those rows already there (after_commit) or enqueued them
    # itself (before_commit: the failed attempt's transaction was rolled back).
    failures = record.read_text().splitlines() if record.exists() else []
    assert [f.split()[0] for f in failures] == [when]
    failed_attempt = int(failures[0].split()[1])
    assert failed_attempt > 0
    assert result.rows == 50 and result.enqueued + result.already == 50
    assert result.already == (failed_attempt if when == "after_commit" else 0)
    enqueued = messages(db_url, "jobs.fifo")
    assert sorted(m["body"]["n"] for m in enqueued) == list(range(50))
    assert counts(db_url) == (50, 50)


def test_fifo_rows_without_a_dedup_id_are_refused_before_anything_is_written(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    make_queue(db_url, "jobs.fifo")
    rows: list[dict[str, Any]] = [{"g": "g1", "d": f"d{i}", "n": i} for i in range(20)]
    rows[7]["d"] = None
    source = write_jsonl(tmp_path / "in.jsonl", rows)

    with pytest.raises(BackfillRefused, match=r"map a column to it \(--dedup-id\); nothing was written"):
        run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=Mapping(group_id="g"))
    with pytest.raises(BackfillRefused, match=r"1 of 20 rows cannot be enqueued.*dedup_id is required"):
        run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=Mapping(group_id="g", dedup_id="d"))
    assert counts(db_url) == (0, 0)


def test_rows_the_api_would_refuse_are_refused(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    make_queue(db_url, "small", max_message_bytes=1024)
    # a refused row is told with its file and line (a blank line counts)
    source = write_jsonl(tmp_path / "in.jsonl", [{"n": 1}, {"n": 2, "pad": "x" * 2000}, {"n": 3}])
    Path(source).write_text("\n" + Path(source).read_text())

    with pytest.raises(
        BackfillRefused, match=rf"1 of 3 rows .*\. {source}, line 3: .* this queue accepts at most 1024"
    ):
        run_backfill(spark, db_url, "small", source, progress)
    assert counts(db_url) == (0, 0)


def test_a_refused_csv_row_is_told_by_the_line_it_starts_on(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    make_queue(db_url, "small", max_message_bytes=1024)
    source = tmp_path / "notes.csv"
    # records spanning lines (LF, and CR LF inside a quoted value) before the one refused
    source.write_bytes(b'id,text\nn0,"one\ntwo\r\nthree"\nn1,short\nn2,' + b"x" * 2000 + b"\nn3,fine\n")
    mapping = Mapping(body="text", body_text=True)

    with pytest.raises(BackfillRefused, match=rf"1 of 4 rows .*\. {source}, line 6: .* at most 1024"):
        run_backfill(spark, db_url, "small", str(source), progress, mapping=mapping)


def test_parquet_rows_spark_cannot_vouch_for_are_checked_by_the_api_rules(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    make_queue(db_url, "small.fifo", max_message_bytes=1024)
    # A struct body: Spark stages the good rows itself, the two bad ones go to check_entry.
    rows = [{"g": "g1", "d": f"d{i}", "body": Row(n=i, pad="")} for i in range(20)]
    rows[3]["body"] = Row(n=3, pad="x" * 2000)
    rows[9]["d"] = None
    source = write_parquet(spark, tmp_path / "in.parquet", rows)
    mapping = Mapping(body="body", group_id="g", dedup_id="d")

    with pytest.raises(BackfillRefused, match=r"2 of 20 rows .*(accepts at most 1024|dedup_id is required)") as refused:
        run_backfill(spark, db_url, "small.fifo", source, progress, mapping=mapping)
    assert counts(db_url) == (0, 0)
    # each refused row is told with its file and row index, as pyarrow finds them
    for n in (3, 9):
        file, index = next(
            (f, ns.index(n))
            for f in sorted(Path(source).glob("*.parquet"))
            if n in (ns := [r["n"] for r in pq.read_table(f).column("body").to_pylist()])
        )
        assert f"{file}, row index {index}: " in str(refused.value)


def recording() -> tuple[Progress, io.StringIO]:
    """A Progress whose step lines go to a string."""
    out = io.StringIO()
    return Progress(Console(file=out, width=300)), out


def test_rows_spark_vouches_for_are_enqueued_in_one_pass(spark: SparkSession, db_url: str, tmp_path: Path) -> None:
    make_queue(db_url, "jobs.fifo")
    rows = [{"g": f"g{i % 3}", "d": f"d{i}", "at": i, "body": Row(n=i)} for i in range(30)]
    source = write_parquet(spark, tmp_path / "in.parquet", rows)
    mapping = Mapping(body="body", group_id="g", dedup_id="d", order_by="at")
    progress, out = recording()

    result = run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=mapping)

    assert (result.rows, result.enqueued, result.already, result.duplicates) == (30, 30, 0, 0)
    steps = out.getvalue()
    assert "backfill 2/4 enqueue, Spark checking each row: 30 rows in" in steps
    assert "backfill 3/4 count and check rows: skipped, Spark checked every row" in steps
    enqueued = messages(db_url, "jobs.fifo")
    for group in ("g0", "g1", "g2"):
        assert [m["body"]["n"] for m in enqueued if m["group_id"] == group] == [
            r["body"].n for r in rows if r["g"] == group
        ]


def test_a_row_spark_cannot_vouch_for_sends_the_run_through_the_checks(
    spark: SparkSession, db_url: str, tmp_path: Path
) -> None:
    make_queue(db_url, "jobs")
    # A control character: Spark's JSON escapes it unlike the API's, so Python stages the row.
    rows = [{"id": i, "note": "plain" if i != 7 else "bell\x07"} for i in range(20)]
    source = write_parquet(spark, tmp_path / "in.parquet", rows)
    progress, out = recording()

    result = run_backfill(spark, db_url, "jobs", source, progress)

    assert (result.rows, result.enqueued) == (20, 20)
    steps = out.getvalue()
    assert (
        "some rows need the API's checks in Python" in steps and "backfill 3/4 count and check rows: 20 rows" in steps
    )
    assert sorted(m["body"]["id"] for m in messages(db_url, "jobs")) == list(range(20))
    assert [m["body"]["note"] for m in messages(db_url, "jobs") if m["body"]["id"] == 7] == ["bell\x07"]
    assert counts(db_url) == (20, 20)


def test_backfill_and_api_sends_share_dedup(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    make_queue(db_url, "jobs.fifo")

    async def send(dedup_id: str) -> SendResult:
        db = Database(db_url, min_size=1, max_size=2)
        await db.open()
        try:
            [result] = await MessageService(db, None).send("jobs.fifo", [SendEntry({"api": 1}, "g1", dedup_id)])
        finally:
            await db.close()
        assert isinstance(result, SendResult)
        return result

    sent = asyncio.run(send("d1"))
    source = write_jsonl(tmp_path / "in.jsonl", [{"g": "g1", "d": f"d{i}", "n": i} for i in range(3)])

    result = run_backfill(spark, db_url, "jobs.fifo", source, progress, mapping=Mapping(group_id="g", dedup_id="d"))

    assert (result.enqueued, result.duplicates) == (2, 1)  # d1 was sent through the API first
    assert asyncio.run(send("d2")).duplicate  # and the API sees the backfill's dedup ids
    bodies = [m["body"] for m in messages(db_url, "jobs.fifo")]
    assert bodies == [{"api": 1}, {"n": 0}, {"n": 2}]  # mapped columns are not part of the body
    assert sent.sequence_number < messages(db_url, "jobs.fifo")[1]["id"]


async def test_a_backfill_wakes_long_polling_receivers(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress
) -> None:
    await on_connection(db_url, lambda conn: queue_insert(conn, "jobs", QueueAttributes(), None))
    source = write_jsonl(tmp_path / "in.jsonl", [{"n": 1}])
    db = Database(db_url, min_size=1, max_size=4)
    await db.open()
    wakeup = Wakeup(db_url)
    await wakeup.start()
    try:
        service = MessageService(db, wakeup)
        receive = asyncio.create_task(service.receive("jobs", max_messages=1, wait_seconds=20))
        await asyncio.sleep(0.3)  # parked: nothing to receive yet
        assert not receive.done()
        started = asyncio.get_running_loop().time()
        await asyncio.to_thread(run_backfill, spark, db_url, "jobs", source, progress)

        [message] = await asyncio.wait_for(receive, timeout=10)
        assert message.body == {"n": 1}
        assert asyncio.get_running_loop().time() - started < timedelta(seconds=19).total_seconds()
    finally:
        await wakeup.stop()
        await db.close()


# Fields as exports of free text hold them: newlines of both kinds, quotes, commas, non-ASCII.
FREE_TEXT = [
    "line one\nline two",
    'she said "hi", then left',
    "a\r\nwindows line",
    "",
    "café, à la carte",
    "✓",
    "plain",
]


@pytest.mark.parametrize(
    ("encoding", "ending"),
    [("utf-8", "\r\n"), ("utf-8", "\n"), ("utf-8-sig", "\r\n"), ("latin-1", "\n"), ("utf-16", "\r\n")],
)
def test_csv_is_read_as_rfc_4180(
    spark: SparkSession, db_url: str, tmp_path: Path, progress: Progress, encoding: str, ending: str
) -> None:
    queue = "notes-" + encoding.replace("-", "") + str(len(ending))
    make_queue(db_url, queue)
    texts = [t for t in FREE_TEXT if encoding != "latin-1" or t != "✓"]  # (latin-1 has no ✓)
    path = tmp_path / "notes.csv"
    with path.open("w", newline="", encoding=encoding) as out:
        # Quotes only what needs it ("\r\n" between records), but the empty text: "" is an empty
        # value and a field with nothing in it no value (null), as Spark reads CSV.
        writer = csv.writer(out, lineterminator=ending)
        writer.writerow(["id", "text"])
        writer.writerows([[f"n{i}", text] for i, text in enumerate(texts) if text])
        out.write(f'n-empty,""{ending}n-null,{ending}')
    stated = {"utf-8-sig": "utf-8"}.get(encoding, encoding)  # a BOM is read, not stated
    mapping = Mapping(body="text", body_text=True, key="id")

    result = run_backfill(spark, db_url, queue, str(path), progress, mapping=mapping, encoding=stated)

    assert (result.rows, result.enqueued) == (len(texts) + 1, len(texts) + 1)
    bodies = [m["body"] for m in messages(db_url, queue)]
    assert None in bodies  # the field with nothing in it
    assert sorted(b for b in bodies if b is not None) == sorted(texts)  # (a standard queue: any order)
    assert run_backfill(spark, db_url, queue, str(path), progress, mapping=mapping, encoding=stated).enqueued == 0
