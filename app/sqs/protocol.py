"""The two SQS wire protocols on one endpoint: requests decoded into each action's typed input,
results and errors encoded in the protocol the request came in.

- AWS JSON 1.0, what current SDKs send: `POST /` with `X-Amz-Target: AmazonSQS.<Action>`,
  `Content-Type: application/x-amz-json-1.0` and a JSON object of the action's input members.
  The answer is a JSON object of the output members; an error is `{"__type":
  "com.amazonaws.sqs#<Name>", "message": ...}` with the header `x-amzn-query-error:
  <query code>;<Sender|Receiver>`, from which SDKs of this query-compatible service take the
  error's code.
- The query protocol, what SDKs and tools older than the JSON one send: `Action=<Action>` and the
  input members as form fields (in the body, or in the query string), lists and maps flattened as
  `AttributeName.1`, `Attribute.1.Name`/`Attribute.1.Value`,
  `SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue`... The answer is XML,
  `<ActionResponse><ActionResult>...</ActionResult><ResponseMetadata>...`, an error
  `<ErrorResponse><Error><Type/><Code/><Message/><Detail/></Error><RequestId/></ErrorResponse>`.

A request with `X-Amz-Target`, or with the JSON content type, is a JSON request; any other is a
query request. Both decode into the same `<Action>Request` of `app.sqs.shapes`, so the action
never knows which came in. Only the wire is checked here: the action, the members' types and
the required members. Limits of values (1 to 10 messages...) are the actions' to check.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
from dataclasses import dataclass
from typing import Any, Final

import jiter
from pydantic import TypeAdapter
from pydantic_core import PydanticSerializationError, SchemaValidator, ValidationError, core_schema, to_json

from app.sqs import errors
from app.sqs.errors import SqsError
from app.sqs.query_xml import render_error_xml, render_result_xml
from app.sqs.shapes import ACTIONS, Action, Shape
from app.sqs.signature import HeaderMap, HeaderPairs, header_map, parse_query
from app.sqs.spec import Kind, Member, Struct, Type, struct_of

JSON_CONTENT_TYPE: Final = "application/x-amz-json-1.0"
FORM_CONTENT_TYPE: Final = "application/x-www-form-urlencoded"
XML_CONTENT_TYPE: Final = "text/xml"
TARGET_PREFIX: Final = "AmazonSQS."
# The highest index of a flattened list or map the query protocol accepts. SQS's lists are short
# (10 batch entries, 10 message attributes, 50 tags); a larger index is a malformed request, and
# capping it keeps an index from ever standing for an amount of work or memory.
MAX_QUERY_INDEX: Final = 1000
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_QUERY_INTEGER = re.compile(r"-?[0-9]{1,19}")
_QUERY_INDEX = re.compile(r"[1-9][0-9]{0,3}")


class Protocol(enum.Enum):
    JSON = "json"
    QUERY = "query"


@dataclass(slots=True)
class SqsRequest:
    """A decoded request: which protocol it came in (and so answers in), its action and input."""

    protocol: Protocol
    action: Action
    input: Shape


@dataclass(slots=True)
class WireResponse:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def _header(headers: HeaderMap, name: str) -> str | None:
    """The first value of header `name` (lower case)."""
    values = headers.get(name)
    return values[0].strip() if values else None


def _media_type(headers: HeaderMap) -> str | None:
    value = _header(headers, "content-type")
    return value.split(";", 1)[0].strip().lower() if value is not None else None


def protocol_of(headers: HeaderPairs | HeaderMap) -> Protocol:
    """The protocol of a request, which is also the one its answer (or error) is given in."""
    found = header_map(headers)
    if "x-amz-target" in found or _media_type(found) == JSON_CONTENT_TYPE:
        return Protocol.JSON
    return Protocol.QUERY


def decode_request(headers: HeaderPairs | HeaderMap, raw_query: bytes | str, body: bytes) -> SqsRequest:
    """The request's action and typed input; raises `SqsError` for anything the wire refuses."""
    headers = header_map(headers)
    protocol = protocol_of(headers)
    if protocol is Protocol.JSON:
        action = _json_action(headers)
        return SqsRequest(protocol, action, _json_input(action, body))
    params = _query_params(headers, raw_query, body)
    action_name = params.pop("Action", None)
    if action_name is None:
        raise SqsError(errors.MISSING_ACTION, "The request must contain the parameter Action.")
    action = _action(action_name)
    return SqsRequest(protocol, action, _query_input(action, params))


def _action(name: str) -> Action:
    action = ACTIONS.get(name)
    if action is None:
        raise SqsError(errors.INVALID_ACTION, f"The action {_quote(name)} is not valid for this endpoint.")
    return action


