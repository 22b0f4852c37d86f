"""Every request's id, and what the log says of the request (`Exchange`).

Both ways of serving begin a request here (`begin`): the front of the ASGI application (PqsApp,
app/main.py) and the hot lane (app/api/lane.py). The id is the client's `X-Request-Id` when it is
a safe one, else one made here; it is echoed in the answer's `X-Request-Id`, logged with the
request (app/api/access_log.py), and, for an SQS request, is also the answer's
`x-amzn-RequestId` and RequestId, so that one id names the request everywhere.

Accepted: 1-128 characters of `[A-Za-z0-9._:-]`, in the header's bytes as they arrived (nothing
is decoded; `%` is not accepted), holding no API key. Anything else (longer, empty, a space, a
quote, a control or non-ASCII byte, a key) is replaced by a made id, not refused: the id is an
aid to the client, and a request should not fail for it. The charset keeps an id harmless wherever it goes: a
header, a JSON log line, SQS's XML, a shell.

Made ids look like the UUIDs SQS clients are used to: the first 24 characters are those of a
random uuid4 drawn once per process (again in a forked child), the last 12 a per-process counter
in hex; 74 random bits tell processes apart. Cost (timeit, Python 3.11, the shared 2-core dev
machine): ~0.25 µs an id, against 2-3 µs for str(uuid.uuid4()), which reads os.urandom each time;
`begin` all told (the header scan, the Exchange, the context variable) ~1.2 µs a request.
"""

from __future__ import annotations

import itertools
import os
import re
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from time import perf_counter

from starlette.types import Message, Scope, Send

from app.access import KEY_FORMAT

HEADER = b"x-request-id"
ACCEPTED = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
# An API key is of that charset too: an id that holds one (a careless client's) is not taken, so
# that it is neither logged nor echoed.
_KEY = re.compile(KEY_FORMAT.pattern.encode())
# Where a request's Exchange is kept in its ASGI scope (the SQS endpoint reads it).
EXCHANGE = "pqs.exchange"


class _Maker:
    """Made ids (see the module docstring): a per-process prefix and a counter."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.prefix = str(uuid.uuid4())[:24]
        self.counter: Iterator[int] = itertools.count()

    def make(self) -> str:
        return f"{self.prefix}{next(self.counter):012x}"


_MAKER = _Maker()
os.register_at_fork(after_in_child=_MAKER.reset)
make = _MAKER.make


def accepted(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The request's own X-Request-Id (its first) when it is one we accept; else None."""
    for name, value in headers:
        if name == HEADER:
            return value.decode("ascii") if ACCEPTED.fullmatch(value) and not _KEY.search(value) else None
    return None


class Exchange:
    """One request as its access log line tells it: its id, when it began, its scope, and the
    operation and queue of the match that dispatched it, when the server that matched it says
    so (`routed`: the hot lane; the front, for a path no route can match); otherwise the log
    reads them from FastAPI's match (app/api/access_log.py). `queue` is also set by the SQS
    endpoint (the queue a request names), with `sqs_action`."""

    __slots__ = ("header", "operation", "queue", "request_id", "routed", "scope", "sqs_action", "started")

    def __init__(self, scope: Scope | None, request_id: str) -> None:
        # The scope, for the log to read FastAPI's match from; None once the request has ended
        # (see `begin`), and for a request its server routed itself (the hot lane).
        self.scope = scope
        self.request_id = request_id
        self.header = (HEADER, request_id.encode("ascii"))
        self.started = perf_counter()
        self.routed = False
        self.operation: str | None = None
        self.queue: str | None = None
        self.sqs_action: str | None = None


# The request being served in this task: the log's filter reads it (app/api/access_log.py).
# uvicorn runs each request in a task of its own (the lane too), so a value never outlives it.
CURRENT: ContextVar[Exchange | None] = ContextVar("pqs_exchange", default=None)


def begin(scope: Scope, *, routed: bool = False) -> Exchange:
    """The request's Exchange, kept in its scope and as this task's CURRENT. The scope and the
    Exchange then hold each other: the caller sets `exchange.scope = None` when the request has
    ended, so that neither waits for the cyclic garbage collector. Measured with `pqs bench send
    --api rest --batch 10`, alternating with the code before request ids: with a cycle per
    request, x1.57-1.74 of the baseline and p99 9.7-11.5 ms against x1.79-1.82 and 7.5-8.4 ms;
    without it, x1.59-1.77 and 8.3-9.1 ms against x1.72-1.84 and 7.5-8.5 ms. A request its
    server routed itself (`routed`: the hot lane) keeps no scope at all."""
    exchange = Exchange(None if routed else scope, accepted(scope["headers"]) or make())
    exchange.routed = routed
    scope[EXCHANGE] = exchange
    CURRENT.set(exchange)
    return exchange


def echoing(send: Send, exchange: Exchange) -> Send:
    """`send` that adds the request's X-Request-Id to the response's headers (after the others)."""
    header = exchange.header

    async def echo(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), header]}
        await send(message)

    return echo
