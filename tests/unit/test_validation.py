"""Input rules that need no database."""

from __future__ import annotations

import base64

import pytest

from app.domain import QueueAttributes, SendEntry, TypedValue
from app.errors import InvalidMessage, InvalidQueueName, MessageTooLarge
from app.service.validation import canonical_json, check_entry, check_queue_name, content_dedup_id

FIFO = QueueAttributes(fifo=True)
STANDARD = QueueAttributes()


@pytest.mark.parametrize("name", ["a", "jobs", "A-b_c", "x" * 75, "jobs.fifo", "x" * 75 + ".fifo"])
def test_valid_names(name: str) -> None:
    check_queue_name(name)


@pytest.mark.parametrize("name", ["", "x" * 76, "a b", "a.b", "jobs.FIFO", "é", "a/b", ".fifo", "a\x00"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(InvalidQueueName):
        check_queue_name(name)


def test_fifo_suffix_must_match_kind() -> None:
    with pytest.raises(InvalidQueueName):
        check_queue_name("jobs", fifo=True)
    with pytest.raises(InvalidQueueName):
        check_queue_name("jobs.fifo", fifo=False)


def test_fifo_needs_group_and_dedup() -> None:
    with pytest.raises(InvalidMessage, match="group_id"):
        check_entry(FIFO, SendEntry(body=1, dedup_id="d"))
    with pytest.raises(InvalidMessage, match="dedup_id"):
        check_entry(FIFO, SendEntry(body=1, group_id="g"))
    assert check_entry(FIFO, SendEntry(body=1, group_id="g", dedup_id="d")) == ("d", 0, b"1")


def test_content_based_dedup_hashes_the_canonical_body() -> None:
    attrs = QueueAttributes(fifo=True, content_based_deduplication=True)
    first, _, _ = check_entry(attrs, SendEntry(body={"a": 1, "b": [1, 2]}, group_id="g"))
    second, _, _ = check_entry(attrs, SendEntry(body={"b": [1, 2], "a": 1}, group_id="g"))
    assert first == second == content_dedup_id(canonical_json({"a": 1, "b": [1, 2]}))
    other, _, _ = check_entry(attrs, SendEntry(body={"a": 2, "b": [1, 2]}, group_id="g"))
    assert other != first


def test_per_message_delay_only_on_standard_queues() -> None:
    with pytest.raises(InvalidMessage, match="delay"):
        check_entry(FIFO, SendEntry(body=1, group_id="g", dedup_id="d", delay_seconds=5))
    assert check_entry(STANDARD, SendEntry(body=1, delay_seconds=5)) == (None, 5, b"1")
    assert check_entry(QueueAttributes(delay_seconds=7), SendEntry(body=1)) == (None, 7, b"1")


def test_group_id_refused_on_standard_queues() -> None:
    with pytest.raises(InvalidMessage, match="group_id"):
        check_entry(STANDARD, SendEntry(body=1, group_id="g"))


def _deep(levels: int) -> object:
    nested: object = 1
    for _ in range(levels):
        nested = [nested]
    return nested


@pytest.mark.parametrize(
    "body",
    [float("nan"), float("inf"), {"k": "a\x00b"}, {"a\x00": 1}, "\ud800", _deep(100)],
    ids=["nan", "inf", "nul-value", "nul-key", "lone-surrogate", "too-deep"],
)
def test_unstorable_bodies_are_refused(body: object) -> None:
    with pytest.raises(InvalidMessage):
        check_entry(STANDARD, SendEntry(body=body))


def test_size_counts_body_and_attributes() -> None:
    attrs = QueueAttributes(max_message_bytes=1024)
    check_entry(attrs, SendEntry(body="x" * 1000))
    with pytest.raises(MessageTooLarge):
        check_entry(attrs, SendEntry(body="x" * 1000, attributes={"k": "v" * 30}))


def test_attribute_rules() -> None:
    with pytest.raises(InvalidMessage, match="at most 10"):
        check_entry(STANDARD, SendEntry(body=1, attributes={f"k{i}": "v" for i in range(11)}))
    with pytest.raises(InvalidMessage, match="attribute name"):
        check_entry(STANDARD, SendEntry(body=1, attributes={"bad name": "v"}))


@pytest.mark.parametrize("token", ["", "x" * 129, "has space", "é"])
def test_group_and_dedup_tokens(token: str) -> None:
    with pytest.raises(InvalidMessage):
        check_entry(FIFO, SendEntry(body=1, group_id=token, dedup_id="d"))
    with pytest.raises(InvalidMessage):
        check_entry(FIFO, SendEntry(body=1, group_id="g", dedup_id=token))


def _number(value: str) -> SendEntry:
    return SendEntry(body="x", attribute_types={"n": TypedValue("Number", value)})


@pytest.mark.parametrize("value", ["0", "-0.000", "1E126", "-1e+126", "1e-128", ".5", "5.", "+7", "1" * 38])
def test_numbers_sqs_takes(value: str) -> None:
    check_entry(QueueAttributes(), _number(value))


@pytest.mark.parametrize(
    "value", ["1_000", "\u0663", " 1", "1 ", "Infinity", "NaN", "0x10", "1e127", "1e-129", "1" * 39, "1.2.3", "", "-"]
)
def test_numbers_sqs_refuses(value: str) -> None:
    with pytest.raises(InvalidMessage):
        check_entry(QueueAttributes(), _number(value))


def test_typed_attributes_count_name_type_and_value() -> None:
    body = 100 * "b"  # stored as a JSON string: 102 bytes
    room = 1024 - 102 - len("n") - len("Binary")
    fits = SendEntry(body=body, attribute_types={"n": TypedValue("Binary", base64.b64encode(b"x" * room).decode())})
    check_entry(QueueAttributes(max_message_bytes=1024), fits)
    over = SendEntry(
        body=body, attribute_types={"n": TypedValue("Binary", base64.b64encode(b"x" * (room + 1)).decode())}
    )
    with pytest.raises(MessageTooLarge):
        check_entry(QueueAttributes(max_message_bytes=1024), over)
