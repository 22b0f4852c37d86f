"""The MD5 digests SQS returns beside a message, computed exactly as SQS computes them.

SDKs compare them with their own computation and fail the call on a difference (the Java SDK's
MessageMD5ChecksumInterceptor, the Ruby SDK's Md5s plugin check attributes; boto3 checks none;
the JavaScript v3 SDK checks bodies). They prove nothing about integrity that TLS does not; they
must simply be right.

- MD5OfMessageBody: the hex MD5 of the body's UTF-8 bytes.
- MD5OfMessageAttributes and MD5OfMessageSystemAttributes (the same encoding, over the message
  attributes and over the system attributes a sender gave, such as AWSTraceHeader): attributes
  sorted by name; for each, in order, the name, the data type, one transport byte (1 for
  String and Number types, 2 for Binary, custom suffixes such as `Number.float` or `Binary.png`
  counting as their base type), then the value (a string value's UTF-8 bytes, or a binary
  value's raw bytes), every name, type and value preceded by its length as 4 bytes big-endian.
  Source: "Calculating the MD5 message digest for message attributes" in the Amazon SQS
  Developer Guide; the values in tests/sqs/test_checksums.py were recorded from SQS itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

# CPython's own MD5 for the digests of bodies: an OpenSSL one costs twice as much to start (it
# fetches the algorithm for every new hash), and an SQS send takes one per message. Both are
# the same MD5; the OpenSSL one where the interpreter was built without its own.
try:
    from _md5 import md5 as _md5  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - CPython builds have it
    _md5 = partial(hashlib.md5, usedforsecurity=False)

_STRING = 1
_BINARY = 2


@dataclass(frozen=True, slots=True)
class AttributeValue:
    """One message attribute's value as SQS stores it: a data type and a string or bytes."""

    data_type: str
    value: str | bytes

    def __post_init__(self) -> None:
        binary = self.data_type.split(".", 1)[0] == "Binary"
        if binary != isinstance(self.value, bytes):
            raise ValueError(f"a {self.data_type} attribute takes {'bytes' if binary else 'a string'}")


def md5_of_body(body: str) -> str:
    """MD5OfMessageBody (MD5OfBody on receive). SQS refuses bodies with lone surrogates, so the
    body is valid Unicode here and its UTF-8 bytes are the ones the SDK hashed."""
    return _md5(body.encode()).hexdigest()  # type: ignore[no-any-return]


def _length_prefixed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def md5_of_attributes(attributes: Mapping[str, AttributeValue]) -> str | None:
    """MD5OfMessageAttributes (or MD5OfMessageSystemAttributes); None when there are none,
    as SQS then leaves the field out."""
    if not attributes:
        return None
    digest = hashlib.md5(usedforsecurity=False)
    # The SDKs sort names as Java strings, by UTF-16 code units: the order of UTF-16-BE bytes.
    # It differs from code point order only between characters beyond U+FFFF and U+E000-U+FFFF.
    for name in sorted(attributes, key=lambda name: name.encode("utf-16-be", "surrogatepass")):
        attribute = attributes[name]
        digest.update(_length_prefixed(name.encode()))
        digest.update(_length_prefixed(attribute.data_type.encode()))
        if isinstance(attribute.value, bytes):
            digest.update(bytes((_BINARY,)) + _length_prefixed(attribute.value))
        else:
            digest.update(bytes((_STRING,)) + _length_prefixed(attribute.value.encode()))
    return digest.hexdigest()
