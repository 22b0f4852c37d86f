"""Rows Spark stages itself (staging.py) come out exactly as the API's check_entry path makes
them (canonical body, dedup ids, scope keys, COPY text), with the scope and dedup keys of the
enqueue rules (app/service/enqueue.py), and every row Spark cannot vouch for is left to Python:
control characters Jackson escapes otherwise, NUL, sizes over the limit, malformed or missing
ids, float bodies."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pyspark.sql import Row, SparkSession

from app.domain import QueueAttributes, SendEntry
from app.pipeline.backfill.entry import python_staged
from app.pipeline.backfill.plan import records
from app.pipeline.backfill.spec import Mapping, Task
from app.pipeline.staging import NULL
from app.service.enqueue import dedup_key_text, dedup_scope_key
from app.service.validation import check_entry

pytestmark = pytest.mark.xdist_group("pipeline")

LIMIT = 1_024
MAPPING = Mapping(body="body", group_id="grp", dedup_id="dedup")

# (label, who stages it, group, dedup id, body text): bodies are {"a": text}.
ROWS: list[tuple[str, str, str | None, str | None, str | None]] = [
    ("plain", "spark", "g1", "d1", "hello"),
    ("quotes", "spark", "g1", "d2", 'say "hi" \\ back/slash\ttab\nline\r\x08\x0c'),
    ("unicode", "spark", "g2", "d3", "é ü 😀 \u2028 \x7f"),
    ("odd id", "spark", "g2", "d!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "1"),
    ("at limit", "spark", "g3", "d4", "x" * (LIMIT - len('{"a":""}'))),
    ("no dedup id", "spark", "g3", None, "content"),
    ("control", "python", "g4", "d5", "vertical\x0btab"),
    ("nul", "python", "g4", "d6", "nul\x00"),
    ("over limit", "python", "g5", "d7", "x" * (LIMIT - len('{"a":""}') + 1)),
    ("bad group", "python", "g 6", "d8", "1"),
    ("no group", "python", None, "d9", "1"),
    ("long dedup", "python", "g7", "d" * 129, "1"),
    ("empty dedup", "python", "g7", "", "1"),
    ("null body", "python", "g8", "d10", None),
]


def staged_rows(
    spark: SparkSession, tmp_path: Path, attrs: QueueAttributes, rows: list[Row], mapping: Mapping, schema: str
) -> list[Row]:
    source = tmp_path / "in.parquet"
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(source))
    out = records(spark, str(source), "parquet", mapping, attrs)[0].select("record", "staged", "dedup_key", "python")
    found = out.collect()
    # `python` (what pass 1 counts) marks exactly the rows Spark left unstaged.
    assert [r["python"] for r in found] == [r["staged"] is None for r in found]
    return found


def task_for(attrs: QueueAttributes, mapping: Mapping) -> Task:
    return Task("", "q", 1, attrs, mapping, parse_string_body=True, dedup_window=300, mapped=mapping.mapped())


def assert_as_python(task: Task, rows: list[Row]) -> None:
    for row in rows:
        assert (row["staged"], row["dedup_key"]) == python_staged(task, row["record"]), row["record"]


@pytest.mark.parametrize("scope", ["queue", "group"])
def test_spark_stages_what_check_entry_would_make_and_leaves_the_rest(
    spark: SparkSession, tmp_path: Path, scope: str
) -> None:
    attrs = QueueAttributes(
        fifo=True, content_based_deduplication=True, deduplication_scope=scope, max_message_bytes=LIMIT
    )
    rows = [Row(label, group, dedup, None if text is None else Row(text)) for label, _, group, dedup, text in ROWS]

    out = staged_rows(
        spark, tmp_path, attrs, rows, MAPPING, "label string, grp string, dedup string, body struct<a: string>"
    )

    by_label = {json.loads(r["record"])["label"]: r for r in out}
    assert {label: by_label[label]["staged"] is not None for label, *_ in ROWS} == {
        label: who == "spark" for label, who, *_ in ROWS
    }
    assert_as_python(task_for(attrs, MAPPING), [r for r in out if r["staged"] is not None])


def test_nested_bodies_arrays_and_integers_as_python_writes_them(spark: SparkSession, tmp_path: Path) -> None:
    attrs = QueueAttributes(fifo=False, max_message_bytes=LIMIT)
    mapping = Mapping(body="body", dedup_id="dedup")
    schema = (
        "dedup long, body struct<z: struct<y: array<struct<b: long, a: int>>, x: string>, a: array<boolean>, m: string>"
    )
    rows = [Row(i, Row(Row([Row(2**62 + i, -i)], 'é\\"\t'), [True, False], None)) for i in range(3)]

    out = staged_rows(spark, tmp_path, attrs, rows, mapping, schema)

    assert all(r["staged"] is not None for r in out)
    assert_as_python(task_for(attrs, mapping), out)


def test_default_bodies_and_float_bodies(spark: SparkSession, tmp_path: Path) -> None:
    attrs = QueueAttributes(fifo=False)
    mapping = Mapping()
    plain = [Row(2, "x", None), Row(1, "y", "q")]
    floats = [Row(1, 0.1), Row(2, 1e-5)]

    out = staged_rows(spark, tmp_path / "plain", attrs, plain, mapping, "z long, a string, m string")
    out_floats = staged_rows(spark, tmp_path / "floats", attrs, floats, mapping, "n long, x double")

    assert all(r["staged"] is not None for r in out)
    assert_as_python(task_for(attrs, mapping), out)
    # Java writes 1.0E-5 where Python writes 1e-05: bodies with floats are Python's.
    assert [r["staged"] for r in out_floats] == [None, None]


def copy_value(field: str) -> str | None:
    """A group, dedup id or scope key back from COPY text (tokens: only a backslash is escaped)."""
    return None if field == NULL else field.replace("\\\\", "\\")


def generated_rows(count: int) -> list[Row]:
    """Rows of random group ids (some missing or malformed), dedup ids (some missing, some
    repeated, some with a backslash) and bodies."""
    pick = random.Random(19)
    groups = ["g1", "g2", "g\\3", "g.4", None, "bad group"]
    dedups = [None, "d1", "d2", "d\\3", "d-4", "x" * 128]
    return [
        Row(pick.choice(groups), pick.choice(dedups), Row(pick.choice(["a", "b", "é"]), pick.randrange(3)))
        for _ in range(count)
    ]


@pytest.mark.parametrize("dedup_column", [True, False])
def test_spark_scope_and_dedup_keys_are_the_enqueue_rules(
    spark: SparkSession, tmp_path: Path, dedup_column: bool
) -> None:
    source = tmp_path / "in.parquet"
    schema = "grp string, dedup string, body struct<a: string, n: long>"
    spark.createDataFrame(generated_rows(200), schema).coalesce(1).write.parquet(str(source))
    queues = [
        QueueAttributes(fifo=fifo, deduplication_scope=scope, content_based_deduplication=content)
        for fifo, scope in [(True, "queue"), (True, "group"), (False, "queue")]
        for content in (True, False)
    ]
    for attrs in queues:
        group_column = "grp" if attrs.fifo else None
        mapping = Mapping(body="body", group_id=group_column, dedup_id="dedup" if dedup_column else None)

        frame, _ = records(spark, str(source), "parquet", mapping, attrs)
        out = frame.select("record", "staged", "dedup_key").collect()

        staged = [r for r in out if r["staged"] is not None]
        assert staged or (attrs.fifo and not attrs.content_based_deduplication and not dedup_column), attrs
        for row in staged:
            record = json.loads(row["record"])
            group = record["grp"] if mapping.group_id else None
            entry = SendEntry(body=record["body"], group_id=group, dedup_id=record["dedup"] if dedup_column else None)
            dedup_id, _, _ = check_entry(attrs, entry)
            scope = dedup_scope_key(attrs, group)
            fields = row["staged"].split("\t")
            assert [copy_value(f) for f in fields[:3]] == [group, dedup_id, scope], (attrs, record)
            assert row["dedup_key"] == (None if dedup_id is None else dedup_key_text(scope, dedup_id)), (attrs, record)
