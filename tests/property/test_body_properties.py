"""`parse_body` (app/api/json_body.py), which every REST route reads its JSON body with: jiter
first, json.loads (refusing a repeated key) for what jiter refuses. Whatever the body, its value
or its error is json.loads's, but for a key given twice in an object, refused at any depth."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.api.json_body import NumberTooLong, RepeatedKey, parse_body
from tests.property.profile import PROPERTY

# Text with what jiter and json.loads could read apart: escapes, non-ASCII, lone surrogates.
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=8)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=20
)


def outcome(read: Any, body: bytes) -> str:
    try:
        return repr(read(body))
    except NumberTooLong:
        return "ValueError"  # json.loads's refusal of a long integer, named (parse_body's own)
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__


@PROPERTY
@given(VALUES, st.booleans())
def test_a_body_reads_as_json_loads_reads_it(value: Any, ascii_only: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert outcome(parse_body, body) == outcome(json.loads, body)


@pytest.mark.parametrize(
    "text",
    ['{"x": NaN}', "[Infinity, -Infinity]", '"\\ud800"', '\ufeff{"a": 1}', "[" * 300 + "]" * 300, "1" * 4400,
     "1e400", "-0", '{"a": 1} x', "", '"\u0001"', "[1,]"],
)  # fmt: skip
def test_what_jiter_refuses_reads_as_json_loads_reads_it(text: str) -> None:
    body = text.encode()
    assert outcome(parse_body, body) == outcome(json.loads, body)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 1}',
        '[{"a": [{"b": {"c": 1, "c": 2}}]}]',
        '{"\\u0061": 1, "a": 2}',
        '["\\ud800", {"k": 1, "k": 2}]',
    ],
)
def test_a_key_given_twice_is_refused_at_any_depth(text: str) -> None:
    with pytest.raises(RepeatedKey):
        parse_body(text.encode())
