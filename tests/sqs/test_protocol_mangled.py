"""Mangled requests: each is refused with an SQS error (400 here) in the protocol it came in, and
none lets another exception out, whatever the bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import ValidationError

from app.sqs import errors
from app.sqs import shapes as s
from app.sqs.errors import SqsError
from app.sqs.protocol import (
    MAX_QUERY_INDEX,
    Protocol,
    _json_struct,
    _quick_validator,
    decode_request,
    encode_error,
    protocol_of,
)
from app.sqs.spec import Struct, struct_of
from tests.sqs.samples import URL
from tests.sqs.wire import parse

JSON = "application/x-amz-json-1.0"
FORM = "application/x-www-form-urlencoded; charset=utf-8"


def json_headers(
    target: str | None = "AmazonSQS.SendMessage", content_type: str | None = JSON
) -> list[tuple[str, str]]:
    headers = [("Host", "127.0.0.1:9324")]
    if target is not None:
        headers.append(("X-Amz-Target", target))
    if content_type is not None:
        headers.append(("Content-Type", content_type))
    return headers


FORM_HEADERS = [("Host", "127.0.0.1:9324"), ("Content-Type", FORM)]
SEND = f"Action=SendMessage&QueueUrl={URL}&MessageBody=hi"
GOOD_JSON = json.dumps({"QueueUrl": URL, "MessageBody": "hi"}).encode()

CASES: list[tuple[str, list[tuple[str, str]], str, bytes, errors.ErrorType]] = [
    ("json not json", json_headers(), "", b"{not json", errors.INVALID_PARAMETER_VALUE),
    ("json not utf-8", json_headers(), "", b'{"QueueUrl": "\xff"}', errors.INVALID_PARAMETER_VALUE),
    ("json array", json_headers(), "", b"[1, 2]", errors.INVALID_PARAMETER_VALUE),
    ("json NaN", json_headers(), "", b'{"QueueUrl": NaN}', errors.INVALID_PARAMETER_VALUE),
    ("json repeated key", json_headers(), "", b'{"QueueUrl": "a", "QueueUrl": "b"}', errors.INVALID_PARAMETER_VALUE),
    ("json deep", json_headers(), "", b"[" * 100_000 + b"]" * 100_000, errors.INVALID_PARAMETER_VALUE),
    ("json huge number", json_headers(), "", b'{"DelaySeconds": ' + b"9" * 5000 + b"}", errors.INVALID_PARAMETER_VALUE),
    ("json wrong type", json_headers(), "", b'{"QueueUrl": 1, "MessageBody": "x"}', errors.INVALID_PARAMETER_VALUE),
    (
        "json integer as text",
        json_headers(),
        "",
        json.dumps({"QueueUrl": URL, "MessageBody": "x", "DelaySeconds": "5"}).encode(),
        errors.INVALID_PARAMETER_VALUE,
    ),
    (
        "json integer out of range",
        json_headers(),
        "",
        json.dumps({"QueueUrl": URL, "MessageBody": "x", "DelaySeconds": 2**31}).encode(),
        errors.INVALID_PARAMETER_VALUE,
    ),
    (
        "json bad base64",
        json_headers(),
        "",
        json.dumps(
            {
                "QueueUrl": URL,
                "MessageBody": "x",
                "MessageAttributes": {"a": {"DataType": "Binary", "BinaryValue": "*"}},
            }
        ).encode(),
        errors.INVALID_PARAMETER_VALUE,
    ),
    ("json missing member", json_headers(), "", json.dumps({"QueueUrl": URL}).encode(), errors.MISSING_PARAMETER),
    (
        "json wrong content type",
        json_headers(content_type="application/json"),
        "",
        GOOD_JSON,
        errors.INVALID_PARAMETER_VALUE,
    ),
    ("json no content type", json_headers(content_type=None), "", GOOD_JSON, errors.INVALID_PARAMETER_VALUE),
    ("json no target", json_headers(target=None), "", GOOD_JSON, errors.MISSING_ACTION),
    ("json unknown prefix", json_headers(target="AmazonSNS.Publish"), "", GOOD_JSON, errors.INVALID_ACTION),
    ("json action case", json_headers(target="AmazonSQS.sendMessage"), "", GOOD_JSON, errors.INVALID_ACTION),
    ("json unknown action", json_headers(target="AmazonSQS.AddPermission"), "", GOOD_JSON, errors.INVALID_ACTION),
    ("json prefix case", json_headers(target="amazonsqs.SendMessage"), "", GOOD_JSON, errors.INVALID_ACTION),
    ("query no action", FORM_HEADERS, "", f"QueueUrl={URL}".encode(), errors.MISSING_ACTION),
    ("query action case", FORM_HEADERS, "", SEND.replace("SendMessage", "sendmessage").encode(), errors.INVALID_ACTION),
    ("query repeated key", FORM_HEADERS, "", (SEND + "&MessageBody=again").encode(), errors.INVALID_QUERY_PARAMETER),
    ("query key in query and body", FORM_HEADERS, "MessageBody=x", SEND.encode(), errors.INVALID_QUERY_PARAMETER),
    (
        "query huge index",
        FORM_HEADERS,
        "",
        (SEND + "&MessageAttribute.999999999.Name=a&MessageAttribute.999999999.Value.DataType=String").encode(),
        errors.INVALID_QUERY_PARAMETER,
    ),
    (
        "query index over the cap",
        FORM_HEADERS,
        "",
        (SEND + f"&MessageAttribute.{MAX_QUERY_INDEX + 1}.Name=a").encode(),
        errors.INVALID_QUERY_PARAMETER,
    ),
    (
        "query index zero",
        FORM_HEADERS,
        "",
        (SEND + "&MessageAttribute.0.Name=a").encode(),
        errors.INVALID_QUERY_PARAMETER,
    ),
    (
        "query index leading zero",
        FORM_HEADERS,
        "",
        (SEND + "&MessageAttribute.01.Name=a").encode(),
        errors.INVALID_QUERY_PARAMETER,
    ),
    (
        "query index not a number",
        FORM_HEADERS,
        "",
        (SEND + "&MessageAttribute.x.Name=a").encode(),
        errors.INVALID_QUERY_PARAMETER,
    ),
    (
        "query map entry without value",
        FORM_HEADERS,
        "",
        (SEND + "&MessageAttribute.1.Name=a").encode(),
        errors.MISSING_PARAMETER,
    ),
    (
        "query attribute without data type",
        FORM_HEADERS,
        "",
        (SEND + "&MessageAttribute.1.Name=a&MessageAttribute.1.Value.StringValue=v").encode(),
        errors.MISSING_PARAMETER,
    ),
    (
        "query repeated map key",
        FORM_HEADERS,
        "",
        f"Action=TagQueue&QueueUrl={URL}&Tag.1.Key=a&Tag.1.Value=1&Tag.2.Key=a&Tag.2.Value=2".encode(),
        errors.INVALID_QUERY_PARAMETER,
    ),
    (
        "query integer not a number",
        FORM_HEADERS,
        "",
        (SEND + "&DelaySeconds=five").encode(),
        errors.INVALID_PARAMETER_VALUE,
    ),
    (
        "query integer too big",
        FORM_HEADERS,
        "",
        (SEND + "&DelaySeconds=" + "9" * 30).encode(),
        errors.INVALID_PARAMETER_VALUE,
    ),
    ("query missing member", FORM_HEADERS, "", f"Action=SendMessage&QueueUrl={URL}".encode(), errors.MISSING_PARAMETER),
    ("query body of another type", [("Content-Type", "text/plain")], "", SEND.encode(), errors.INVALID_PARAMETER_VALUE),
]


@pytest.mark.parametrize(
    ("headers", "query", "body", "expected"), [case[1:] for case in CASES], ids=[c[0] for c in CASES]
)
def test_a_mangled_request_is_refused_as_sqs_refuses_it(
    headers: list[tuple[str, str]], query: str, body: bytes, expected: errors.ErrorType
) -> None:
    with pytest.raises(SqsError) as caught:
        decode_request(headers, query, body)
    assert caught.value.error == expected
    protocol = protocol_of(headers)
    response = encode_error(protocol, caught.value, "r")
    assert response.status == 400
    parsed = parse(protocol, "SendMessage", response)
    assert parsed["Error"]["Code"] == expected.query_code


def test_the_protocol_follows_the_target_and_the_content_type() -> None:
    assert protocol_of(json_headers(content_type=FORM)) is Protocol.JSON
    assert protocol_of(json_headers(target=None)) is Protocol.JSON
    assert protocol_of(FORM_HEADERS) is Protocol.QUERY
    assert protocol_of([]) is Protocol.QUERY


def test_the_query_string_carries_a_request_too() -> None:
    request = decode_request([], SEND, b"")
    assert request.protocol is Protocol.QUERY
    assert request.input.MessageBody == "hi"  # type: ignore[attr-defined]


def test_unknown_members_are_ignored_as_sdks_newer_than_pqs_send_them() -> None:
    body = json.dumps({"QueueUrl": URL, "MessageBody": "hi", "SomethingNew": [1]}).encode()
    assert decode_request(json_headers(), "", body).input.MessageBody == "hi"  # type: ignore[attr-defined]
    assert decode_request(FORM_HEADERS, "", (SEND + "&SomethingNew.1=x").encode()).input.MessageBody == "hi"  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(
    headers=st.sampled_from([json_headers(), json_headers(target="AmazonSQS.SendMessageBatch"), FORM_HEADERS]),
    query=st.text(max_size=40),
    body=st.one_of(
        st.binary(max_size=200),
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "Action",
                        "QueueUrl",
                        "MessageBody",
                        "MessageAttribute.1.Name",
                        "MessageAttribute.1.Value.DataType",
                        "SendMessageBatchRequestEntry.1.Id",
                        "Entries",
                        "DelaySeconds",
                        "Tag.1.Key",
                        "MessageAttribute",
                    ]
                ),
                st.text(max_size=10),
            ),
            max_size=8,
        ).map(lambda pairs: "&".join(f"{k}={v}" for k, v in pairs).encode("utf-8", "surrogatepass")),
    ),
)
def test_no_bytes_let_another_exception_out(headers: list[tuple[str, str]], query: str, body: bytes) -> None:
    try:
        decode_request(headers, query, body)
    except SqsError as error:
        assert error.error.status == 400


# --- the quick pass of the JSON decoder ----------------------------------------------------------

_JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.sampled_from(["", "x", "0", "AQID", "not base64!", "String", "Binary"]),
)
_JSON_ANY = st.recursive(
    _JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8,
)
_ATTRIBUTE = st.fixed_dictionaries(
    {},
    optional={
        "DataType": st.one_of(st.sampled_from(["String", "Number", "Binary", "String.x"]), _JSON_LEAF),
        "StringValue": _JSON_LEAF,
        "BinaryValue": _JSON_LEAF,
    },
)


def _members_of(cls: type[s.Shape]) -> st.SearchStrategy[dict[str, Any]]:
    """Documents that name the structure's members (and a stranger), each with a value of the
    right type or of any other."""
    names = [m.name for m in struct_of(cls).members]
    right: dict[str, st.SearchStrategy[Any]] = {
        "MessageAttributes": st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(_ATTRIBUTE, _JSON_ANY)),
    }
    if "Entries" in names:
        entry = _members_of(s.SendMessageBatchRequestEntry)
        right["Entries"] = st.lists(st.one_of(entry, _JSON_ANY), max_size=3)
    values = {name: st.one_of(right.get(name, _JSON_LEAF), _JSON_ANY) for name in names}
    return st.fixed_dictionaries({}, optional={**values, "Stranger": _JSON_ANY})


def _quick(struct: Struct, document: dict[str, Any]) -> s.Shape | None:
    try:
        return _quick_validator(struct).validate_python(document)  # type: ignore[no-any-return]
    except ValidationError:
        return None


@given(document=st.one_of(_members_of(s.SendMessageBatchRequest), _members_of(s.SendMessageRequest)))
@settings(max_examples=400, deadline=None)
def test_the_quick_pass_decodes_as_the_member_walk_or_leaves_it_the_request(document: dict[str, Any]) -> None:
    cls = s.SendMessageBatchRequest if "Entries" in document or "QueueUrl" not in document else s.SendMessageRequest
    struct = struct_of(cls)
    quick = _quick(struct, document)
    try:
        walked = _json_struct(struct, document, "")
    except SqsError:
        assert quick is None  # what the walk refuses, the quick pass never takes
        return
    assert quick is None or quick == walked


_REQUESTS = sorted({action.request for action in s.ACTIONS.values()}, key=lambda cls: cls.__name__)


@given(pair=st.sampled_from(_REQUESTS).flatmap(lambda cls: st.tuples(st.just(cls), _members_of(cls))))
@settings(max_examples=600, deadline=None)
def test_the_quick_pass_of_every_request_takes_only_what_the_walk_takes(
    pair: tuple[type[s.Shape], dict[str, Any]],
) -> None:
    struct = struct_of(pair[0])
    quick = _quick(struct, pair[1])
    try:
        walked = _json_struct(struct, pair[1], "")
    except SqsError:
        assert quick is None
        return
    assert quick is None or quick == walked


def test_the_quick_pass_takes_a_plain_batch() -> None:
    document = {"QueueUrl": URL, "Entries": [{"Id": "a", "MessageBody": "x", "DelaySeconds": 3, "Other": 1}]}
    struct = struct_of(s.SendMessageBatchRequest)
    quick = _quick(struct, document)
    assert quick is not None
    assert quick == _json_struct(struct, document, "")
