"""An ASGI request's Recipient (app/service/recipient.py): told when the client leaves.

Once the request body has been read, an ASGI server's `receive()` gives `http.disconnect` when the
client's connection is lost (Starlette's `Request.is_disconnected` asks it the same way). A task
waits for it while the receive runs and makes the recipient leave: the receive then leases
nothing more, stops waiting, and gives back what its last poll leased (MessageService.receive).

The watch ends before the answer is written, because `http.disconnect` also comes once a response
is complete and must not read as a client that left. So under ASGI a client that leaves while its
answer is being written (waiting for room in a full send buffer) is not seen: uvicorn drops the
answer silently and its messages wait for their visibility timeout. The hot lane sees that case
too (uvicorn's protocol tells it, app/api/transport.py; app/api/lane.py gives the messages back).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.types import Receive

from app.service.recipient import Recipient

# After the body, a server has nothing else to give; a server that did (never seen) would end
# the watch rather than keep it spinning.
MESSAGES_WATCHED = 100


@contextlib.asynccontextmanager
async def watched(receive: Receive) -> AsyncIterator[Recipient]:
    """A Recipient that leaves when `receive` gives `http.disconnect`, for the block's duration.
    Call it only once the request body has been read."""
    recipient = Recipient()
    watcher = asyncio.create_task(_watch(receive, recipient))
    try:
        yield recipient
    finally:
        # Not awaited: the block's end must not wait for the watcher (nor, should this task be
        # cancelled meanwhile, take that cancellation for the watcher's).
        watcher.cancel()


async def _watch(receive: Receive, recipient: Recipient) -> None:
    for _ in range(MESSAGES_WATCHED):
        message = await receive()
        if message["type"] == "http.disconnect":
            recipient.leave()
            return
