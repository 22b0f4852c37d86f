"""The OpenAPI document of the REST API: FastAPI's, made to the rules below, so that clients
generated from it (openapi-python-client, openapi-typescript) read like hand-written ones.
docs/clients.md has the rules for maintainers; tests/api/test_openapi.py holds them.

- Tags are declared at the top level, with a description (`TAGS`).
- Each operation documents the error statuses it can answer, derived from its shape and its row
  of the operation table (`error_statuses`), and 500 (a bug, but in the house shape too). No
  `default`: it would let any status conform, and the contract tests (tests/contract) check that
  every answer's status is documented. Every error response has the house body, ErrorBody, whose
  `code` values are listed in ErrorDetail's description, derived from the domain-error tree and
  the API's own codes (`error_codes`).
- An optional request body is a plain `$ref` that is not required (no `anyOf` with null).
- A request schema has no `default`: openapi-typescript's default flags type a property with a
  default as required, in requests too. The default is said in the description instead; the
  server applies it. (Answers list every property as required: app/api/schemas.py.)
- Validation errors are 400 with the house body, never 422.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.access import ANY_KEY
from app.api.auth import SECURITY_SCHEME
from app.api.errors import HTTP_CODES, INTERNAL_ERROR, STATUS_HEADERS, Answer, status_of
from app.api.operations import BY_ID, Operation
from app.api.schemas import ErrorBody
from app.errors import PqsError

TAGS: dict[str, str] = {
    "queues": "Create, read, change, purge, redrive and delete queues (the `admin` action).",
    "messages": "Send, receive, ack, nack and change the visibility of messages (`send`, `receive`, `ack`).",
    "keys": "The calling API key: what it may do (any valid key).",
    "health": "Liveness and readiness probes; no API key needed.",
}
REF = "#/components/schemas/{model}"
ERROR_BODY = REF.format(model="ErrorBody")
DESCRIPTIONS: dict[int, str] = {
    400: "Invalid input (a path, query or body that breaks a rule).",
    401: "No API key, or an unknown or revoked one.",
    403: "The API key's scopes do not allow this action on this queue.",
    404: "What the path names does not exist (or no route has such a path).",
    409: "Conflicts with the current state.",
    413: "Request or message too large.",
    500: "Internal error: a bug; the service log has its traceback.",
    503: "Unavailable for now (database unreachable, or too many connections); retry after `Retry-After` seconds.",
}
# The headers that go with a status (app/api/errors.py's STATUS_HEADERS), as the document names them.
HEADERS = {
    b"www-authenticate": ("WWW-Authenticate", "`Bearer`: the scheme to authenticate with."),
    b"retry-after": ("Retry-After", "Seconds to wait before trying again."),
}
METHODS = {"get", "put", "post", "patch", "delete"}


def build(app: FastAPI) -> dict[str, Any]:
    """The document of `app`, made to the rules of the module docstring."""
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=[{"name": name, "description": text} for name, text in TAGS.items()],
    )
    schemas: dict[str, Any] = schema["components"]["schemas"]
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    error_body = ErrorBody.model_json_schema(ref_template=REF, mode="serialization")
    schemas.update(error_body.pop("$defs"), ErrorBody=error_body)
    schema["components"]["securitySchemes"] = {
        SECURITY_SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key, `pqs_<key id>_<secret>` (`pqs keys create`).",
        }
    }
    for operation in _operations(schema):
        responses = operation["responses"]
        responses.pop("422", None)
        statuses = error_statuses(BY_ID[operation["operationId"]], operation)
        responses.update({str(status): _error_response(status, codes) for status, codes in statuses.items()})
        _plain_optional_body(operation)
    for name in _request_schemas(schema):
        _defaults_described(schemas[name])
    schemas["ErrorDetail"]["properties"]["code"]["description"] += " " + _codes_text()
    return schema


def error_statuses(row: Operation, operation: dict[str, Any]) -> dict[int, tuple[str, ...]]:
    """The error statuses an operation can answer, each with the codes to name (none: any of its
    status): from what it takes (path, query, body), whether it needs a key, and what its row of
    the operation table says it raises."""
    statuses: dict[int, tuple[str, ...]] = {}
    where = {parameter["in"] for parameter in operation.get("parameters", ())}
    if where or "requestBody" in operation:
        statuses[400] = ()
    if row.action is not None:
        # The key is checked (and read from the database: 503 when it cannot be); its scopes too,
        # unless any valid key may call the operation.
        statuses.update({401: (), 503: ()} if row.action == ANY_KEY else {401: (), 403: (), 503: ()})
    # A path names what must exist; and a value no route takes (a `/`, a control character) is
    # no route at all: on the PUT that creates a queue too.
    if "path" in where:
        statuses[404] = ()
    if "requestBody" in operation:
        statuses[413] = ()
    statuses[INTERNAL_ERROR.status] = (_code(INTERNAL_ERROR),)
    for error in row.raises:
        status = status_of(error)
        statuses[status] = (*statuses.get(status, ()), error.code)
    return dict(sorted(statuses.items()))


def error_codes() -> dict[int, list[str]]:
    """Every `code` an error body can have, by status: the domain errors' (app/errors.py) and the
    API's own (app/api/errors.py), in order."""
    by_status: dict[int, list[str]] = {}

    def add(status: int, code: str) -> None:
        codes = by_status.setdefault(status, [])
        if code not in codes:
            codes.append(code)

    for status, code in HTTP_CODES.items():
        add(status, code)
    for error in _subclasses(PqsError):
        add(status_of(error), error.code)
    add(INTERNAL_ERROR.status, _code(INTERNAL_ERROR))
    return dict(sorted(by_status.items()))


