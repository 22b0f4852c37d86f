"""Requests as botocore serializes them and answers as botocore parses them, in both protocols.

botocore is the SDK boto3 and the aws CLI run, and its serializers and parsers are generic over
a service model. The JSON protocol uses the SQS model botocore ships. The query protocol uses
`data/sqs-query-model.json`: the last query-protocol SQS model that botocore shipped (botocore
1.34.22, `botocore/data/sqs/2012-11-05/service-2.json`), cut down to the 21 actions PQS serves
and their shapes, with the documentation left out. It is what every SDK older than the JSON
protocol was generated from, so it says how they send requests and read answers.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

import botocore.session
from botocore.awsrequest import HeadersDict, create_request_object, prepare_request_dict
from botocore.model import OperationModel, ServiceModel
from botocore.parsers import create_parser
from botocore.serialize import create_serializer

from app.sqs.protocol import Protocol, WireResponse
from app.sqs.shapes import Shape

ENDPOINT = "http://127.0.0.1:9324"
QUERY_MODEL_PATH = Path(__file__).parent / "data" / "sqs-query-model.json"


@cache
def json_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("sqs")


@cache
def query_model() -> ServiceModel:
    return ServiceModel(json.loads(QUERY_MODEL_PATH.read_text()), "sqs")


def model(protocol: Protocol) -> ServiceModel:
    return json_model() if protocol is Protocol.JSON else query_model()


def operation(protocol: Protocol, action: str) -> OperationModel:
    return model(protocol).operation_model(action)


def serialize(protocol: Protocol, action: str, params: dict[str, Any]) -> tuple[list[tuple[str, str]], str, bytes]:
    """The request botocore sends for `params`: header pairs, raw query string and body bytes."""
    op = operation(protocol, action)
    request_dict = create_serializer(protocol.value).serialize_to_request(params, op)
    prepare_request_dict(request_dict, ENDPOINT)
    prepared = create_request_object(request_dict).prepare()
    body = prepared.body or b""
    if isinstance(body, str):
        body = body.encode()
    query = prepared.url.partition("?")[2]
    return list(prepared.headers.items()), query, body


def parse(protocol: Protocol, action: str, response: WireResponse) -> dict[str, Any]:
    """The dict botocore makes of an answer, as boto3 hands it to its caller (errors included)."""
    op = operation(protocol, action)
    parsed: dict[str, Any] = create_parser(protocol.value).parse(
        {"status_code": response.status, "headers": HeadersDict(response.headers), "body": response.body},
        op.output_shape,
    )
    return parsed


def as_params(shape: Shape) -> dict[str, Any]:
    """A shape as the dict of parameters a boto3 caller writes (absent members left out)."""
    values = {field.name: getattr(shape, field.name) for field in dataclasses.fields(shape)}
    return {name: _plain(value) for name, value in values.items() if value is not None}


def _plain(value: Any) -> Any:
    if isinstance(value, Shape):
        return as_params(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def without_metadata(parsed: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in parsed.items() if key != "ResponseMetadata"}


def without_empty(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters less their empty lists and maps, which XML cannot tell from absent ones."""
    return {key: _nonempty(value) for key, value in params.items() if value != [] and value != {}}


def _nonempty(value: Any) -> Any:
    if isinstance(value, list):
        return [_nonempty(item) for item in value]
    if isinstance(value, dict):
        return without_empty(value)
    return value
