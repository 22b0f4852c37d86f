"""A source row that Spark did not stage, checked and staged in Python by the API's own rules
(check_entry), so that its refusal and its staging text are the API's."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from app.domain import SendEntry
from app.pipeline.session import PipelineError
from app.pipeline.staging import copy_text

if TYPE_CHECKING:
    from app.pipeline.backfill.spec import Task

_ATTRIBUTES = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _token(value: Any) -> str | None:
    """A group or dedup id from a source value (numbers become their text)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


def _entry(task: Task, text: str) -> tuple[SendEntry, tuple[str | None, int, bytes]]:
    """One source row as the API's SendEntry, checked by the API's check_entry."""
    from app.service.validation import check_entry

    try:
        record = json.loads(text)
    except ValueError:
        raise PipelineError("the line is not JSON") from None
    if not isinstance(record, dict):
        raise PipelineError("the line is not a JSON object")
    mapping = task.mapping
    if mapping.body is not None:
        body = record.get(mapping.body)
        if task.parse_string_body and isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                raise PipelineError(f"column {mapping.body!r} is not JSON text (for plain text: --body-text)") from None
    else:
        body = {k: v for k, v in record.items() if k not in task.mapped}
    attributes = record.get(mapping.attributes) if mapping.attributes else None
    if isinstance(attributes, str):
        try:
            attributes = json.loads(attributes)
        except ValueError:
            raise PipelineError(f"column {mapping.attributes!r} is not a JSON object") from None
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        raise PipelineError(f"column {mapping.attributes!r} is not an object of attributes")
    entry = SendEntry(
        body=body,
        group_id=_token(record.get(mapping.group_id)) if mapping.group_id else None,
        dedup_id=_token(record.get(mapping.dedup_id)) if mapping.dedup_id else None,
        attributes=attributes,
    )
    return entry, check_entry(task.attributes, entry)


def python_staged(task: Task, text: str) -> tuple[str, str | None]:
    """A row Spark did not stage, checked by check_entry: (staged, dedup_key) as staging.py
    makes them (PqsError or PipelineError when the API would refuse it)."""
    from app.service.enqueue import dedup_key_text, dedup_scope_key

    entry, (dedup_id, delay, body_json) = _entry(task, text)
    scope_key = dedup_scope_key(task.attributes, entry.group_id)
    attributes = _ATTRIBUTES.encode(entry.attributes) if entry.attributes else "{}"
    fields = (entry.group_id, dedup_id, scope_key, body_json.decode(), attributes)
    staged = "\t".join([*(copy_text(f) for f in fields), str(delay)])
    return staged, None if dedup_id is None else dedup_key_text(scope_key, dedup_id)