def _code(answer: Answer) -> str:
    code: str = json.loads(answer.body)["error"]["code"]
    return code


def _subclasses(kind: type[PqsError]) -> Iterator[type[PqsError]]:
    for sub in kind.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _codes_text() -> str:
    listed = "; ".join(f"{status}: " + ", ".join(f"`{c}`" for c in codes) for status, codes in error_codes().items())
    return f"The codes, by status: {listed}. A client should accept a code it does not know."


def _error_response(status: int, codes: tuple[str, ...]) -> dict[str, Any]:
    description = DESCRIPTIONS[status]
    if codes:
        description += " Code: " + ", ".join(f"`{code}`" for code in codes) + "."
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": ERROR_BODY}}},
    }
    headers = STATUS_HEADERS.get(status, ())
    if headers:
        response["headers"] = {
            HEADERS[name][0]: {"description": HEADERS[name][1], "schema": {"type": "string"}} for name, _ in headers
        }
    return response


def _operations(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for item in schema["paths"].values():
        for method, operation in item.items():
            if method in METHODS:
                yield operation


def _plain_optional_body(operation: dict[str, Any]) -> None:
    """An optional body (`Model | None`) as a plain `$ref`, not required: no body, not a JSON null."""
    body = operation.get("requestBody")
    if body is None:
        return
    content = body["content"]["application/json"]
    options = content["schema"].get("anyOf", [])
    refs = [option for option in options if option != {"type": "null"}]
    if len(options) == 2 and len(refs) == 1:
        content["schema"] = refs[0]
        body["required"] = False


def _request_schemas(schema: dict[str, Any]) -> set[str]:
    """The component schemas a request body reaches (FastAPI names a model used both ways
    differently in each when its two schemas differ, so these are validation-mode schemas)."""
    schemas = schema["components"]["schemas"]
    found: set[str] = set()
    todo = [operation["requestBody"] for operation in _operations(schema) if "requestBody" in operation]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[-1]
                if name not in found:
                    found.add(name)
                    todo.append(schemas[name])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return found


def _defaults_described(model: dict[str, Any]) -> None:
    """Each property's `default` moved into its description (see the module docstring)."""
    for spec in model.get("properties", {}).values():
        if "default" in spec:
            default = spec.pop("default")
            if default is not None:
                spec["description"] = f"{spec.get('description', '').rstrip('.')}. Default: `{json.dumps(default)}`."
