"""A backfill row's staging text, computed by Spark when Spark can prove what the API would do.

The API checks a message with `check_entry` and stores its body as canonical JSON (compact,
keys sorted, UTF-8). For most rows of a Parquet or CSV file Spark can produce exactly that in the
JVM, without a Python worker touching the row: when the body's type holds only structs, arrays,
strings, integers and booleans, Spark's `to_json` of the body with its struct fields sorted by
name is the canonical JSON byte for byte, except where a string holds a control character
that Jackson escapes as `\\u00XX` with upper-case hex where Python writes lower-case; such rows,
and any row Spark cannot prove acceptable (a missing or malformed id, a body too large, ...), go
to Python and `check_entry` as before. Spark only ever says "this row passes, and this is its
text"; every refusal, and its message, still comes from `check_entry`.

`staged` is the row's line of the staging table (`message_stage_create`) without its position
and repeat flag, which the task adds: group id, dedup id, dedup scope key, body, attributes,
delay, in COPY text format. `dedup_key` is the scope key and the dedup id as one text
(app.service.enqueue.dedup_key_text; repeats of a dedup key in one task are not inserted, as in
a send's batch). Tests compare both with what the Python path and app.service.enqueue make of
the same rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.domain import TOKEN, QueueAttributes
from app.service.validation import MAX_DEPTH

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

# Python's fullmatch, in Java: `$` would also match before a final line break.
JAVA_TOKEN = TOKEN.pattern.removesuffix("$") + r"\z"
NULL = "\\N"  # COPY text's NULL


def staged_columns(
    raw: DataFrame,
    body: str | None,
    group_id: str | None,
    dedup_id: str | None,
    mapped: frozenset[str],
    attrs: QueueAttributes,
) -> tuple[Column, Column, Column] | None:
    """(staged, dedup_key, python) of the rows of `raw`: the first two null where the row needs
    Python, `python` true there (never null). None when no row can be staged by Spark (a body or
    id type whose JSON text Python would write differently, or a queue setting out of range).
    `python` is the test alone: a count of the rows that need Python does not build their text
    (Spark does not see that `staged IS NULL` needs only the condition)."""
    from pyspark.sql import functions as F

    types = {f.name: f.dataType for f in raw.schema.fields}
    if len(types) != len(raw.schema.fields) or not 0 <= attrs.delay_seconds <= 900:
        return None
    if body is not None:
        if not _plain(types[body], 0) or not _container(types[body]):
            return None
        value = _sorted(F.col(f"`{body}`"), types[body])
    else:
        names = sorted(n for n in types if n not in mapped)
        if not all(_plain(types[n], 1) for n in names):
            return None
        value = F.struct(*[_sorted(F.col(f"`{n}`"), types[n]).alias(n) for n in names])
    group = _token(raw, group_id)
    dedup = _token(raw, dedup_id)
    if (group_id is not None and group is None) or (dedup_id is not None and dedup is None):
        return None

    text = F.to_json(value, {"ignoreNullFields": "false"})
    ok = text.isNotNull() & ~text.contains("\\u") & (F.octet_length(text) <= attrs.max_message_bytes)
    if attrs.fifo:
        assert group is not None  # a FIFO backfill maps a group column (checked before)
        ok &= group.isNotNull() & group.rlike(JAVA_TOKEN)
    if dedup is not None:
        ok &= dedup.isNull() | dedup.rlike(JAVA_TOKEN)
    if attrs.content_based_deduplication:
        dedup = F.sha2(text, 256) if dedup is None else F.coalesce(dedup, F.sha2(text, 256))
    elif attrs.fifo:
        if dedup is None:
            return None
        ok &= dedup.isNotNull()
    # The scope key and the dedup key text as app.service.enqueue makes them (dedup_scope_key,
    # dedup_key_text), in the JVM; tests/pipeline/test_staging.py holds the two to each other.
    scope = group if attrs.deduplication_scope == "group" and group is not None else F.lit("")
    scope = F.coalesce(scope, F.lit(""))
    staged = F.concat_ws(
        "\t",
        _copy(group),
        _copy(dedup),
        _copy(scope),
        _copy(text),
        F.lit("{}"),  # no attributes (a row with attributes goes to Python)
        F.lit(str(attrs.delay_seconds)),
    )
    dedup_key = F.concat(scope, F.lit("\t"), dedup) if dedup is not None else F.lit(None).cast("string")
    return F.when(ok, staged), F.when(ok, dedup_key), ~F.coalesce(ok, F.lit(False))


def _plain(dtype: DataType, depth: int) -> bool:
    """Whether Spark's JSON of values of this type is Python's canonical JSON of them (once
    struct fields are sorted), and no value nests deeper than the API allows."""
    from pyspark.sql import types as T

    if depth > MAX_DEPTH:
        return False
    if isinstance(dtype, T.StructType):
        names = [f.name for f in dtype.fields]
        return len(set(names)) == len(names) and all(_plain(f.dataType, depth + 1) for f in dtype.fields)
    if isinstance(dtype, T.ArrayType):
        return _plain(dtype.elementType, depth + 1)
    return isinstance(dtype, (T.StringType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType))


def _container(dtype: DataType) -> bool:
    from pyspark.sql import types as T

    return isinstance(dtype, (T.StructType, T.ArrayType))


def _sorted(col: Column, dtype: DataType) -> Column:
    """`col` with the fields of every struct in it sorted by name (Python's sort_keys)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, T.StructType):
        fields = sorted(dtype.fields, key=lambda f: f.name)
        inner = [_sorted(col.getField(f.name), f.dataType).alias(f.name) for f in fields]
        return F.when(col.isNotNull(), F.struct(*inner))
    if isinstance(dtype, T.ArrayType) and _has_struct(dtype.elementType):
        element = dtype.elementType
        return F.transform(col, lambda item: _sorted(item, element))
    return col


def _has_struct(dtype: DataType) -> bool:
    from pyspark.sql import types as T

    if isinstance(dtype, T.StructType):
        return True
    return isinstance(dtype, T.ArrayType) and _has_struct(dtype.elementType)


def _token(raw: DataFrame, name: str | None) -> Column | None:
    """A group or dedup id column as the API gets it (numbers become their text); None when
    its type is not one Spark writes as Python would."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if name is None:
        return None
    dtype = raw.schema[name].dataType
    if isinstance(dtype, T.StringType):
        return F.col(f"`{name}`")
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return F.col(f"`{name}`").cast("string")
    return None


def _copy(value: Column | None) -> Column:
    """A text value in COPY text format (backslashes doubled; ids and compact JSON hold no raw
    tab or line break), NULL as \\N."""
    from pyspark.sql import functions as F

    if value is None:
        return F.lit(NULL)
    # Only a value that holds a backslash goes through `replace`, which looks for its pattern
    # by comparing byte arrays at every position, where `contains` tests one byte at a time.
    # Measured, 2M JSON texts of ~100 bytes, warm: 1.0 s with replace, 0.65 s like this, 0.6 s
    # for the text alone (a FIFO backfill of 1M rows: within its run-to-run noise).
    escaped = F.when(value.contains("\\"), F.replace(value, F.lit("\\"), F.lit("\\\\"))).otherwise(value)
    return F.coalesce(escaped, F.lit(NULL))


def copy_text(value: str | None) -> str:
    """A text value in COPY text format, NULL as \\N (the Python path's counterpart of _copy)."""
    if value is None:
        return NULL
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
