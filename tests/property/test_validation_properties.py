"""Properties of the pure input checks of app/service/validation.py, against oracles written
without regular expressions: queue names, the canonical body JSON, and whole send entries (which
fail only with the documented errors)."""

from __future__ import annotations

import json
import math
import string
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from app.domain import QueueAttributes, SendEntry
from app.errors import InvalidAttributes, InvalidMessage, InvalidQueueName, MessageTooLarge
from app.service.validation import (
    MAX_ATTRIBUTES,
    RANGES,
    canonical_json,
    check_attributes,
    check_entry,
    check_queue_name,
    content_dedup_id,
)
from tests.property.profile import PROPERTY

# -- queue names ---------------------------------------------------------------------------------

NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_-")
TOKEN_CHARACTERS = frozenset(string.ascii_letters + string.digits + string.punctuation)
ATTRIBUTE_NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_.-")


def is_queue_name(name: str) -> bool:
    """SQS: 1-75 of [A-Za-z0-9_-], optionally followed by `.fifo`."""
    base = name.removesuffix(".fifo")
    return 1 <= len(base) <= 75 and all(character in NAME_CHARACTERS for character in base)


# Near-valid names: a run of name characters, maybe `.fifo`, maybe a stray character after.
NEAR_NAMES = st.builds(
    lambda base, suffix, tail: base + suffix + tail,
    st.text(alphabet=sorted(NAME_CHARACTERS), max_size=80),
    st.sampled_from(["", ".fifo", ".FIFO", ".fifo.fifo", "fifo"]),
    st.sampled_from(["", "\n", " ", ".", "\x00", "é", "/"]),
)
NAMES = st.one_of(NEAR_NAMES, st.text(max_size=90))
VALID_NAMES = st.builds(
    lambda base, fifo: base + (".fifo" if fifo else ""),
    st.text(alphabet=sorted(NAME_CHARACTERS), min_size=1, max_size=75),
    st.booleans(),
)


@PROPERTY
@given(NAMES)
@example("a" * 75 + ".fifo").via("longest FIFO name")
@example("jobs\n").via("trailing newline")
@example(".fifo").via("suffix alone")
def test_queue_names_follow_the_sqs_rule(name: str) -> None:
    if is_queue_name(name):
        check_queue_name(name)
    else:
        with pytest.raises(InvalidQueueName):
            check_queue_name(name)


@PROPERTY
@given(VALID_NAMES, st.booleans())
def test_fifo_flag_matches_the_suffix(name: str, fifo: bool) -> None:
    if fifo == name.endswith(".fifo"):
        check_queue_name(name, fifo=fifo)
    else:
        with pytest.raises(InvalidQueueName):
            check_queue_name(name, fifo=fifo)


# -- bodies --------------------------------------------------------------------------------------

# What json.loads can give: NaN and infinities (it accepts them), NUL characters and lone surrogates
# (escaped in the JSON text), big numbers (below Python's 4300-digit cap, which json.loads enforces
# before the service sees a body), and nesting.
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(10**100), 10**100), st.floats(), st.text())
BODIES = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(), children, max_size=4)),
    max_leaves=20,
)


