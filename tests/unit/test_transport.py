"""GatheringTransport: what is written in one event-loop turn reaches the socket as one write."""

from __future__ import annotations

import asyncio
from typing import Any

from app.api.transport import GatheringTransport


class Recorder:
    """A transport that records what it is asked to do."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def gathering() -> tuple[GatheringTransport, Recorder]:
    inner = Recorder()
    return GatheringTransport(inner, asyncio.get_running_loop()), inner  # type: ignore[arg-type]


async def test_writes_of_one_turn_go_out_as_one() -> None:
    transport, inner = gathering()
    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    transport.write(b"{}")
    assert inner.writes == []  # nothing before the turn ends
    await asyncio.sleep(0)
    assert inner.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    transport.write(b"next")
    await asyncio.sleep(0)
    assert inner.writes[1:] == [b"next"]


async def test_close_writes_what_is_pending_first() -> None:
    transport, inner = gathering()
    transport.write(b"last words")
    transport.close()
    assert inner.writes == [b"last words"]
    assert inner.closed
    await asyncio.sleep(0)  # the scheduled flush finds nothing more to write
    assert inner.writes == [b"last words"]


async def test_abort_drops_what_is_pending() -> None:
    transport, inner = gathering()
    transport.write(b"never sent")
    transport.abort()
    await asyncio.sleep(0)
    assert inner.writes == []
    assert inner.aborted


async def test_nothing_is_written_to_a_closing_transport() -> None:
    transport, inner = gathering()
    transport.write(b"too late")
    inner.closed = True  # the peer went away meanwhile
    await asyncio.sleep(0)
    assert inner.writes == []


async def test_other_calls_reach_the_transport() -> None:
    transport, _ = gathering()
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)