def _quote(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _invalid(name: str, reason: str) -> SqsError:
    return SqsError(errors.INVALID_PARAMETER_VALUE, f"Value for parameter {name} is invalid. Reason: {reason}")


def _missing(name: str) -> SqsError:
    return SqsError(errors.MISSING_PARAMETER, f"The request must contain the parameter {name}.")


# --- AWS JSON 1.0 ---------------------------------------------------------------------------


def _json_action(headers: HeaderMap) -> Action:
    target = _header(headers, "x-amz-target")
    if target is None:
        raise SqsError(errors.MISSING_ACTION, "The request must contain the header X-Amz-Target.")
    if not target.startswith(TARGET_PREFIX):
        raise SqsError(errors.INVALID_ACTION, f"The target {_quote(target)} is not valid for this endpoint.")
    action = _action(target.removeprefix(TARGET_PREFIX))
    media_type = _media_type(headers)
    if media_type != JSON_CONTENT_TYPE:
        raise SqsError(
            errors.INVALID_PARAMETER_VALUE,
            f"The Content-Type of an X-Amz-Target request must be {JSON_CONTENT_TYPE}, not {_quote(media_type or '')}.",
        )
    return action


def _json_input(action: Action, body: bytes) -> Shape:
    if not body or body.isspace():  # (not body.strip(): no copy of the body)
        document: Any = {}
    else:
        try:
            # jiter (pydantic's JSON parser): strict UTF-8, no NaN or Infinity, and a key given
            # twice in one object is refused, not silently the last one (two readers of one body
            # must not see two requests). Lone surrogate escapes are refused too, as SQS refuses
            # such text anywhere. Two to three times faster than json.loads with those checks.
            document = jiter.from_json(body, allow_inf_nan=False, catch_duplicate_keys=True, cache_mode="keys")
        except ValueError as exc:
            # Cut as every echo of client input is: jiter's message quotes a key given twice
            # whole, however long.
            message = f"The request body is not a JSON object: {_quote(str(exc), 120)}."
            raise SqsError(errors.INVALID_PARAMETER_VALUE, message) from None
    if not isinstance(document, dict):
        raise SqsError(errors.INVALID_PARAMETER_VALUE, "The request body is not a JSON object.")
    struct = struct_of(action.request)
    # The quick pass decodes a well-formed request; anything it does not take (a missing or
    # mistyped member, a blob, a number out of range...) is decoded again member by member,
    # which raises SQS's error for the first member in order, as the one decoder of record.
    try:
        return _quick_validator(struct).validate_python(document)  # type: ignore[no-any-return]
    except ValidationError:
        return _json_struct(struct, document, "")


# Per structure, its members as the JSON codec walks them: (name, required, type), the type None
# for a string, which is taken (and answered) as it is without a call. Made once per structure:
# an SQS request walks the same few structures every time.
_JsonMember = tuple[str, bool, Type | None]
_JSON_MEMBERS: dict[type[Shape], tuple[_JsonMember, ...]] = {}


def _json_members(struct: Struct) -> tuple[_JsonMember, ...]:
    found = _JSON_MEMBERS.get(struct.cls)
    if found is None:
        found = _JSON_MEMBERS[struct.cls] = tuple(
            (m.name, m.required, None if m.type.kind is Kind.STRING else m.type) for m in struct.members
        )
    return found


# Per request structure, the quick pass: pydantic-core's validator of it, built from the same
# table as the member walk and exactly as strict (strings, integers in their ranges, booleans,
# lists and maps only of their own types, no coercion of one into another; a null member is an
# absent one; unknown members are ignored). It decodes a well-formed request in compiled code
# and refuses anything else, which the walk then decodes again for SQS's exact error.
# tests/sqs/test_protocol_mangled.py holds the two to the same structure for what both take.
_QUICK: dict[type[Shape], SchemaValidator] = {}


def _quick_validator(struct: Struct) -> SchemaValidator:
    found = _QUICK.get(struct.cls)
    if found is None:
        found = _QUICK[struct.cls] = SchemaValidator(_quick_struct_schema(struct))
    return found


def _quick_struct_schema(struct: Struct) -> core_schema.CoreSchema:
    fields = []
    for m in struct.members:
        schema = _quick_schema(m.type)
        if not m.required:
            schema = core_schema.with_default_schema(core_schema.nullable_schema(schema), default=None)
        fields.append(core_schema.dataclass_field(m.name, schema, kw_only=True))
    arguments = core_schema.dataclass_args_schema(struct.cls.__name__, fields, extra_behavior="ignore")
    return core_schema.dataclass_schema(struct.cls, arguments, [m.name for m in struct.members], slots=True)


def _quick_schema(kind: Type) -> core_schema.CoreSchema:
    match kind.kind:
        case Kind.STRING:
            return core_schema.str_schema(strict=True)
        case Kind.INTEGER | Kind.LONG:
            low, high = _INT64 if kind.kind is Kind.LONG else _INT32
            return core_schema.int_schema(strict=True, ge=low, le=high)
        case Kind.BOOLEAN:
            return core_schema.bool_schema(strict=True)
        case Kind.BLOB:
            return core_schema.no_info_plain_validator_function(_quick_blob)
        case Kind.LIST:
            assert kind.item is not None
            return core_schema.list_schema(_quick_schema(kind.item), strict=True)
        case Kind.MAP:
            assert kind.item is not None
            return core_schema.dict_schema(core_schema.str_schema(strict=True), _quick_schema(kind.item), strict=True)
    assert kind.struct is not None
    return _quick_struct_schema(kind.struct)


def _quick_blob(raw: Any) -> bytes:
    if type(raw) is not str:
        raise ValueError("not a blob")
    try:
        return _base64(raw, "")
    except SqsError:
        raise ValueError("not base64") from None


def _json_struct(struct: Struct, document: dict[str, Any], path: str) -> Shape:
    return _json_fields(struct.cls, _json_members(struct), document, path)


def _json_fields(cls: type[Shape], members: tuple[_JsonMember, ...], document: dict[str, Any], path: str) -> Shape:
    values: dict[str, Any] = {}
    for name, required, kind in members:
        raw = document.get(name)
        if raw is None:  # JSON null is an absent member, as in every AWS JSON protocol
            if required:
                raise _missing(path + name)
        elif kind is not None:
            values[name] = _json_value(kind, raw, path + name)
        elif isinstance(raw, str):
            values[name] = raw
        else:
            raise _invalid(path + name, f"must be a {Kind.STRING.value}.")
    return cls(**values)


def _json_value(kind: Type, raw: Any, name: str) -> Any:
    match kind.kind:
        case Kind.STRING:
            if isinstance(raw, str):
                return raw
        case Kind.INTEGER | Kind.LONG:
            if isinstance(raw, int) and not isinstance(raw, bool):
                return _in_range(kind, raw, name)
        case Kind.BOOLEAN:
            if isinstance(raw, bool):
                return raw
        case Kind.BLOB:
            if isinstance(raw, str):
                return _base64(raw, name)
        case Kind.LIST:
            if isinstance(raw, list):
                assert kind.item is not None
                item = kind.item
                struct = item.struct
                if struct is not None:  # batch entries: each entry's struct walked without a detour
                    cls, members = struct.cls, _json_members(struct)
                    return [
                        _json_fields(cls, members, value, f"{name}.{i}.")
                        if isinstance(value, dict)
                        else _json_value(item, value, f"{name}.{i}")
                        for i, value in enumerate(raw, 1)
                    ]
                return [_json_value(item, value, f"{name}.{i}") for i, value in enumerate(raw, 1)]
        case Kind.MAP:
            if isinstance(raw, dict):
                assert kind.item is not None
                item = kind.item
                return {key: _json_value(item, value, f"{name}.{key}") for key, value in raw.items()}
        case Kind.STRUCTURE:
            if isinstance(raw, dict):
                assert kind.struct is not None
                return _json_struct(kind.struct, raw, f"{name}.")
    raise _invalid(name, f"must be a {kind.kind.value}.")


def _in_range(kind: Type, value: int, name: str) -> int:
    low, high = _INT64 if kind.kind is Kind.LONG else _INT32
    if not low <= value <= high:
        # Cut as every echo is: a JSON number may have thousands of digits.
        raise _invalid(name, f"{_quote(str(value))} is out of the range of a {kind.kind.value}.")
    return value


def _base64(text: str, name: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(name, "must be base64-encoded binary.") from None


# --- the query protocol ---------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    """A query parameter name's dotted parts as a tree: `A.1.Name=x` is A → 1 → Name = x."""

    value: str | None = None
    children: dict[str, _Node] | None = None

    def child(self, part: str) -> _Node | None:
        return self.children.get(part) if self.children else None


def _query_params(headers: HeaderMap, raw_query: bytes | str, body: bytes) -> dict[str, str]:
    pairs = parse_query(raw_query)
    if body:
        media_type = _media_type(headers)
        if media_type not in (None, FORM_CONTENT_TYPE):
            raise SqsError(
                errors.INVALID_PARAMETER_VALUE,
                f"The Content-Type of a query request must be {FORM_CONTENT_TYPE}, not {_quote(media_type or '')}.",
            )
        pairs += parse_query(body)
    params: dict[str, str] = {}
    for name, value in pairs:
        if name in params:
            raise SqsError(errors.INVALID_QUERY_PARAMETER, f"The parameter {_quote(name)} is given more than once.")
        params[name] = value
    return params


def _tree(params: dict[str, str]) -> _Node:
    root = _Node()
    for name, value in params.items():
        node = root
        for part in name.split("."):
            if node.children is None:
                node.children = {}
            node = node.children.setdefault(part, _Node())
        node.value = value
    return root


def _query_input(action: Action, params: dict[str, str]) -> Shape:
    return _query_struct(struct_of(action.request), _tree(params), "")


def _query_struct(struct: Struct, node: _Node, path: str) -> Shape:
    values: dict[str, Any] = {}
    taken: set[str] = set()
    for member in struct.members:
        if member.wire in taken:  # a later member of the same query name (see ReceiveMessageRequest)
            continue
        taken.add(member.wire)
        name = f"{path}{member.wire}"
        child = node.child(member.wire)
        if child is None:
            if member.type.kind in (Kind.LIST, Kind.MAP) and member.required:
                # The query protocol cannot tell an empty list from an absent one: the action
                # sees an empty one and answers as SQS does (EmptyBatchRequest...).
                values[member.name] = [] if member.type.kind is Kind.LIST else {}
            elif member.required:
                raise _missing(name)
            continue
        values[member.name] = _query_member(member, child, name)
    return struct.cls(**values)


def _query_member(member: Member, node: _Node, name: str) -> Any:
    kind = member.type
    if kind.kind is Kind.LIST:
        assert kind.item is not None
        item = kind.item
        return [_query_value(item, entry, f"{name}.{index}") for index, entry in _indexed(node, name)]
    if kind.kind is Kind.MAP:
        assert kind.item is not None
        found: dict[str, Any] = {}
        for index, entry in _indexed(node, name):
            key_node, value_node = entry.child(member.key), entry.child(member.value)
            if key_node is None or key_node.value is None:
                raise _missing(f"{name}.{index}.{member.key}")
            if value_node is None:
                raise _missing(f"{name}.{index}.{member.value}")
            if key_node.value in found:
                message = f"The key {_quote(key_node.value)} of {name} is given more than once."
                raise SqsError(errors.INVALID_QUERY_PARAMETER, message)
            found[key_node.value] = _query_value(kind.item, value_node, f"{name}.{index}.{member.value}")
        return found
    return _query_value(kind, node, name)


def _indexed(node: _Node, name: str) -> list[tuple[int, _Node]]:
    """The entries of a flattened list or map, by index. Gaps are allowed, order is by index."""
    entries = []
    for part, child in (node.children or {}).items():
        if not _QUERY_INDEX.fullmatch(part) or int(part) > MAX_QUERY_INDEX:
            raise SqsError(
                errors.INVALID_QUERY_PARAMETER,
                f"{_quote(f'{name}.{part}')} is not a parameter: indices run from 1 to {MAX_QUERY_INDEX}.",
            )
        entries.append((int(part), child))
    entries.sort(key=lambda entry: entry[0])
    return entries


def _query_value(kind: Type, node: _Node, name: str) -> Any:
    if kind.kind is Kind.STRUCTURE:
        assert kind.struct is not None
        return _query_struct(kind.struct, node, f"{name}.")
    if kind.kind in (Kind.LIST, Kind.MAP):
        raise TypeError("lists and maps hold no lists or maps directly in SQS")
    text = node.value
    if text is None:
        raise _missing(name)
    match kind.kind:
        case Kind.INTEGER | Kind.LONG:
            if not _QUERY_INTEGER.fullmatch(text):
                raise _invalid(name, f"{_quote(text)} is not a {kind.kind.value}.")
            return _in_range(kind, int(text), name)
        case Kind.BOOLEAN:
            if text not in ("true", "false"):
                raise _invalid(name, f"{_quote(text)} is not true or false.")
            return text == "true"
        case Kind.BLOB:
            return _base64(text, name)
    return text


# --- responses ------------------------------------------------------------------------------


def _json_document(struct: Struct, shape: Shape) -> dict[str, Any]:
    return _json_object(_json_members(struct), shape)


def _json_object(members: tuple[_JsonMember, ...], shape: Shape) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for name, _, kind in members:
        value = getattr(shape, name)
        if value is not None:
            document[name] = value if kind is None else _json_out(kind, value)
    return document


def _json_out(kind: Type, value: Any) -> Any:
    match kind.kind:
        case Kind.BLOB:
            return base64.b64encode(value).decode("ascii")
        case Kind.LIST:
            assert kind.item is not None
            item = kind.item
            if item.struct is not None:
                members = _json_members(item.struct)
                return [_json_object(members, entry) for entry in value]
            return [_json_out(item, entry) for entry in value]
        case Kind.MAP:
            assert kind.item is not None
            item = kind.item
            return {key: _json_out(item, entry) for key, entry in value.items()}
        case Kind.STRUCTURE:
            assert kind.struct is not None
            return _json_document(kind.struct, value)
    return value


def _json_bytes(document: dict[str, Any]) -> bytes:
    # pydantic-core's serializer: compact UTF-8, the bytes of json.dumps(ensure_ascii=False,
    # separators=(",", ":")) for a fifth of the CPU.
    try:
        return to_json(document)
    except PydanticSerializationError:  # a lone surrogate: JSON can still carry it, escaped
        return json.dumps(document, separators=(",", ":")).encode("ascii")


# Per result structure without a blob anywhere in it, pydantic's serializer of it: its JSON is
# the member walk's (`_json_document`: None members left out, names as they are) in one call to
# compiled code, at about half the CPU. A structure with a blob (SQS writes it as standard
# base64) is walked. tests/sqs/test_protocol.py holds the two to the same bytes for every action.
_SERIALIZERS: dict[type[Shape], TypeAdapter[Any] | None] = {}


def _has_blob(kind: Type, seen: frozenset[type[Shape]] = frozenset()) -> bool:
    if kind.kind is Kind.BLOB:
        return True
    if kind.item is not None and _has_blob(kind.item, seen):
        return True
    struct = kind.struct
    if struct is None or struct.cls in seen:
        return False
    return any(_has_blob(m.type, seen | {struct.cls}) for m in struct.members)


def _serializer(struct: Struct) -> TypeAdapter[Any] | None:
    if struct.cls not in _SERIALIZERS:
        blob = any(_has_blob(m.type, frozenset({struct.cls})) for m in struct.members)
        _SERIALIZERS[struct.cls] = None if blob else TypeAdapter(struct.cls)
    return _SERIALIZERS[struct.cls]


def _json_result(struct: Struct, result: Shape) -> bytes:
    serializer = _serializer(struct)
    if serializer is not None:
        try:
            # (The compiled serializer itself: TypeAdapter.dump_json only passes its defaults on.)
            return serializer.serializer.to_json(result, exclude_none=True, warnings=False)
        except PydanticSerializationError:  # a lone surrogate: walked, and escaped below
            pass
    return _json_bytes(_json_document(struct, result))


def encode_result(protocol: Protocol, action: Action, result: Shape | None, request_id: str) -> WireResponse:
    """The answer to a request that succeeded, in its protocol. `result` is the action's
    `<Action>Result`, or None for an action that answers nothing."""
    expected = action.result
    if (result is None and expected is not None) or (result is not None and type(result) is not expected):
        raise TypeError(f"{action.name} answers with {expected}, not {type(result)}")
    struct = struct_of(type(result)) if result is not None else None
    if protocol is Protocol.JSON:
        if struct is None or result is None:
            return WireResponse(200, _headers(JSON_CONTENT_TYPE, request_id), b"{}")
        return WireResponse(200, _headers(JSON_CONTENT_TYPE, request_id), _json_result(struct, result))
    body = render_result_xml(action.name, struct, result, request_id)
    return WireResponse(200, _headers(XML_CONTENT_TYPE, request_id), body)


def encode_error(protocol: Protocol, error: SqsError, request_id: str) -> WireResponse:
    """The one rendering of an SQS error, in either protocol, with SQS's status for it."""
    kind = error.error
    if protocol is Protocol.JSON:
        headers = (
            *_headers(JSON_CONTENT_TYPE, request_id),
            ("x-amzn-query-error", f"{kind.query_code};{kind.fault}"),
        )
        document = {"__type": f"{errors.NAMESPACE}#{kind.code}", "message": error.message}
        return WireResponse(kind.status, headers, _json_bytes(document))
    body = render_error_xml(kind.query_code, kind.fault, error.message, request_id)
    return WireResponse(kind.status, _headers(XML_CONTENT_TYPE, request_id), body)


def _headers(content_type: str, request_id: str) -> tuple[tuple[str, str], ...]:
    return (("Content-Type", content_type), ("x-amzn-RequestId", request_id))
