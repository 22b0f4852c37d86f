"""The service's log: the access log's query-free paths, and JSON lines (PQS_LOG_FORMAT=json).

A careless client may put its API key in the query (`?api_key=...`), or in the path (a queue URL
or a base URL mistyped); the key must reach no log. uvicorn's access logger (which the hot lane
writes to as well) formats each line from the record's arguments (client, method, path with query,
HTTP version, status); `WithoutQuery`, on that logger, drops the query from the third, and cuts the
secret of a key in the path, before any handler formats it, in either format.

In JSON mode (`log_config`, which `pqs serve` hands to uvicorn) every logger writes one JSON
object a line (python-json-logger): `time` (UTC, ISO 8601), `level`, `logger`, `message`; a line
written while a request is served also has its `request_id` (app/api/request_id.py); an access
line has `request_id`, `method`, `path` (without the query), `status`, `duration` (seconds from the
request's head to its response's start), `operation` (the operationId of the match that
dispatched it, app/api/operations.py) and `queue` (the name that match extracted), null when no
route matched, plus `sqs_action` for an SQS request. `RequestFields`, on the JSON handlers, adds
them; the text format stays uvicorn's own.
"""

from __future__ import annotations

import functools
import logging
import re
from time import perf_counter
from typing import Any

from app.access import KEY_FORMAT
from app.api.request_id import CURRENT, Exchange

ACCESS_LOGGER = "uvicorn.access"
LONGEST_QUEUE_NAME = 80


def without_secrets(text: str) -> str:
    """`text` with the secret of any API key in it cut, its key id (public) kept."""
    return KEY_FORMAT.sub(r"pqs_\1_[redacted]", text) if "pqs_" in text else text


class WithoutQuery(logging.Filter):
    """Drops the query string from an access log record's path, and the secret of a key a
    careless client put in the path itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            target = args[2]
            path = without_secrets(target.split("?", 1)[0]) if "?" in target or "pqs_" in target else target
            if path != target:
                record.args = (args[0], args[1], path, args[3], args[4])
        return True


_FILTER = WithoutQuery()


def install() -> None:
    """Put the filter on uvicorn's access logger (once, however many apps are made)."""
    logging.getLogger(ACCESS_LOGGER).addFilter(_FILTER)


@functools.cache
def _table() -> tuple[tuple[str, re.Pattern[str], str], ...]:
    """(method, path pattern, operationId) of each row of the operation table: the match of a
    request no router has seen."""
    from app.api.operations import OPERATIONS  # the table loads every route: only when needed

    def pattern(path: str) -> re.Pattern[str]:
        # A parameter is one path segment, as Starlette's path convertor reads it.
        return re.compile(re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path)))

    return tuple((op.method, pattern(op.path), op.operation_id) for op in OPERATIONS)


def dispatched(exchange: Exchange) -> tuple[str | None, str | None]:
    """(operationId, queue name) of the match that dispatched the request, if any.

    The hot lane and the front say so themselves (`routed`). FastAPI's router keeps the route it
    matched in the scope; a partial match (the path of a route, another method: 405) is none. A
    request answered before FastAPI routed it (401 from access control, 413 from the body cap) is
    matched here on the operation table, as the router would match it, so that both ways of
    serving log the same."""
    scope = exchange.scope
    if exchange.routed or scope is None:
        return exchange.operation, exchange.queue
    method = scope["method"]
    route = scope.get("route")
    if route is not None:
        if method not in (getattr(route, "methods", None) or ()):
            return None, exchange.queue
        name = (scope.get("path_params") or {}).get("name")
        return getattr(route, "name", None), exchange.queue or name
    for wanted, pattern, operation_id in _table():
        found = pattern.fullmatch(scope["path"]) if method == wanted else None
        if found is not None:
            return operation_id, found.groupdict().get("name")
    return None, exchange.queue


class RequestFields(logging.Filter):
    """Adds the fields of the request being served to a record (JSON mode's handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exchange = CURRENT.get()
        if exchange is None:
            return True
        record.request_id = exchange.request_id
        args = record.args
        if record.name == ACCESS_LOGGER and isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.method = args[1]
            record.path = args[2].split("?", 1)[0]
            record.status = args[4]
            record.duration = round(perf_counter() - exchange.started, 6)
            operation, queue = dispatched(exchange)
            record.operation = operation
            # A name from a request's body (SQS's QueueUrl) may be any length: none longer than
            # a queue name can be (QueueName) is logged.
            if queue is not None and len(queue) > LONGEST_QUEUE_NAME:
                queue = None
            elif queue is not None and not queue.isascii():
                # The query protocol decodes bytes that are no UTF-8 to lone surrogates, which a
                # strict JSON reader refuses in a line (\udcff): they are logged escaped, as text.
                queue = queue.encode("utf-8", "backslashreplace").decode("utf-8")
            record.queue = without_secrets(queue) if queue is not None else None
            if exchange.sqs_action is not None:
                record.sqs_action = exchange.sqs_action
        return True


# uvicorn's own records carry a colored copy of their message.
_NOT_FIELDS = ["color_message"]


def log_config(level: str) -> dict[str, Any]:
    """The logging configuration of JSON mode (see the module docstring), for uvicorn's
    `log_config`: uvicorn's loggers as uvicorn configures them (errors to stderr, access lines to
    stdout), and every other logger (the app's, the libraries') to stderr through the root."""
    from pythonjsonlogger.core import RESERVED_ATTRS  # only JSON mode loads it

    json_formatter = {
        "()": "pythonjsonlogger.json.JsonFormatter",
        "fmt": ["levelname", "name", "message"],
        "rename_fields": {"levelname": "level", "name": "logger"},
        "timestamp": "time",
        "reserved_attrs": [*RESERVED_ATTRS, *_NOT_FIELDS],
    }
    level = level.upper()

    def handler(stream: str) -> dict[str, Any]:
        return {"class": "logging.StreamHandler", "formatter": "json", "filters": ["request"], "stream": stream}

    return {
        "version": 1,
        "disable_existing_loggers": False,  # the app's loggers exist before this is applied
        "formatters": {"json": json_formatter},
        "filters": {"request": {"()": "app.api.access_log.RequestFields"}},
        "handlers": {"default": handler("ext://sys.stderr"), "access": handler("ext://sys.stdout")},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["access"], "level": level, "propagate": False},
        },
        "root": {"handlers": ["default"], "level": level},
    }
