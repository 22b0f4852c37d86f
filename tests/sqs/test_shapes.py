"""PQS's own table of SQS shapes and errors, held against SQS's service models so that it cannot
drift: the JSON model botocore ships for names, types and required members, the last query model
for the query protocol's names and the errors' query codes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from botocore.model import Shape as BotoShape

from app.sqs import errors
from app.sqs.shapes import ACTIONS
from app.sqs.spec import Kind, Struct, Type, struct_of
from tests.sqs.wire import json_model, query_model

ISSUE_ACTIONS = [
    "CreateQueue",
    "GetQueueUrl",
    "ListQueues",
    "DeleteQueue",
    "GetQueueAttributes",
    "SetQueueAttributes",
    "PurgeQueue",
    "SendMessage",
    "SendMessageBatch",
    "ReceiveMessage",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
    "TagQueue",
    "UntagQueue",
    "ListQueueTags",
    "ListDeadLetterSourceQueues",
    "StartMessageMoveTask",
    "ListMessageMoveTasks",
    "CancelMessageMoveTask",
]


def test_every_action_of_the_issue_is_served() -> None:
    assert sorted(ACTIONS) == sorted(ISSUE_ACTIONS)
    assert set(ACTIONS) <= set(json_model().operation_names)
    assert set(ACTIONS) <= set(query_model().operation_names)


def _same_type(ours: Type, theirs: BotoShape, where: str) -> None:
    assert ours.kind.value == theirs.type_name, where
    if ours.kind is Kind.LIST:
        assert ours.item is not None
        _same_type(ours.item, theirs.member, f"{where}[]")  # type: ignore[attr-defined]
    elif ours.kind is Kind.MAP:
        assert ours.item is not None
        assert theirs.key.type_name == "string", where  # type: ignore[attr-defined]
        _same_type(ours.item, theirs.value, f"{where}{{}}")  # type: ignore[attr-defined]
    elif ours.kind is Kind.STRUCTURE:
        assert ours.struct is not None
        _same_struct(ours.struct, theirs, where)


def _same_struct(ours: Struct, theirs: BotoShape, where: str) -> None:
    assert ours.name == theirs.name, where
    members = theirs.members  # type: ignore[attr-defined]
    assert [m.name for m in ours.members] == list(members), where
    assert {m.name for m in ours.members if m.required} == set(theirs.required_members), where
    for member in ours.members:
        _same_type(member.type, members[member.name], f"{where}.{member.name}")


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_the_shapes_are_those_of_the_json_model(action: str) -> None:
    operation = json_model().operation_model(action)
    _same_struct(struct_of(ACTIONS[action].request), operation.input_shape, action)
    result = ACTIONS[action].result
    if result is None:
        assert operation.output_shape is None or not operation.output_shape.members
    else:
        _same_struct(struct_of(result), operation.output_shape, action)


def _same_wire(ours: Struct, theirs: BotoShape, where: str) -> None:
    """The query names: botocore's query serializer and XML parser name a member by its
    `locationName`, a flattened list's items by the list member's, a map's entries' keys and
    values by theirs."""
    members = theirs.members  # type: ignore[attr-defined]
    for member in ours.members:
        if member.name not in members:  # came after the query protocol: see test below
            continue
        ref = members[member.name]
        here = f"{where}.{member.name}"
        name = ref.serialization.get("name", member.name)
        if member.type.kind is Kind.LIST:
            assert _flat(ref), here
            name = ref.member.serialization.get("name", name)
            item = member.type.item
            if item is not None and item.struct is not None:
                _same_wire(item.struct, ref.member, here)
        elif member.type.kind is Kind.MAP:
            assert _flat(ref), here
            assert member.key == ref.key.serialization.get("name", "key"), here
            assert member.value == ref.value.serialization.get("name", "value"), here
            item = member.type.item
            if item is not None and item.struct is not None:
                _same_wire(item.struct, ref.value, here)
        elif member.type.struct is not None:
            _same_wire(member.type.struct, ref, here)
        assert member.wire == name, here


def _flat(shape: BotoShape) -> bool:
    return bool(shape.serialization.get("flattened"))


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_the_query_names_are_those_of_the_query_model(action: str) -> None:
    operation = query_model().operation_model(action)
    _same_wire(struct_of(ACTIONS[action].request), operation.input_shape, action)
    result = ACTIONS[action].result
    if result is not None:
        assert operation.output_shape.serialization["resultWrapper"] == f"{action}Result"
        _same_wire(struct_of(result), operation.output_shape, action)


def test_only_message_system_attribute_names_is_newer_than_the_query_model() -> None:
    newer = [
        (action, member.name)
        for action, served in ACTIONS.items()
        for member in struct_of(served.request).members
        if member.name not in query_model().operation_model(action).input_shape.members
    ]
    assert newer == [("ReceiveMessage", "MessageSystemAttributeNames")]
    # Its query name in SQS's Smithy model is AttributeName, as AttributeNames' is.
    member = next(m for m in struct_of(ACTIONS["ReceiveMessage"].request).members if m.name == newer[0][1])
    assert member.wire == "AttributeName"


def test_every_error_of_the_actions_is_in_the_catalogue() -> None:
    ours = {error.code: error for error in errors.MODELED}
    for action in ACTIONS:
        for shape in json_model().operation_model(action).error_shapes:
            assert shape.name in ours, (action, shape.name)
    for action in ACTIONS:
        for shape in query_model().operation_model(action).error_shapes:
            facts = shape.metadata.get("error")
            error = ours[shape.name]
            if facts is None:  # no query code in the model: the name is the code
                assert error.query_code == shape.name, shape.name
            else:
                assert (error.query_code, error.status, error.sender) == (
                    facts["code"],
                    facts["httpStatusCode"],
                    facts.get("senderFault", False),
                ), shape.name


def test_the_sqs_package_runs_without_botocore() -> None:
    # botocore is a dev dependency: the protocol is PQS's own code, checked against it in tests.
    for path in Path("app/sqs").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(name.split(".")[0] in ("botocore", "boto3") for name in names), path
