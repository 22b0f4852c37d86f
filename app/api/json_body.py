"""Request bodies as JSON, read one way by every route: `parse_body`, which the hot lane calls
(app/api/hot.py) and FastAPI's routes call through `JsonBodyRoute` (every route of the operation
table is one, GuardedRoute included).

`parse_body` reads what json.loads, FastAPI's own parse, read before, to the same value (a lone
surrogate and NaN included: the service refuses those later, per field or entry, with its own
message), but for one thing: an object that gives a key twice, at any depth, is refused
(RepeatedKey, answered 400). json.loads keeps the last one, so `{"dry_run": true, "dry_run":
false}` redrove; a proxy or log that reads the first must not see another request than PQS acts
on. The SQS endpoint refuses them too (app/sqs/protocol.py).

How: jiter, which refuses a repeated key as it parses and is faster than json.loads on every hot
request's body (a send, a batch of ten, a receive, an ack), reads the body first. What it refuses
(a repeated key, and also what json.loads takes and jiter does not: a lone surrogate escape, a
UTF-8 byte order mark, nesting deeper than 200) is read again by json.loads, whose
`object_pairs_hook` refuses a repeated key: the answer, value or error, is json.loads's, but
that an integer longer than Python converts (over 4,300 digits) is refused as NumberTooLong,
which says so, where json.loads's own ValueError would read as a body that is not JSON. What
jiter takes, json.loads takes to the same value (tests/api/test_repeated_keys.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import jiter
from fastapi import Request, Response
from fastapi.routing import APIRoute


class RepeatedKey(ValueError):
    """A JSON object of the body gives `key` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} is given twice in one object")
        self.key = key


class NumberTooLong(ValueError):
    """A number of the body has more digits than Python turns into an int
    (sys.get_int_max_str_digits(), 4,300 by default)."""

    def __init__(self, digits: int) -> None:
        super().__init__(f"a number has {digits:,} digits")
        self.digits = digits


def _int(text: str) -> int:
    # json.loads's own int() would refuse it with a ValueError that is not a JSONDecodeError,
    # and the client would be told its body is not JSON at all.
    digits = len(text.lstrip("-"))
    if digits > sys.get_int_max_str_digits() > 0:
        raise NumberTooLong(digits)
    return int(text)


def _distinct(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return document


def parse_body(body: bytes) -> Any:
    """The request body's JSON value; ValueError (RepeatedKey for a key given twice in an object,
    NumberTooLong for an integer longer than Python converts) or RecursionError when it is none."""
    try:
        return jiter.from_json(body, catch_duplicate_keys=True)
    except ValueError:
        return json.loads(body, object_pairs_hook=_distinct, parse_int=_int)


class JsonBodyRequest(Request):
    """A request whose `json()` is `parse_body` (FastAPI reads a JSON body with it)."""

    async def json(self) -> Any:
        """The body's JSON value, refusing a key given twice."""
        return parse_body(await self.body())


class JsonBodyRoute(APIRoute):
    """A FastAPI route that reads its JSON body with `parse_body`: a ValueError of it becomes
    FastAPI's 400 "error parsing the body", whose message app/api/errors.py (`undecodable`) says."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def parsing(request: Request) -> Response:
            return await handler(JsonBodyRequest(request.scope, request.receive))

        return parsing
