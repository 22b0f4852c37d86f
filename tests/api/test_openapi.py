"""The committed OpenAPI document matches the app, and documents every operation and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app import openapi
from app.api.errors import HTTP_CODES
from app.errors import PqsError
from tests.api.helpers import ACTIONS_BY_ROUTE, KEY_ROUTES

COMMITTED = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, operation) for every operation of the document."""
    return [
        (method, path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


def test_committed_document_matches_the_app() -> None:
    rendered = openapi.render()
    committed = COMMITTED.read_text(encoding="utf-8")
    assert rendered == committed, "openapi/openapi.json is out of date with the app: run `make openapi`"


def test_every_operation_has_a_summary_and_no_422() -> None:
    document = openapi.document()
    found = operations(document)
    assert len(found) >= 15
    missing = [f"{method.upper()} {path}" for method, path, op in found if not op.get("summary")]
    assert missing == [], f"operations without a summary: {missing}"
    with_422 = [f"{method.upper()} {path}" for method, path, op in found if "422" in op.get("responses", {})]
    assert with_422 == [], f"validation errors are 400, yet documented as 422: {with_422}"
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_error_responses_use_the_error_body() -> None:
    document = openapi.document()
    for method, path, operation in operations(document):
        errors = [status for status in operation["responses"] if int(status) >= 400]
        assert "default" not in operation["responses"] and "500" in errors, (method, path)
        for status in errors:
            schema = operation["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)


# What each operation can answer besides success: written out here, derived in the app.
AUTH = {"401", "403", "503"}
# Every operation documents 500 too (tested above).
STATUSES = {
    "healthz": set(),
    "readyz": {"503"},
    # Any valid key may call it: no scope to refuse.
    "get_key_self": {"401", "503"},
    "list_keys": AUTH,
    "create_key": {"400", "413"} | AUTH,
    "revoke_key": {"400", "404", "409"} | AUTH,
    "list_queues": {"400"} | AUTH,
    "create_queue": {"400", "404", "409", "413"} | AUTH,
    "get_queue": {"400", "404"} | AUTH,
    "update_queue": {"400", "404", "413"} | AUTH,
    "delete_queue": {"400", "404", "409"} | AUTH,
    "purge_queue": {"400", "404"} | AUTH,
    # A body (the redrive's filter) may be too large.
    "redrive_queue": {"400", "404", "413"} | AUTH,
    "list_history": {"400", "404"} | AUTH,
    "peek_messages": {"400", "404"} | AUTH,
    "get_queue_throughput": {"400", "404"} | AUTH,
    "get_queue_groups": {"400", "404"} | AUTH,
    "delete_message": {"400", "404"} | AUTH,
    **{
        operation_id: {"400", "404", "413"} | AUTH
        for operation_id in (
            "send_message",
            "send_message_batch",
            "receive_messages",
            "ack_messages",
            "nack_messages",
            "change_visibility",
            "release_messages",
        )
    },
}


def test_each_operation_documents_the_statuses_it_can_answer() -> None:
    found = {
        operation["operationId"]: {s for s in operation["responses"] if 400 <= int(s) < 500 or s == "503"}
        for _, _, operation in operations(openapi.document())
    }
    assert found == STATUSES
    conflicts = {op["operationId"]: op["responses"]["409"]["description"] for _, _, op in operations(openapi.document())
                 if "409" in op["responses"]}  # fmt: skip
    assert "`queue_exists`" in conflicts["create_queue"] and "`queue_in_use`" in conflicts["delete_queue"]


def test_tags_are_declared_with_a_description() -> None:
    document = openapi.document()
    declared = {tag["name"]: tag["description"] for tag in document["tags"]}
    used = {tag for _, _, operation in operations(document) for tag in operation["tags"]}
    assert used == set(declared) == {"queues", "messages", "keys", "health"}
    assert all(declared.values())


def test_error_detail_lists_every_error_code() -> None:
    description = openapi.document()["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["description"]

    def codes(kind: type[PqsError]) -> set[str]:
        return {kind.code}.union(*(codes(sub) for sub in kind.__subclasses__()))

    listed = codes(PqsError) - {PqsError.code} | set(HTTP_CODES.values()) | {"internal_error"}
    missing = sorted(code for code in listed if f"`{code}`" not in description)
    assert missing == []


def test_one_named_schema_per_shared_enum() -> None:
    document = openapi.document()
    schemas = document["components"]["schemas"]
    assert schemas["DeduplicationScope"]["enum"] == ["queue", "group"]
    text = json.dumps(document)
    named = [name for name, schema in schemas.items() if "enum" in schema]
    assert text.count('"enum"') == len(named), "an enum written inline: give it a named schema"
    for name in ("QueueAttributesIn", "QueuePatch", "QueueOut"):
        assert "#/components/schemas/DeduplicationScope" in json.dumps(
            schemas[name]["properties"]["deduplication_scope"]
        )


def test_request_schemas_have_no_default_and_answers_require_every_field() -> None:
    # openapi-typescript (default flags) types a property with a default as required.
    document = openapi.document()
    schemas = document["components"]["schemas"]
    requests = {"QueueAttributesIn", "QueuePatch", "SendRequest", "ReceiveRequest", "NackEntry", "AckEntry"}
    for name in requests:
        assert all("default" not in spec for spec in schemas[name]["properties"].values()), name
    assert "Default: `30`" in schemas["QueueAttributesIn"]["properties"]["visibility_timeout"]["description"]
    for name in ("QueueOut", "MessageOut", "SendResponse", "QueueList"):
        assert set(schemas[name]["required"]) == set(schemas[name]["properties"]), name


def test_create_queue_takes_an_optional_plain_body() -> None:
    body = openapi.document()["paths"]["/v1/queues/{name}"]["put"]["requestBody"]
    assert body["required"] is False
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/QueueAttributesIn"}


def test_operation_ids_are_the_operation_table_s() -> None:
    found = {operation["operationId"] for _, _, operation in operations(openapi.document())}
    assert found == set(STATUSES)


def test_every_schema_property_has_a_description() -> None:
    schemas: dict[str, Any] = openapi.document()["components"]["schemas"]

    def described(schema: dict[str, Any]) -> bool:
        if schema.get("description"):
            return True
        ref = schema.get("$ref")
        if ref is not None and set(schema) == {"$ref"}:
            return bool(schemas[ref.rsplit("/", 1)[-1]].get("description"))
        return False

    missing = [
        f"{name}.{prop}"
        for name, schema in sorted(schemas.items())
        for prop, spec in schema.get("properties", {}).items()
        if not described(spec)
    ]
    assert missing == [], f"schema properties without a description: {json.dumps(missing)}"


def test_v1_operations_declare_the_bearer_key_its_action_and_its_errors() -> None:
    document = openapi.document()
    assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    for method, path, operation in operations(document):
        if not path.startswith("/v1/"):
            assert "security" not in operation and "401" not in operation["responses"], (method, path)
            continue
        # The action each operation needs, as the bearer scheme's role (what the server enforces).
        if (method.upper(), path) in KEY_ROUTES:  # any valid key: the scheme, with no role
            assert operation["security"] == [{"bearerAuth": []}], (method, path)
            assert "403" not in operation["responses"], (method, path)
        else:
            action = ACTIONS_BY_ROUTE[(method.upper(), path)]
            assert operation["security"] == [{"bearerAuth": [action]}], (method, path)
            schema = operation["responses"]["403"]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)
        schema = operation["responses"]["401"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)
        assert "WWW-Authenticate" in operation["responses"]["401"]["headers"]
