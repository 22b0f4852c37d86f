"""The committed OpenAPI document matches the app, and documents every operation and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app import openapi
from tests.api.helpers import ACTIONS_BY_ROUTE as EXPECTED

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
        for status in ("400", "404", "409", "413", "503"):
            response = operation["responses"][status]
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)


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
        assert operation["security"] == [{"bearerAuth": [EXPECTED[(method.upper(), path)]]}], (method, path)
        for status in ("401", "403"):
            schema = operation["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
        assert "WWW-Authenticate" in operation["responses"]["401"]["headers"]
