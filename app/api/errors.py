"""The one place where errors become HTTP responses. Every 4xx/5xx body is
`{"error": {"code": ..., "message": ...}}`."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.errors import (
    ECHO_LIMIT,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    PqsError,
    TooLarge,
    Unauthorized,
    Unavailable,
    quote,
)
from app.service.validation import MAX_DEPTH

log = logging.getLogger(__name__)

STATUS: list[tuple[type[PqsError], int]] = [
    (Unauthorized, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (InvalidInput, 400),
    (TooLarge, 413),
    (Unavailable, 503),
]
HTTP_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
    503: "unavailable",
}

# Headers that go with a status wherever it is answered (here and in the ASGI middlewares).
HEADERS = {401: {"WWW-Authenticate": "Bearer"}, 503: {"Retry-After": "1"}}


def error_bytes(code: str, message: str) -> bytes:
    """The error body as the ASGI-level answers send it: byte for byte what FastAPI's
    JSONResponse renders for the same error (compact, UTF-8)."""
    body = {"error": {"code": code, "message": message}}
    return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """A JSON error response in the house shape."""
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


def status_of(exc: PqsError) -> int:
    """HTTP status for a domain error."""
    for kind, status in STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def _loc_part(part: Any) -> str:
    # A location names our fields and indexes, but also the client's keys (of an object of
    # attributes, or a field we do not know): those are quoted, and bounded, when odd or long.
    text = str(part)
    return text if len(text) <= ECHO_LIMIT and text.isprintable() else quote(text)


def describe_validation(errors: list[Any]) -> str:
    """One line naming the first few invalid fields (`loc: msg`), without the `body` prefix."""
    parts = []
    for err in errors[:5]:
        loc = ".".join(_loc_part(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


def undecodable(exc: Exception) -> str:
    """The 400 message for a request body that json.loads refused, as both serving ways say it
    (the fast path parses the body itself; FastAPI does, and answers a JSONDecodeError as a
    validation error and anything else as a 400 whose cause is what json.loads raised).

    JSON nested deeper than the parser's recursion limit (some 900 levels; nothing valid comes
    near it) is refused here as a whole, before any model sees it."""
    if isinstance(exc, RecursionError):
        return (
            "request body: JSON nested too deeply to parse"
            f" (a message body, result or error nests at most {MAX_DEPTH} levels)"
        )
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.pos}: JSON decode error"
    return "request body: not JSON in UTF-8"


def install(app: FastAPI) -> None:
    """Register the exception handlers on `app`."""

    @app.exception_handler(PqsError)
    async def domain_error(_: Request, exc: PqsError) -> JSONResponse:
        status = status_of(exc)
        return error_response(status, exc.code, exc.message, HEADERS.get(status))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, "invalid_request", describe_validation(list(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = HTTP_CODES.get(exc.status_code, "error")
        message = str(exc.detail)
        if exc.status_code == 400 and isinstance(exc.__cause__, (ValueError, RecursionError)):
            message = undecodable(exc.__cause__)  # FastAPI's "error parsing the body"
        return error_response(exc.status_code, code, message, dict(exc.headers or {}) or None)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(500, "internal_error", "internal error; see the service log")
