"""Both SQS protocols against botocore's own serializers and parsers, action by action: what an
SDK sends decodes to what its caller passed, and what PQS answers parses to what PQS meant."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sqs import errors
from app.sqs import shapes as s
from app.sqs.errors import SqsError
from app.sqs.protocol import (
    Protocol,
    _json_bytes,
    _json_document,
    _json_result,
    _serializer,
    decode_request,
    encode_error,
    encode_result,
    protocol_of,
)
from app.sqs.query_xml import escape
from app.sqs.shapes import ACTIONS
from app.sqs.spec import struct_of
from tests.sqs.samples import INPUTS, OUTPUTS, URL
from tests.sqs.wire import as_params, parse, serialize, without_empty, without_metadata

REQUEST_ID = "b6b7a2c1-9f0e-4c57-8f0b-2d3a1e4f5a6b"
PROTOCOLS = list(Protocol)


def decoded(protocol: Protocol, action: str, params: dict[str, Any]) -> s.Shape:
    headers, query, body = serialize(protocol, action, params)
    assert protocol_of(headers) is protocol
    request = decode_request(headers, query, body)
    assert request.protocol is protocol
    assert request.action is ACTIONS[action]
    assert type(request.input) is ACTIONS[action].request
    return request.input


def test_the_samples_cover_every_action() -> None:
    assert set(INPUTS) == set(OUTPUTS) == set(ACTIONS)


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.value)
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_request_decodes_to_what_the_sdk_was_given(protocol: Protocol, action: str) -> None:
    assert as_params(decoded(protocol, action, INPUTS[action])) == INPUTS[action]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.value)
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_result_parses_to_what_was_meant(protocol: Protocol, action: str) -> None:
    result = OUTPUTS[action]
    response = encode_result(protocol, ACTIONS[action], result, REQUEST_ID)
    assert response.status == 200
    assert ("x-amzn-RequestId", REQUEST_ID) in response.headers
    parsed = parse(protocol, action, response)
    expected = as_params(result) if result is not None else {}
    if protocol is Protocol.QUERY:  # XML has no empty list: an empty one reads as absent
        expected = without_empty(expected)
    assert without_metadata(parsed) == expected
    if protocol is Protocol.QUERY:
        assert parsed["ResponseMetadata"]["RequestId"] == REQUEST_ID


@pytest.mark.parametrize("action", sorted(a for a in ACTIONS if OUTPUTS[a] is not None))
def test_a_json_result_is_the_member_walk_byte_for_byte(action: str) -> None:
    """The compiled serializer of a result without blobs writes what walking its members does."""
    result = OUTPUTS[action]
    assert result is not None
    struct = struct_of(type(result))
    assert _json_result(struct, result) == _json_bytes(_json_document(struct, result))


def test_the_samples_hold_serialized_results_and_walked_ones() -> None:
    kinds = {_serializer(struct_of(type(r))) is None for r in OUTPUTS.values() if r is not None}
    assert kinds == {True, False}


def test_a_result_of_another_action_is_refused() -> None:
    with pytest.raises(TypeError):
        encode_result(Protocol.JSON, ACTIONS["SendMessage"], s.CreateQueueResult(QueueUrl=URL), REQUEST_ID)
    with pytest.raises(TypeError):
        encode_result(Protocol.JSON, ACTIONS["SendMessage"], None, REQUEST_ID)


def test_a_query_request_cannot_say_empty_so_a_required_list_is_empty() -> None:
    # botocore sends an empty list as `Entries=`, which names no entry.
    assert decoded(Protocol.QUERY, "DeleteMessageBatch", {"QueueUrl": URL, "Entries": []}) == (
        s.DeleteMessageBatchRequest(QueueUrl=URL, Entries=[])
    )
    assert decoded(Protocol.JSON, "DeleteMessageBatch", {"QueueUrl": URL, "Entries": []}) == (
        s.DeleteMessageBatchRequest(QueueUrl=URL, Entries=[])
    )


def test_message_system_attribute_names_travel_in_json() -> None:
    params = {"QueueUrl": URL, "MessageSystemAttributeNames": ["SentTimestamp", "All"]}
    assert decoded(Protocol.JSON, "ReceiveMessage", params) == s.ReceiveMessageRequest(
        QueueUrl=URL, MessageSystemAttributeNames=["SentTimestamp", "All"]
    )


# --- errors -----------------------------------------------------------------------------------

ALL_ERRORS = [
    *errors.MODELED,
    errors.INVALID_ACTION,
    errors.MISSING_ACTION,
    errors.MISSING_PARAMETER,
    errors.INVALID_PARAMETER_VALUE,
    errors.INVALID_QUERY_PARAMETER,
    errors.INTERNAL_FAILURE,
    errors.SERVICE_UNAVAILABLE,
    errors.ACCESS_DENIED,
]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.value)
@pytest.mark.parametrize("error", ALL_ERRORS, ids=lambda e: e.code)
def test_an_error_parses_to_its_code_message_and_status(protocol: Protocol, error: errors.ErrorType) -> None:
    message = "The specified queue does not exist. <&> \r\n é"
    response = encode_error(protocol, SqsError(error, message), REQUEST_ID)
    assert response.status == error.status
    parsed = parse(protocol, "GetQueueUrl", response)
    # Both protocols give the SDK the query code: the JSON one through x-amzn-query-error.
    assert parsed["Error"]["Code"] == error.query_code
    assert parsed["Error"]["Message"] == message
    assert parsed["Error"]["Type"] == error.fault
    assert parsed["ResponseMetadata"]["HTTPStatusCode"] == error.status
    assert parsed["ResponseMetadata"]["RequestId"] == REQUEST_ID
    if protocol is Protocol.JSON:
        assert parsed["Error"]["QueryErrorCode"] == error.code


def test_the_json_error_is_the_one_sqs_documents() -> None:
    error = SqsError(errors.QUEUE_DOES_NOT_EXIST, "The specified queue does not exist.")
    response = encode_error(Protocol.JSON, error, REQUEST_ID)
    assert response.status == 400
    assert dict(response.headers) == {
        "Content-Type": "application/x-amz-json-1.0",
        "x-amzn-RequestId": REQUEST_ID,
        "x-amzn-query-error": "AWS.SimpleQueueService.NonExistentQueue;Sender",
    }
    assert response.body == (
        b'{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}'
    )


def test_the_query_error_is_the_one_sqs_writes() -> None:
    error = SqsError(errors.QUEUE_DOES_NOT_EXIST, "The specified queue does not exist.")
    response = encode_error(Protocol.QUERY, error, REQUEST_ID)
    assert response.body.decode() == (
        '<?xml version="1.0"?><ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><Error>'
        "<Type>Sender</Type><Code>AWS.SimpleQueueService.NonExistentQueue</Code>"
        "<Message>The specified queue does not exist.</Message><Detail/></Error>"
        f"<RequestId>{REQUEST_ID}</RequestId></ErrorResponse>"
    )


def test_a_signature_error_keeps_its_code_and_status() -> None:
    from app.sqs.signature import AuthFailure, SignatureError

    error = SqsError.from_signature(SignatureError(AuthFailure.INVALID_CLIENT_TOKEN_ID, "unknown key"))
    for protocol in PROTOCOLS:
        parsed = parse(protocol, "SendMessage", encode_error(protocol, error, REQUEST_ID))
        assert parsed["Error"]["Code"] == "InvalidClientTokenId"
        assert parsed["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_a_batch_entry_error_carries_the_query_code() -> None:
    entry = errors.batch_error("m1", SqsError(errors.MESSAGE_NOT_INFLIGHT, "not in flight"))
    assert entry == s.BatchResultErrorEntry(
        Id="m1", SenderFault=True, Code="AWS.SimpleQueueService.MessageNotInflight", Message="not in flight"
    )


# --- any text SQS accepts, both ways ---------------------------------------------------------

# The characters SQS allows in a message: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
SQS_TEXT = st.text(
    st.one_of(
        st.sampled_from("\t\n\r<>&\"'"),
        st.characters(min_codepoint=0x20, max_codepoint=0xD7FF),
        st.characters(min_codepoint=0xE000, max_codepoint=0xFFFD),
        st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(body=SQS_TEXT, value=SQS_TEXT, binary=st.binary(max_size=40), name=SQS_TEXT)
def test_any_text_sqs_accepts_goes_both_ways(body: str, value: str, binary: bytes, name: str) -> None:
    attributes: dict[str, Any] = {name: {"DataType": "String", "StringValue": value}}
    if binary:
        attributes[name + "b"] = {"DataType": "Binary", "BinaryValue": binary}
    params = {"QueueUrl": URL, "MessageBody": body, "MessageAttributes": attributes}
    result = s.ReceiveMessageResult(
        Messages=[
            s.Message(
                MessageId="id",
                Body=body,
                MessageAttributes={key: s.MessageAttributeValue(**attribute) for key, attribute in attributes.items()},
            )
        ]
    )
    for protocol in PROTOCOLS:
        assert as_params(decoded(protocol, "SendMessage", params)) == params
        parsed = parse(protocol, "ReceiveMessage", encode_result(protocol, ACTIONS["ReceiveMessage"], result, "r"))
        assert without_metadata(parsed) == as_params(result)


def test_an_error_message_xml_cannot_carry_is_still_written() -> None:
    """Error text may quote anything a client sent: what XML 1.0 cannot carry becomes U+FFFD,
    while a result keeps refusing it (SQS refuses such text on the way in)."""
    error = SqsError(errors.INVALID_PARAMETER_VALUE, "bad \x01 and \udcff and \ufffe <&>")
    response = encode_error(Protocol.QUERY, error, REQUEST_ID)
    parsed = parse(Protocol.QUERY, "SendMessage", response)
    assert parsed["Error"]["Message"] == "bad \ufffd and \ufffd and \ufffd <&>"
    with pytest.raises(ValueError):
        escape("\x01")
