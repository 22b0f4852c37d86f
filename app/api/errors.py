"""The one place where errors become HTTP responses. Every 4xx/5xx body is
`{"error": {"code": ..., "message": ...}}`.

`error_answer` renders every error response PQS gives, whichever way the request was served:
FastAPI's exception handlers (`install`), the ASGI middlewares (access control, the body cap, the
front's 404), the hot lane and the HTTP protocol's own answers (app/api/transport.py). Each way
only writes the `Answer` out (`as_response`, `send_answer`, or straight to the socket)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from typing import Any, NamedTuple

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Send

from app.api.json_body import NumberTooLong, RepeatedKey
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

Header = tuple[bytes, bytes]
# Headers that go with a status wherever it is answered: the scheme to authenticate with, and
# when to try again.
STATUS_HEADERS: dict[int, tuple[Header, ...]] = {
    401: ((b"www-authenticate", b"Bearer"),),
    503: ((b"retry-after", b"1"),),
}


class Answer(NamedTuple):
    """A complete JSON response: status, body, and the headers besides content type and length
    (lower-case names, as ASGI has them)."""

    status: int
    body: bytes
    headers: tuple[Header, ...] = ()


def error_answer(status: int, code: str, message: str, headers: Iterable[Header] = ()) -> Answer:
    """The error response: `status`, the house body (compact UTF-8 JSON, byte for byte what
    FastAPI's JSONResponse renders), the headers that go with the status, then `headers`."""
    body = {"error": {"code": code, "message": message}}
    rendered = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    return Answer(status, rendered, (*STATUS_HEADERS.get(status, ()), *headers))


def answer_to(exc: PqsError) -> Answer:
    """The error response to a domain error."""
    return error_answer(status_of(exc), exc.code, exc.message)


INTERNAL_ERROR = error_answer(500, "internal_error", "internal error; see the service log")


def head(answer: Answer) -> list[Header]:
    """The answer's headers as every way of serving writes them: its own, then content length and
    type (the order in which a Starlette Response has them)."""
    length = (b"content-length", b"%d" % len(answer.body))
    return [*answer.headers, length, (b"content-type", b"application/json")]


def as_response(answer: Answer) -> Response:
    """The answer as a Starlette response (what a FastAPI handler returns)."""
    response = Response(answer.body, answer.status)
    response.raw_headers = head(answer)
    return response


async def send_answer(send: Send, answer: Answer, *headers: Header) -> None:
    """Send the answer from ASGI, with `headers` after its own."""
    await send({"type": "http.response.start", "status": answer.status, "headers": [*head(answer), *headers]})
    await send({"type": "http.response.body", "body": answer.body})


def status_of(exc: PqsError | type[PqsError]) -> int:
    """HTTP status for a domain error (or for a class of them: the OpenAPI document's)."""
    error = exc if isinstance(exc, type) else type(exc)
    for kind, status in STATUS:
        if issubclass(error, kind):
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
    """The 400 message for a request body that parse_body (app/api/json_body.py) refused, as both
    serving ways say it (the hot lane parses the body itself, in app/api/hot.py; FastAPI does, and
    answers a JSONDecodeError as a validation error and anything else as a 400 whose cause is
    what parse_body raised).

    JSON nested deeper than the parser's recursion limit (some 900 levels; nothing valid comes
    near it) is refused here as a whole, before any model sees it."""
    if isinstance(exc, RecursionError):
        return (
            "request body: JSON nested too deeply to parse"
            f" (a message body, result or error nests at most {MAX_DEPTH} levels)"
        )
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.pos}: JSON decode error"
    if isinstance(exc, RepeatedKey):
        return f"request body: the key {quote(exc.key)} is given twice in one object"
    if isinstance(exc, NumberTooLong):
        return f"request body: a number has {exc.digits:,} digits, more than {sys.get_int_max_str_digits():,}"
    return "request body: not JSON in UTF-8"


def install(app: FastAPI) -> None:
    """Register the exception handlers on `app`."""

    @app.exception_handler(PqsError)
    async def domain_error(_: Request, exc: PqsError) -> Response:
        return as_response(answer_to(exc))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> Response:
        return as_response(error_answer(400, "invalid_request", describe_validation(list(exc.errors()))))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        code = HTTP_CODES.get(exc.status_code, "error")
        message = str(exc.detail)
        if exc.status_code == 400 and isinstance(exc.__cause__, (ValueError, RecursionError)):
            message = undecodable(exc.__cause__)  # FastAPI's "error parsing the body"
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (exc.headers or {}).items()]
        return as_response(error_answer(exc.status_code, code, message, headers))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> Response:
        log.exception("unhandled error")
        return as_response(INTERNAL_ERROR)
