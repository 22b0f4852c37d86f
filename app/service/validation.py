"""Checks on client input that the database could not store or that break a queue's rules.

Pure functions, no I/O: they raise InvalidInput (InvalidQueueName, InvalidMessage, InvalidAttributes)
or MessageTooLarge.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from app.domain import QUEUE_NAME, TOKEN, MessageInput, QueueAttributes, TypedInput
from app.errors import InvalidAttributes, InvalidInput, InvalidMessage, InvalidQueueName, MessageTooLarge, quote

ATTRIBUTE_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,256}$")
MAX_ATTRIBUTES = 10
# SQS's data types: String, Number or Binary, optionally with a custom label after a period
# (`Number.int`, `Binary.gif`), 256 characters at most in all.
DATA_TYPE = re.compile(r"(String|Number|Binary)(\.[^\x00-\x1f]+)?")
MAX_DATA_TYPE = 256
# SQS's Number values: up to 38 significant digits, from 10^-128 to 10^+126 in magnitude.
NUMBER_DIGITS = 38
# A number as written in decimal (Decimal alone would also take "1_000", "Infinity", " 1").
NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
NUMBER_RANGE = (Decimal("1e-128"), Decimal("1e126"))
MAX_DEPTH = 64
# SQS's tag limits: tags per queue, characters of a key (at least 1) and of a value.
MAX_TAGS = 50
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
# SQS's bounds on a redrive policy's maxReceiveCount.
MAX_RECEIVE_COUNT = 1_000
# Queues a dead-letter queue may name as its allowed sources (SQS's sourceQueueArns: up to 10).
MAX_DEAD_LETTER_FOR = 10
# The characters outside what SQS accepts in a message body and in tags: those XML 1.0 can carry
# (#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF). Anything stored that the
# query protocol cannot write would make every later answer that includes it fail.
XML_REFUSED = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

RANGES = {
    "visibility_timeout": (0, 43_200),
    "delay_seconds": (0, 900),
    "retention_seconds": (60, 1_209_600),
    "max_message_bytes": (1_024, 1_048_576),
    "receive_wait_seconds": (0, 20),
}


def check_queue_name(name: str, fifo: bool | None = None) -> None:
    """Queue names as SQS: 1-75 of [A-Za-z0-9_-], plus `.fifo` exactly for FIFO queues."""
    # fullmatch, not match: `$` also matches before a trailing newline.
    if not QUEUE_NAME.fullmatch(name):
        raise InvalidQueueName(
            f"queue name {quote(name)} must be 1-75 letters, digits, '-' or '_', optionally ending in '.fifo'"
        )
    if fifo is not None and fifo != name.endswith(".fifo"):
        raise InvalidQueueName("a queue name ends in '.fifo' exactly when the queue is FIFO (fifo: true)")


def text_problem(value: str) -> str | None:
    """Why PostgreSQL could not store `value` as text, or None when it can: text (and a jsonb
    string) cannot hold the NUL character, and a lone surrogate (JSON's "\\ud800" decodes to
    one) has no UTF-8 form, so it cannot be sent to the database at all."""
    if "\x00" in value:
        return "cannot contain the NUL character (\\u0000)"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "must be Unicode text without lone surrogates (\\ud800-\\udfff)"
    return None


def check_text(label: str, value: str) -> None:
    """Free text that reaches SQL as a parameter: InvalidInput unless PostgreSQL can store it."""
    problem = text_problem(value)
    if problem is not None:
        raise InvalidInput(f"{label} {problem}")


def check_tag_keys(keys: list[str]) -> None:
    """Tag keys as SQS: 1 to 128 characters, text PostgreSQL can store."""
    for key in keys:
        if not 1 <= len(key) <= MAX_TAG_KEY:
            raise InvalidInput(f"a tag key must be 1 to {MAX_TAG_KEY} characters, not {len(key)}")
        check_text("a tag key", key)


def _check_tag_characters(label: str, value: str) -> None:
    # A tag is answered back over the query protocol as XML text; a character XML cannot carry
    # would make every ListQueueTags of the queue fail, so it is refused when set instead.
    if XML_REFUSED.search(value):
        raise InvalidInput(f"{label} may only contain characters XML 1.0 can carry (no control characters)")


def check_tags(tags: dict[str, str]) -> None:
    """Tags as SQS: at most 50, keys of 1 to 128 characters, values of 0 to 256."""
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"a queue has at most {MAX_TAGS} tags, not {len(tags)}")
    check_tag_keys(list(tags))
    for key, value in tags.items():
        if len(value) > MAX_TAG_VALUE:
            raise InvalidInput(f"a tag value must be at most {MAX_TAG_VALUE} characters, not {len(value)}")
        check_text("a tag value", value)
        _check_tag_characters("a tag key", key)
        _check_tag_characters("a tag value", value)


def check_attributes(attrs: QueueAttributes) -> None:
    """Ranges of the numeric attributes (the API checks them too; this guards other callers)."""
    for key, (low, high) in RANGES.items():
        value = getattr(attrs, key)
        if not low <= value <= high:
            raise InvalidAttributes(f"{key} must be between {low} and {high}, not {value}")
    # The upper bound is SQS's; it also keeps the count inside the database's integer column.
    if attrs.dead_letter is not None and not 1 <= attrs.dead_letter.max_receive_count <= MAX_RECEIVE_COUNT:
        raise InvalidAttributes(
            f"dead_letter.max_receive_count must be between 1 and {MAX_RECEIVE_COUNT},"
            f" not {attrs.dead_letter.max_receive_count}"
        )
    if attrs.dead_letter_for is not None:
        if len(attrs.dead_letter_for) > MAX_DEAD_LETTER_FOR:
            raise InvalidAttributes(f"dead_letter_for names at most {MAX_DEAD_LETTER_FOR} queues")
        for name in attrs.dead_letter_for:
            if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
                raise InvalidAttributes(f"dead_letter_for: {quote(str(name))} is not a queue name")


def _check_value(value: Any, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise InvalidMessage(f"body nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            raise InvalidMessage(f"body strings {problem}")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMessage("body numbers must be finite (no NaN or Infinity)")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_value(key, depth + 1)
            _check_value(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_value(item, depth + 1)


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# Compact, key-sorted, UTF-8, no NaN: json.JSONEncoder(sort_keys=True, separators=(",", ":"),
# ensure_ascii=False, allow_nan=False), whose encode() builds this same C encoder on every call
# (half the cost of encoding a small body); built once here. No circular-reference markers: a body
# parsed from JSON has no cycles, and a cycle would still end in RecursionError (refused below).
_CANONICAL_ENCODER = c_make_encoder(None, _not_json, encode_basestring, None, ":", ",", True, False, False)


def _canonical_text(body: Any) -> str:
    return "".join(_CANONICAL_ENCODER(body, 0))


def canonical_json(body: Any) -> bytes:
    """The body as compact, key-sorted UTF-8 JSON: its size and its content hash are taken from this.

    The encoder refuses NaN and infinities and lone surrogates by itself; the walk that looks for
    NUL characters and deep nesting runs only when the text shows either could be there (a NUL
    is always written as the escape \\u0000; nesting needs as many brackets), so a typical body
    is encoded once and scanned by two byte searches."""
    try:
        encoded = _canonical_text(body).encode("utf-8")
    except (UnicodeEncodeError, ValueError, TypeError, RecursionError) as exc:
        _check_value(body)  # a clearer reason when there is one (too deep, NUL, NaN)
        raise InvalidMessage(f"body is not storable JSON: {exc}") from None
    if b"\\u0000" in encoded or encoded.count(b"[") + encoded.count(b"{") > MAX_DEPTH:
        _check_value(body)
    return encoded


def content_dedup_id(encoded_body: bytes) -> str:
    """Content-based deduplication id: SHA-256 of the canonical body, in hex."""
    return hashlib.sha256(encoded_body).hexdigest()


def _check_number(name: str, value: str) -> None:
    if not NUMBER.fullmatch(value):
        raise InvalidMessage(f"attribute {quote(name)} of type Number must hold a number, not {quote(value)}")
    number = Decimal(value)
    # Exact: normalize() and abs() would round to the context's 28 digits first.
    significant = "".join(map(str, number.as_tuple().digits)).strip("0")
    low, high = NUMBER_RANGE
    if len(significant) > NUMBER_DIGITS or (number and not low <= number.copy_abs() <= high):
        raise InvalidMessage(
            f"attribute {quote(name)} of type Number must have at most {NUMBER_DIGITS} significant digits"
            " and lie between 1E-128 and 1E+126 in magnitude"
        )


def typed_size(entry: MessageInput) -> int:
    """Check the typed attributes of `entry` (attribute_types: data types other than String);
    the bytes they add to the message's size, as SQS counts them: name, data type and value."""
    typed: Mapping[str, TypedInput] = entry.attribute_types
    if len(typed) + len(entry.attributes) > MAX_ATTRIBUTES:
        raise InvalidMessage(f"a message has at most {MAX_ATTRIBUTES} attributes")
    size = 0
    for name, attribute in typed.items():
        if not ATTRIBUTE_NAME.fullmatch(name):
            raise InvalidMessage(f"attribute name {quote(name)} must be 1-256 of [A-Za-z0-9_.-]")
        if name in entry.attributes:
            raise InvalidMessage(f"attribute {quote(name)} is given twice (in attributes and attribute_types)")
        data_type = attribute.data_type
        kind = data_type.split(".", 1)[0]
        if len(data_type) > MAX_DATA_TYPE or not DATA_TYPE.fullmatch(data_type) or text_problem(data_type):
            raise InvalidMessage(
                f"attribute {quote(name)} has data type {quote(data_type)}: it must be String, Number or Binary,"
                f" optionally followed by a period and a label, at most {MAX_DATA_TYPE} characters"
            )
        if data_type == "String":
            raise InvalidMessage(f"attribute {quote(name)} is a String: String attributes go in attributes")
        value = attribute.value
        if not value:
            raise InvalidMessage(f"attribute {quote(name)} of type {quote(data_type)} needs a non-empty value")
        if kind == "Binary":
            size += len(_binary(name, value))
        else:
            check_text(f"attribute {quote(name)}", value)
            if kind == "Number":
                _check_number(name, value)
            size += len(value.encode())
        size += len(name) + len(data_type.encode())
    return size


