"""uvicorn's HTTP protocol as `pqs serve` runs it: one socket write per response, the hot lane,
limits on slow and surplus connections, and every answer of its own in the house error shape.

One write: uvicorn writes a response's status line and headers, then its body, as two
`transport.write` calls: two `send()` system calls, two TCP segments, and often two wake-ups of
the client. On the 2-core bench machine (a VM, where waking another process costs tens of
microseconds) those writes were about 8% of the service's CPU. `GatheringTransport` keeps what is
written during one turn of the event loop and hands it to the socket as one write at the end of
that turn, so a response (and every response finished in the same turn on that connection) leaves
in one call. Closing writes what is pending first; nothing else changes.

`PqsHttpProtocol` is uvicorn's httptools protocol over that transport; `pqs serve` passes it to
uvicorn as its `http` protocol class (a documented uvicorn setting), with the limits below from
the settings (`http_protocol`). It hands the requests of the hot routes to the application's hot
lane (app/api/lane.py) instead of starting the ASGI application for them.

Limits (`HttpLimits`; without them, as in tests that build uvicorn themselves, none apply):
- Slow heads. uvicorn times out a connection only while it is idle between two requests (its
  keep-alive timer, armed after a response and cancelled by the next byte): a client that
  connected and sent nothing, or a header line now and then (slowloris), held its connection for
  ever. Here a request's line and headers must be complete within `header_timeout` of the
  connection's opening or, on a kept-alive connection, of the request's first byte.
- Slow bodies. A body must be complete within `body_timeout` of its headers. While the service
  itself is not reading (flow control: the application has not taken what was read, or a
  pipelined request waits for its turn) the clock starts again: that wait is not the client's.
  Either late: 408 and the connection is closed (only closed when the request was answered
  already, before its body was read). Not bounded by a timer: a slow *reader*, a client that does
  not read its response; the connection limit bounds how many there are.
- Surplus connections. A connection that opens while `max_connections` are open is not served: a
  request on it is answered 503 with Retry-After and the connection closed (one that sends nothing
  is closed by the head timeout). The decision is taken once, when the connection opens, so a burst
  of new connections never turns away the requests of connections already being served. The
  limit is per process (each worker of `--workers N` has its own). uvicorn's `limit_concurrency`,
  which answers in plain text and counts every open connection on each request, is not used.

Answers of the protocol itself, in the house shape `{"error": {"code", "message"}}`:
- a request httptools cannot parse (bad request line or header, a lone CR, a bad chunk size):
  400 `invalid_request` instead of uvicorn's plain-text 400;
- the timeouts above: 408 `request_timeout`; the connection limit: 503 `unavailable`;
- an application that fails (or returns) before its response starts: 500 `internal_error`
  instead of uvicorn's plain-text 500 (the hot lane answers its own).
Each goes out with `connection: close`; when part of a response on the connection was already
written, that response is finished instead and the connection closed after it, nothing more read.
`pqs serve` runs uvicorn without WebSocket support (the API has no WebSocket route), so an
`Upgrade` header is ignored (RFC 9110 7.8) and the request answered as any other, never by a
WebSocket handshake's refusal in plain text. uvicorn's h11 protocol never serves our port: this
class is built on httptools, a dependency (`uvicorn[standard]`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, cast

from starlette.types import Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app.api.errors import INTERNAL_ERROR, Header, error_answer, head, send_answer
from app.api.lane import HotLane, find_lane, wire
from app.config import Settings
from app.service.recipient import Recipient

log = logging.getLogger(__name__)

_CLOSE: Header = (b"connection", b"close")


# Requests a connection may have waiting behind the one being served (HTTP pipelining).
MAX_PIPELINED = 32


class PipelineFull(Exception):
    """Raised from a parser callback to end the parse of a connection that pipelines too much."""


class GatheringTransport:
    """A transport whose writes of one event-loop turn go out as one (see the module docstring).
    Everything but writing and closing is the wrapped transport's own."""

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        """Keep `data` for the write at the end of this loop turn."""
        if self._pending is None:
            self._pending = [data]
            self._loop.call_soon(self.flush)
        else:
            self._pending.append(data)

    def flush(self) -> None:
        """Write what is pending, as one write."""
        pending, self._pending = self._pending, None
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        """Write what is pending, then close (as a transport's close flushes its buffer)."""
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        """Drop what is pending and close at once."""
        self._pending = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


@dataclass(frozen=True)
class HttpLimits:
    """The connection limits of PqsHttpProtocol (see the module docstring)."""

    header_timeout: float
    body_timeout: float
    max_connections: int
    max_head_bytes: int = 32 * 1024

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpLimits:
        """The limits the settings ask for."""
        return cls(
            settings.header_timeout_seconds,
            settings.body_timeout_seconds,
            settings.max_connections,
            settings.max_header_bytes,
        )


def http_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """What `pqs serve` passes to uvicorn as its `http` protocol class: PqsHttpProtocol with the
    settings' limits. uvicorn only calls it, with keyword arguments, to make each connection's
    protocol; and it pickles it to its worker processes, which a partial of module-level names does."""
    return cast("type[asyncio.Protocol]", partial(PqsHttpProtocol, limits=HttpLimits.from_settings(settings)))


class PqsHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing through a GatheringTransport; the hot routes' requests
    go to the application's hot lane; limits and answers as the module docstring says."""

    lane: HotLane | None = None
    # The client of the request the lane serves (app/service/recipient.py): it leaves when the
    # connection is lost, as uvicorn marks its request cycle disconnected.
    recipient: Recipient | None = None

    def __init__(self, *args: Any, limits: HttpLimits | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.admitted = True  # False: opened beyond max_connections (decided when it opens)
        self._running: RequestResponseCycle | None = None  # the request served now (pipelined ones wait)
        self._reading: Literal["head", "body"] | None = None  # what the client owes, if anything
        self._deadline = 0.0  # loop time by which it must have arrived
        self._watch: asyncio.TimerHandle | None = None  # fires at or before the deadline
        self._head_bytes = 0  # bytes received while the current head was owed
        self._parse_refusal: tuple[int, str, str] | None = None  # why a callback ended the parse

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(GatheringTransport(transport, self.loop))  # type: ignore[arg-type]
        self.lane = find_lane(self.app)
        if self.limits is not None:
            self.admitted = len(self.connections) <= self.limits.max_connections
            self._expect("head")  # a connection that sends nothing is a head that never comes

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._reading = None
        super().connection_lost(exc)
        if self.recipient is not None:
            self.recipient.leave()

    def data_received(self, data: bytes) -> None:
        limits = self.limits
        if limits is not None:
            if self._reading is None:
                # Any byte between two requests starts the next one's head (stray bytes too, which
                # cancel uvicorn's keep-alive timer without beginning a request).
                self._expect("head")
            if self._reading == "head":
                self._head_bytes += len(data)
        super().data_received(data)
        if (
            limits is not None
            and self._reading == "head"
            and self._head_bytes > limits.max_head_bytes
            and not self.transport.is_closing()
        ):
            # httptools keeps an unfinished head whole, however large: refused once it passes the
            # limit (counted in what arrived while a head was owed: at most one read more).
            limit = limits.max_head_bytes
            self._refuse(431, "request_header_too_large", f"request line and headers over {limit} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._reading is None and self.limits is not None:
            self._expect("head")  # a pipelined request, begun in the data that ended the one before

    def on_headers_complete(self) -> None:
        if self.limits is not None:
            self._head_bytes = 0
            self._expect("body")
        super().on_headers_complete()
        if len(self.pipeline) > MAX_PIPELINED:
            # uvicorn stops reading while a request waits, but parses all it read already and reads
            # on after each response: a client that pipelines without reading its answers queued
            # thousands. Raised here, this ends the parse, and send_400_response answers.
            self._parse_refusal = (400, "invalid_request", f"more than {MAX_PIPELINED} requests pipelined")
            raise PipelineFull

    def on_message_complete(self) -> None:
        self._reading = None
        super().on_message_complete()

    def _expect(self, what: Literal["head", "body"]) -> None:
        """The client owes `what` now, within its timeout; the watch fires by then."""
        assert self.limits is not None
        seconds = self.limits.header_timeout if what == "head" else self.limits.body_timeout
        self._reading = what
        self._deadline = deadline = self.loop.time() + seconds
        watch = self._watch
        if watch is None or watch.when() > deadline:
            if watch is not None:
                watch.cancel()
            self._watch = self.loop.call_at(deadline, self._check_deadline)

    def _check_deadline(self) -> None:
        # One timer per connection, moved on rather than made again for every request.
        self._watch = None
        what = self._reading
        if what is None or self.transport.is_closing():
            return
        if self.loop.time() < self._deadline:
            self._watch = self.loop.call_at(self._deadline, self._check_deadline)
            return
        if what == "body" and self.flow.read_paused:
            self._expect("body")  # the service is not reading: the wait is not the client's
            return
        self._reading = None
        if what == "body" and self.cycle.response_complete:
            self.transport.close()  # answered already (before its body was read): nothing owed
            return
        assert self.limits is not None
        seconds = self.limits.header_timeout if what == "head" else self.limits.body_timeout
        self._refuse(408, "request_timeout", f"request {what} not received within {seconds:g} s")

    def send_400_response(self, msg: str) -> None:
        # uvicorn's answer (plain text) to what httptools cannot parse; `msg` is its fixed text.
        self._reading = None
        refusal, self._parse_refusal = self._parse_refusal, None
        self._refuse(*(refusal or (400, "invalid_request", "malformed HTTP request")))

    def _unsupported_upgrade_warning(self) -> None:
        # The Upgrade header is ignored (module docstring); uvicorn would warn on every such
        # request, advising to install a WebSocket library.
        log.debug("Upgrade header ignored")

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer `status` in the house shape in place of what this connection still owes, and
        close it; a response already partway written is finished first instead."""
        running = self._running
        if running is not None and not running.response_complete:
            if running.response_started:
                running.keep_alive = False  # closes the connection once complete
                self.flow.pause_reading()
                return
            # The request in progress gets this answer; its task sees a client that left.
            running.disconnected = True
            running.message_event.set()
        answer = error_answer(status, code, message)
        self.transport.write(
            wire(answer.status, head(answer), answer.body, self.server_state.default_headers, close=True)
        )
        self.transport.close()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        # uvicorn starts a request here, at once or, for a pipelined one, when the previous
        # response is complete.
        self._running = cycle
        if not self.admitted:
            self._refuse(503, "unavailable", "too many connections; retry later")
            return
        lane = self.lane
        if lane is not None and app is self.app and (route := lane.route(cycle)) is not None:
            self.recipient = Recipient()
            task = self.loop.create_task(lane.serve(cycle, *route, self.recipient))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)
            return
        # uvicorn answers an application that fails before its response with this method.
        send = cast("Send", cycle.send)
        cycle.send_500_response = partial(send_answer, send, INTERNAL_ERROR, _CLOSE)  # type: ignore[method-assign]
        super()._start_asgi_task(cycle, app)
