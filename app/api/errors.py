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

from app.errors import Conflict, Forbidden, InvalidInput, NotFound, PqsError, TooLarge, Unauthorized, Unavailable

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


def describe_validation(errors: list[Any]) -> str:
    """One line naming the first few invalid fields (`loc: msg`), without the `body` prefix."""
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


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
        return error_response(exc.status_code, code, str(exc.detail), dict(exc.headers or {}) or None)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(500, "internal_error", "internal error; see the service log")
