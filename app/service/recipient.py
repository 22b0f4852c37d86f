"""The recipient of a receive: the client a request is answering, as the service sees it.

A long poll can outlive its client (a consumer that times out, restarts or is killed while its
receive waits). Whatever a receive leases then is in flight to nobody until its visibility
timeout. So the way that serves the request tells the receive's Recipient when the client's
connection is gone (`leave`): the hot lane from uvicorn's `connection_lost`
(app/api/transport.py), the ASGI ways from `receive()` giving `http.disconnect`
(app/api/departure.py). The receive then leases nothing more for it, its wait ends at once, and
what a poll had leased meanwhile goes back (MessageService.give_back). What a receive hands to a
recipient is kept on it (`hand`), so that the hot lane can give it back too when the client
leaves while the answer waits to be written.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence

from app.domain import ReceivedMessage


class Recipient:
    """The client of one receive request: whether it has left, and what it was handed."""

    __slots__ = ("_handed", "_wake", "left")

    def __init__(self) -> None:
        self.left = False
        self._wake: asyncio.Event | None = None
        self._handed: tuple[str, list[ReceivedMessage]] | None = None

    def leave(self) -> None:
        """The client's connection is gone: nothing more is to be leased for it, and a receive
        waiting for it wakes."""
        self.left = True
        if self._wake is not None:
            self._wake.set()

    @contextlib.contextmanager
    def waking(self, event: asyncio.Event) -> Iterator[None]:
        """Within this block, `leave()` also sets `event` (the event a long poll waits on)."""
        self._wake = event
        try:
            yield
        finally:
            self._wake = None

    def hand(self, queue_name: str, messages: Sequence[ReceivedMessage]) -> None:
        """A receive leased `messages` of this queue for this recipient."""
        self._handed = (queue_name, list(messages)) if messages else None

    def take_back(self) -> tuple[str, list[ReceivedMessage]] | None:
        """What was handed (queue name, messages), if anything; handed back only once."""
        handed, self._handed = self._handed, None
        return handed
