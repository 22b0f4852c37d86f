"""SQS's message attributes: MessageAttributes and MessageSystemAttributes of a send, checked as
SQS checks them and turned into what the message service stores; and back, for a receive.

One stored form for both APIs: a String attribute is stored among the REST `attributes`
(name -> value), an attribute of any other data type (Number, Binary, String or Number or Binary
with a custom label) among `attribute_types`. The rules of storage (at most 10 in all, the
characters of a name, data types, Number values) are the service's (app.service.validation);
here are SQS's own: reserved names, periods, list values, the characters SQS accepts in a value.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Final

from app.domain import ReceivedMessage, TypedValue
from app.service.validation import XML_REFUSED
from app.sqs import errors
from app.sqs.checksums import AttributeValue, md5_of_attributes
from app.sqs.errors import SqsError
from app.sqs.shapes import MessageAttributeValue, MessageSystemAttributeValue

# The only system attribute a sender may set.
TRACE_HEADER: Final = "AWSTraceHeader"
# Names SQS keeps for itself, in any case.
RESERVED_PREFIXES: Final = ("aws.", "amazon.")
INVALID_CHARACTERS: Final = (
    "Invalid characters found. Valid characters are #x9 | #xA | #xD |"
    " #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"
)


def _invalid(message: str) -> SqsError:
    return SqsError(errors.INVALID_PARAMETER_VALUE, message)


def _check_name(name: str) -> None:
    shown = name[:256]
    if name.lower().startswith(RESERVED_PREFIXES):
        raise _invalid(f"Message attribute name '{shown}' is reserved for use by AWS (AWS. or Amazon. prefix).")
    if name.startswith(".") or name.endswith(".") or ".." in name:
        raise _invalid(
            f"Message attribute name '{shown}' can not start or end with a period, or have consecutive periods."
        )


def _check_value(name: str, value: MessageAttributeValue | MessageSystemAttributeValue) -> str | bytes:
    """The attribute's one value, of the kind its data type takes."""
    if value.StringListValues or value.BinaryListValues:
        raise _invalid(f"Message attribute '{name[:256]}': list values are not supported.")
    binary = value.DataType.split(".", 1)[0] == "Binary"
    found = value.BinaryValue if binary else value.StringValue
    other = value.StringValue if binary else value.BinaryValue
    if not found or other is not None:
        raise _invalid(
            f"Message attribute '{name[:256]}' must contain a non-empty value of type '{value.DataType[:256]}'."
        )
    if isinstance(found, str) and XML_REFUSED.search(found):
        raise SqsError(errors.INVALID_MESSAGE_CONTENTS, INVALID_CHARACTERS)
    return found


def split(attributes: Mapping[str, MessageAttributeValue] | None) -> tuple[dict[str, str], dict[str, TypedValue]]:
    """A send's MessageAttributes as the service stores them: String ones (name -> value) and
    the others (TypedValue). SqsError for what SQS refuses that the service would not."""
    strings: dict[str, str] = {}
    typed: dict[str, TypedValue] = {}
    for name, value in (attributes or {}).items():
        _check_name(name)
        found = _check_value(name, value)
        if value.DataType == "String":
            assert isinstance(found, str)
            strings[name] = found
        elif isinstance(found, bytes):
            typed[name] = TypedValue(value.DataType, base64.b64encode(found).decode())
        else:
            typed[name] = TypedValue(value.DataType, found)
    return strings, typed


def trace_header(system: Mapping[str, MessageSystemAttributeValue] | None) -> str | None:
    """A send's MessageSystemAttributes: AWSTraceHeader (of type String) alone is accepted."""
    if not system:
        return None
    for name, value in system.items():
        if name != TRACE_HEADER:
            raise _invalid(f"Message system attribute name '{name[:256]}' is invalid.")
        if value.DataType != "String":
            raise _invalid(f"Message system attribute '{TRACE_HEADER}' must be of type String.")
    found = _check_value(TRACE_HEADER, system[TRACE_HEADER])
    assert isinstance(found, str)
    return found


def _sent(value: MessageAttributeValue | MessageSystemAttributeValue) -> AttributeValue:
    found = value.BinaryValue if value.DataType.split(".", 1)[0] == "Binary" else value.StringValue
    assert found is not None  # checked by _check_value
    return AttributeValue(value.DataType, found)


def md5_sent(attributes: Mapping[str, MessageAttributeValue | MessageSystemAttributeValue] | None) -> str | None:
    """MD5OfMessageAttributes (or MD5OfMessageSystemAttributes) of what a send carried."""
    if not attributes:
        return None
    return md5_of_attributes({name: _sent(value) for name, value in attributes.items()})


def wanted(name: str, filters: Sequence[str]) -> bool:
    """Whether ReceiveMessage's MessageAttributeNames ask for `name`: by name, by prefix
    (`prefix.*`), or all (`All`, `.*`)."""
    for pattern in filters:
        if pattern in ("All", ".*") or pattern == name:
            return True
        if pattern.endswith(".*") and name.startswith(pattern[:-1]):
            return True
    return False


def received(
    message: ReceivedMessage, filters: Sequence[str]
) -> tuple[dict[str, MessageAttributeValue] | None, str | None]:
    """The MessageAttributes a receive answers (those `filters` ask for) and their MD5, which is
    over the attributes returned. A String value stored over REST may hold characters SQS
    refuses: each becomes U+FFFD, as in bodies, and the digest is over the text sent."""
    found: dict[str, MessageAttributeValue] = {}
    digest: dict[str, AttributeValue] = {}
    for name, text in message.attributes.items():
        if wanted(name, filters):
            text = XML_REFUSED.sub("\ufffd", text)
            found[name] = MessageAttributeValue(DataType="String", StringValue=text)
            digest[name] = AttributeValue("String", text)
    for name, stored in (message.attribute_types or {}).items():
        if wanted(name, filters):
            data_type = stored["data_type"]
            if data_type.startswith("Binary"):
                raw = base64.b64decode(stored["value"])
                found[name] = MessageAttributeValue(DataType=data_type, BinaryValue=raw)
                digest[name] = AttributeValue(data_type, raw)
            else:
                text = XML_REFUSED.sub("\ufffd", stored["value"])
                found[name] = MessageAttributeValue(DataType=data_type, StringValue=text)
                digest[name] = AttributeValue(data_type, text)
    if not found:
        return None, None
    return found, md5_of_attributes(digest)