def storable(value: Any, depth: int = 0) -> bool:
    """Oracle: PostgreSQL jsonb takes it (no NUL, valid UTF-8, finite numbers), nested at most 64 deep."""
    if depth > 64:
        return False
    if isinstance(value, str):
        return "\x00" not in value and not any(0xD800 <= ord(character) <= 0xDFFF for character in value)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(storable(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(storable(key, depth + 1) and storable(item, depth + 1) for key, item in value.items())
    return True


def keys_sorted(encoded: bytes) -> bool:
    """Whether every object of the JSON text lists its keys in sorted order."""
    orders: list[list[str]] = []

    def remember(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        orders.append([key for key, _ in pairs])
        return dict(pairs)

    json.loads(encoded, object_pairs_hook=remember)
    return all(keys == sorted(keys) for keys in orders)


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@PROPERTY
@given(BODIES)
@example(nested(64)).via("deepest allowed")
@example(nested(65)).via("one level too deep")
@example({"\ud800": 1}).via("lone surrogate key")
def test_canonical_json_round_trips_or_refuses(body: Any) -> None:
    try:
        encoded = canonical_json(body)
    except InvalidMessage:
        assert not storable(body)
        return
    assert storable(body)
    decoded = json.loads(encoded)
    assert decoded == body
    assert keys_sorted(encoded)
    assert canonical_json(decoded) == encoded
    # The very text of the standard library's encoder with these options (the content hash of a
    # body must not change with how it is computed).
    standard = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert encoded == standard.encode()


@PROPERTY
@given(st.dictionaries(st.text(alphabet=string.ascii_letters), st.integers(), min_size=2), st.randoms())
def test_content_dedup_id_ignores_key_order(body: dict[str, int], random: Any) -> None:
    items = list(body.items())
    random.shuffle(items)
    assert content_dedup_id(canonical_json(dict(items))) == content_dedup_id(canonical_json(body))


# -- send entries and queue attributes ------------------------------------------------------------

VALID_TOKENS = st.text(alphabet=sorted(TOKEN_CHARACTERS), min_size=1, max_size=128)
STRAY = st.sampled_from(["\n", " ", "é", "\x00"])  # one character too many, from outside the alphabet
TOKENS = st.one_of(
    st.none(),
    VALID_TOKENS,
    st.builds(str.__add__, VALID_TOKENS, STRAY),
    st.text(alphabet=sorted(TOKEN_CHARACTERS), max_size=130),
    st.text(max_size=130),
)
ATTRIBUTES = st.dictionaries(
    st.one_of(
        st.text(alphabet=string.ascii_letters + "._-", min_size=1, max_size=260),
        st.builds(str.__add__, st.text(alphabet=string.ascii_letters, min_size=1, max_size=8), STRAY),
        st.text(max_size=10),
    ),
    st.one_of(st.text(max_size=20), st.text(alphabet="v", max_size=600), st.integers()),
    max_size=MAX_ATTRIBUTES + 2,
)
ENTRIES = st.builds(
    SendEntry,
    body=st.one_of(BODIES, st.text(alphabet="b", min_size=900, max_size=1100)),
    group_id=TOKENS,
    dedup_id=TOKENS,
    delay_seconds=st.one_of(st.none(), st.integers(-10, 1000)),
    attributes=ATTRIBUTES,
)
QUEUE_ATTRIBUTES = st.builds(
    QueueAttributes,
    fifo=st.booleans(),
    delay_seconds=st.integers(0, 900),
    max_message_bytes=st.sampled_from([1_024, 1_048_576]),
    content_based_deduplication=st.booleans(),
)


@st.composite
def queues_and_entries(draw: st.DrawFn) -> tuple[QueueAttributes, SendEntry]:
    """Half the entries get the group id and delay their queue kind asks for; the rest is free."""
    attrs, entry = draw(QUEUE_ATTRIBUTES), draw(ENTRIES)
    if draw(st.booleans()):
        group_id = draw(VALID_TOKENS) if attrs.fifo else None
        entry = replace(entry, group_id=group_id, delay_seconds=None if attrs.fifo else entry.delay_seconds)
    return attrs, entry


def is_token(value: str) -> bool:
    return 1 <= len(value) <= 128 and all(character in TOKEN_CHARACTERS for character in value)


def is_attribute_name(name: str) -> bool:
    return 1 <= len(name) <= 256 and all(character in ATTRIBUTE_NAME_CHARACTERS for character in name)


@PROPERTY
@given(queues_and_entries())
def test_check_entry_accepts_only_valid_entries(queue_and_entry: tuple[QueueAttributes, SendEntry]) -> None:
    attrs, entry = queue_and_entry
    try:
        dedup_id, delay, encoded = check_entry(attrs, entry)
    except (InvalidMessage, MessageTooLarge) as exc:
        event(type(exc).__name__)
        return
    event("accepted")
    assert storable(entry.body)
    assert encoded == canonical_json(entry.body)
    assert len(entry.attributes) <= MAX_ATTRIBUTES
    assert all(is_attribute_name(name) and isinstance(value, str) for name, value in entry.attributes.items())
    assert all(token is None or is_token(token) for token in (entry.group_id, entry.dedup_id))
    size = len(encoded) + sum(len((k + v).encode()) for k, v in entry.attributes.items())
    assert size <= attrs.max_message_bytes
    assert 0 <= delay <= 900
    if attrs.fifo:
        assert entry.group_id is not None and entry.delay_seconds is None and dedup_id is not None
    else:
        assert entry.group_id is None
    if entry.dedup_id is not None:
        assert dedup_id == entry.dedup_id
    elif attrs.content_based_deduplication:
        assert dedup_id == content_dedup_id(canonical_json(entry.body))
    else:
        assert dedup_id is None
    assert delay == (attrs.delay_seconds if entry.delay_seconds is None else entry.delay_seconds)


@PROPERTY
@given(st.fixed_dictionaries({key: st.integers(low - 2, high + 2) for key, (low, high) in RANGES.items()}))
def test_check_attributes_enforces_every_range(values: dict[str, int]) -> None:
    attrs = QueueAttributes(**values)  # type: ignore[arg-type]
    if all(low <= values[key] <= high for key, (low, high) in RANGES.items()):
        check_attributes(attrs)
    else:
        with pytest.raises(InvalidAttributes):
            check_attributes(attrs)
