"""What the API state machine sends: queue names of one example's own, queue attributes and
patches, message fields, receipt handles, and request bodies that no route accepts.

Text never holds NUL or lone surrogates and JSON never nests deep: those inputs are another
piece of work; here the subject is a connection's state across requests, failures included."""

from __future__ import annotations

import json
import string
from typing import Any

from hypothesis import strategies as st

from app.service.receipts import encode

# The queue names of an example, before its prefix: two of each kind, and a dead-letter queue of
# each kind (any queue may name any of them; the service refuses the wrong kind or a missing one).
STANDARD = ("a", "b", "dlq")
FIFO = ("a.fifo", "b.fifo", "dlq.fifo")
NAMES = STANDARD + FIFO
DEAD_LETTERS = ("dlq", "dlq.fifo")
GROUPS = ("g1", "g2", "g3")
CONSUMERS = ("w1", "w2")
DEDUP_IDS = ("d1", "d2")
URLSAFE = string.ascii_letters + string.digits + "-_"

TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
TOKEN = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


def mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`usual` three times in four, else `other` (st.one_of weighs its branches alike)."""
    return st.sampled_from([True, True, True, False]).flatmap(lambda pick: usual if pick else other)


def valid_queue_attributes(name: str, prefix: str) -> st.SearchStrategy[dict[str, Any]]:
    """A PUT body the service accepts for queue `name` (short name): its kind, attributes in
    range, and, but on a dead-letter queue, maybe the dead-letter queue of its kind."""
    fifo = name.endswith(".fifo")
    dead_letter = st.none()
    if name not in DEAD_LETTERS:
        dlq = prefix + ("dlq.fifo" if fifo else "dlq")
        dead_letter |= st.fixed_dictionaries({"queue": st.just(dlq), "max_receive_count": st.integers(1, 3)})
    return st.fixed_dictionaries(
        {"fifo": st.just(fifo)},
        optional={
            "visibility_timeout": st.sampled_from([0, 1, 30]),
            "delay_seconds": st.sampled_from([0, 0, 0, 2]),
            "retention_seconds": st.sampled_from([60, 345_600]),
            "max_message_bytes": st.sampled_from([1024, 1_048_576]),
            "receive_wait_seconds": st.sampled_from([0, 1]),
            "content_based_deduplication": st.booleans(),
            "deduplication_scope": st.sampled_from(["queue", "group"]),
            "dead_letter": dead_letter,
        },
    )


def queue_attributes(name: str, prefix: str) -> st.SearchStrategy[dict[str, Any]]:
    """A PUT body for queue `name` (short name): mostly one the service accepts; else the wrong
    kind, attributes out of range, a dead-letter queue of the other kind, missing or itself."""
    wild = st.fixed_dictionaries(
        {"fifo": st.booleans()},
        optional={
            "visibility_timeout": st.sampled_from([0, 43_201]),
            "delay_seconds": st.sampled_from([0, 901]),
            "retention_seconds": st.sampled_from([59, 60]),
            "receive_wait_seconds": st.sampled_from([0, 21]),
            "dead_letter": st.fixed_dictionaries(
                {
                    "queue": st.sampled_from([prefix + n for n in (*DEAD_LETTERS, "missing", name)]),
                    "max_receive_count": st.integers(0, 1001),
                }
            ),
        },
    )
    return mostly(valid_queue_attributes(name, prefix), wild)


def queue_patch(prefix: str) -> st.SearchStrategy[dict[str, Any]]:
    """A PATCH body: some attributes, in range or not, a kind change, a dead-letter change."""
    dead_letter = st.fixed_dictionaries(
        {
            "queue": st.sampled_from([prefix + n for n in (*DEAD_LETTERS, "a", "missing")]),
            "max_receive_count": st.integers(1, 3),
        }
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "fifo": st.booleans(),
            "visibility_timeout": st.sampled_from([0, 30, 43_201]),
            "delay_seconds": st.sampled_from([0, 1]),
            "receive_wait_seconds": st.sampled_from([0, 21]),
            "content_based_deduplication": st.booleans(),
            "deduplication_scope": st.sampled_from(["queue", "group"]),
            "dead_letter": st.none() | dead_letter,
        },
    )


# Tokens the service accepts (group and dedup ids): 1-128 letters, digits or ASCII punctuation.
ASCII_TOKEN = st.text(string.ascii_letters + string.digits + string.punctuation, min_size=1, max_size=12)
ATTRIBUTE_NAMES = st.text(string.ascii_letters + string.digits + "_.-", min_size=1, max_size=8)


def valid_message(fifo: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Fields of a send the service accepts on a queue of that kind (but for its size: a
    1 KiB queue refuses larger ones; and a FIFO send without a dedup id is refused unless
    the queue deduplicates by content)."""
    common = {
        "dedup_id": st.sampled_from(DEDUP_IDS) | ASCII_TOKEN,
        "attributes": st.dictionaries(ATTRIBUTE_NAMES, TEXT, max_size=3),
    }
    if fifo:
        return st.fixed_dictionaries({"body": JSON_VALUES, "group_id": st.sampled_from(GROUPS)}, optional=common)
    return st.fixed_dictionaries({"body": JSON_VALUES}, optional={**common, "delay_seconds": st.sampled_from([0, 1])})


# Anything the request model takes: group ids on standard queues and none on FIFO ones, tokens
# the service refuses, delays out of range, too many attributes, attribute names it refuses.
WILD_MESSAGE = st.fixed_dictionaries(
    {"body": JSON_VALUES},
    optional={
        "group_id": st.sampled_from(GROUPS) | TOKEN,
        "dedup_id": st.sampled_from(DEDUP_IDS) | TOKEN,
        "delay_seconds": st.sampled_from([0, 901]),
        "attributes": st.dictionaries(TOKEN, TEXT, max_size=11),
    },
)


def message(fifo: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Fields of a send to a queue of that kind: mostly accepted ones."""
    return mostly(valid_message(fifo), WILD_MESSAGE)


# Handles no delivery holds: malformed text, and well-formed ones of deliveries that never were.
FORGED_HANDLES = st.text(URLSAFE, min_size=1, max_size=40) | st.builds(encode, st.integers(0, 2**63 - 1), st.uuids())

# Bodies every POST, PUT and PATCH route refuses (400): not JSON, not an object, an unknown field.
NO_ROUTE_ACCEPTS = st.sampled_from([b"{", b"[1,", b"nul", b"\xff", b"[]", b"1", b'"x"']) | st.builds(
    lambda fields: json.dumps({**fields, "unknown_field": 1}).encode(), WILD_MESSAGE
)