def _binary(name: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error, and non-ASCII text
        raise InvalidMessage(f"attribute {quote(name)} of a Binary type must hold base64") from None


def typed_document(typed: Mapping[str, TypedInput]) -> dict[str, dict[str, str]]:
    """Typed attributes (checked by typed_size) as stored: name -> {"data_type", "value"}, a
    Binary value in canonical base64."""
    stored: dict[str, dict[str, str]] = {}
    for name, attribute in typed.items():
        value = attribute.value
        if attribute.data_type.startswith("Binary"):
            value = base64.b64encode(base64.b64decode(value)).decode()
        stored[name] = {"data_type": attribute.data_type, "value": value}
    return stored


def check_entry(attrs: QueueAttributes, entry: MessageInput) -> tuple[str | None, int, bytes]:
    """Validate one message against its queue; returns (dedup id to use, delay seconds, the body
    as canonical JSON)."""
    encoded = canonical_json(entry.body)
    size = len(encoded)
    if len(entry.attributes) > MAX_ATTRIBUTES:
        raise InvalidMessage(f"a message has at most {MAX_ATTRIBUTES} attributes")
    for key, value in entry.attributes.items():
        if not ATTRIBUTE_NAME.fullmatch(key):
            raise InvalidMessage(f"attribute name {quote(key)} must be 1-256 of [A-Za-z0-9_.-]")
        if not isinstance(value, str) or "\x00" in value:
            raise InvalidMessage(f"attribute {quote(key)} must be a string without NUL characters")
        try:
            size += len(key.encode("utf-8")) + len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidMessage(f"attribute {quote(key)} is not valid UTF-8 text") from None
    if entry.attribute_types:
        size += typed_size(entry)
    if entry.trace_header is not None:
        check_text("trace_header", entry.trace_header)
    if size > attrs.max_message_bytes:
        raise MessageTooLarge(
            f"message is {size} bytes (body and attributes); this queue accepts at most {attrs.max_message_bytes}"
        )
    for label, token in (("group_id", entry.group_id), ("dedup_id", entry.dedup_id)):
        if token is not None and not TOKEN.fullmatch(token):
            raise InvalidMessage(f"{label} must be 1-128 letters, digits or ASCII punctuation")

    if attrs.fifo:
        if entry.group_id is None:
            raise InvalidMessage("group_id is required on a FIFO queue")
        if entry.delay_seconds is not None:
            raise InvalidMessage(
                "per-message delay_seconds is not supported on FIFO queues; set the queue's delay_seconds"
            )
    elif entry.group_id is not None:
        raise InvalidMessage("group_id is only accepted on FIFO queues")

    dedup_id = entry.dedup_id
    if dedup_id is None and attrs.content_based_deduplication:
        dedup_id = content_dedup_id(encoded)
    if attrs.fifo and dedup_id is None:
        raise InvalidMessage("dedup_id is required on a FIFO queue without content_based_deduplication")

    delay = attrs.delay_seconds if entry.delay_seconds is None else entry.delay_seconds
    if not 0 <= delay <= 900:
        raise InvalidMessage("delay_seconds must be between 0 and 900")
    return dedup_id, delay, encoded
