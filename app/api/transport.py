"""One socket write per response: uvicorn's HTTP protocol over a transport that gathers writes.

uvicorn writes a response's status line and headers, then its body, as two `transport.write`
calls: two `send()` system calls, two TCP segments, and often two wake-ups of the client. On
the 2-core bench machine (a VM, where waking another process costs tens of microseconds) those
writes were about 8% of the service's CPU. `GatheringTransport` keeps what is written during one
turn of the event loop and hands it to the socket as one write at the end of that turn, so a
response (and every response finished in the same turn on that connection) leaves in one call.
Closing writes what is pending first; nothing else changes.

`PqsHttpProtocol` is uvicorn's httptools protocol over that transport; `pqs serve` passes it to
uvicorn as its `http` protocol class (a documented uvicorn setting). It also hands the requests
of the hot routes to the application's hot lane (app/api/lane.py) instead of starting the ASGI
application for them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app.api.lane import HotLane, find_lane


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


class PqsHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing through a GatheringTransport; the hot routes' requests
    go to the application's hot lane."""

    lane: HotLane | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(GatheringTransport(transport, self.loop))  # type: ignore[arg-type]
        self.lane = find_lane(self.app)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        # uvicorn starts a request here, at once or, for a pipelined one, when the previous
        # response is complete; `app` is its 503 answer instead when limit_concurrency is hit.
        lane = self.lane
        if lane is not None and app is self.app and (route := lane.route(cycle)) is not None:
            task = self.loop.create_task(lane.serve(cycle, *route))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)
            return
        super()._start_asgi_task(cycle, app)
