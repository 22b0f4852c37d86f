"""The query protocol's XML answers, as SQS writes them.

A result is `<ActionResponse xmlns=...><ActionResult>members</ActionResult><ResponseMetadata>
<RequestId>...</RequestId></ResponseMetadata></ActionResponse>` (no Result element for an action
that answers nothing). Lists and maps are flattened: a list repeats its item element
(`<Message>...</Message><Message>...</Message>`), a map repeats its entry element with a key and
a value (`<Attribute><Name>..</Name><Value>..</Value></Attribute>`; `<Tag><Key/><Value/></Tag>`;
a message attribute's value is `<Value><StringValue/><DataType/></Value>`). An error is
`<ErrorResponse><Error><Type/><Code/><Message/><Detail/></Error><RequestId/></ErrorResponse>`.

Text is escaped so that an XML parser gives back exactly the string written: `&`, `<` and `>`
as entities, and a carriage return as `&#13;`, since a parser turns a literal CR (or CR LF)
into LF (XML 1.0, end-of-line handling). A tab and a line feed stand as they are: element text
keeps them. A character XML 1.0 cannot carry at all (most controls below U+0020, lone
surrogates, U+FFFE and U+FFFF) is refused with ValueError: SQS refuses them on the way in
(InvalidMessageContents), so none reaches a result. An error's text is the exception: it may
quote whatever a client sent, is never read back as data, and must be written whatever it holds,
so there such a character becomes U+FFFD.
"""

from __future__ import annotations

import base64
import re
from typing import Any, Final

from app.sqs.shapes import Shape
from app.sqs.spec import Kind, Struct, Type

XMLNS: Final = "http://queue.amazonaws.com/doc/2012-11-05/"
_DECLARATION = '<?xml version="1.0"?>'
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def escape(text: str) -> str:
    """Text as element content that parses back to exactly `text`."""
    bad = _NOT_XML.search(text)
    if bad is not None:
        raise ValueError(f"U+{ord(bad.group()):04X} cannot be written in XML 1.0")
    return text.translate(_ESCAPES)


def escape_lossy(text: str) -> str:
    """Text as element content, each character XML 1.0 cannot carry replaced by U+FFFD: for
    error text, which must always be written and is never round-tripped."""
    return _NOT_XML.sub("\ufffd", text).translate(_ESCAPES)


def _scalar(kind: Kind, value: Any) -> str:
    if kind is Kind.BOOLEAN:
        return "true" if value else "false"
    if kind is Kind.BLOB:
        return base64.b64encode(value).decode("ascii")
    if kind in (Kind.INTEGER, Kind.LONG):
        return str(int(value))
    return escape(value)


def _content(kind: Type, value: Any, out: list[str]) -> None:
    """The content of one element holding `value` (a scalar's text or a structure's members)."""
    if kind.kind is Kind.STRUCTURE:
        assert kind.struct is not None
        _members(kind.struct, value, out)
    else:
        out.append(_scalar(kind.kind, value))


def _members(struct: Struct, shape: Shape, out: list[str]) -> None:
    for member in struct.members:
        value = getattr(shape, member.name)
        if value is None:
            continue
        tag = member.wire
        kind = member.type
        if kind.kind is Kind.LIST:
            assert kind.item is not None
            for item in value:
                out.append(f"<{tag}>")
                _content(kind.item, item, out)
                out.append(f"</{tag}>")
        elif kind.kind is Kind.MAP:
            assert kind.item is not None
            for key, item in value.items():
                out.append(f"<{tag}><{member.key}>{escape(key)}</{member.key}><{member.value}>")
                _content(kind.item, item, out)
                out.append(f"</{member.value}></{tag}>")
        else:
            out.append(f"<{tag}>")
            _content(kind, value, out)
            out.append(f"</{tag}>")


def render_result_xml(action: str, struct: Struct | None, result: Shape | None, request_id: str) -> bytes:
    out = [_DECLARATION, f'<{action}Response xmlns="{XMLNS}">']
    if struct is not None and result is not None:
        out.append(f"<{action}Result>")
        _members(struct, result, out)
        out.append(f"</{action}Result>")
    out.append(f"<ResponseMetadata><RequestId>{escape(request_id)}</RequestId></ResponseMetadata>")
    out.append(f"</{action}Response>")
    return "".join(out).encode("utf-8")


def render_error_xml(code: str, fault: str, message: str, request_id: str) -> bytes:
    return (
        f'{_DECLARATION}<ErrorResponse xmlns="{XMLNS}"><Error><Type>{fault}</Type><Code>{escape_lossy(code)}</Code>'
        f"<Message>{escape_lossy(message)}</Message><Detail/></Error>"
        f"<RequestId>{escape_lossy(request_id)}</RequestId></ErrorResponse>"
    ).encode()
