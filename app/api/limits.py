"""Request byte cap, enforced before any body is parsed (pure ASGI middleware)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_answer, send_answer


class Disconnected(Exception):
    """The client went away while its request body was being read."""


def declared_too_large(scope: Scope, max_bytes: int) -> bool:
    """True when the Content-Length header announces more than `max_bytes`."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value) > max_bytes
            except ValueError:
                return False
    return False


async def read_body(receive: Receive, max_bytes: int) -> bytes | None:
    """The whole request body, or None as soon as it passes `max_bytes`.

    Raises Disconnected when the client leaves before the body is complete."""
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def reject_too_large(send: Send, max_bytes: int) -> None:
    """The 413 answer, in the house error shape."""
    await send_answer(send, error_answer(413, "request_too_large", f"request body over {max_bytes} bytes"))


async def capped_body(scope: Scope, receive: Receive, send: Send, max_bytes: int) -> bytes | None:
    """The whole request body; or None once a 413 has been answered (declared by Content-Length
    or read past `max_bytes`). Raises Disconnected when the client leaves first."""
    if declared_too_large(scope, max_bytes):
        await reject_too_large(send, max_bytes)
        return None
    body = await read_body(receive, max_bytes)
    if body is None:
        await reject_too_large(send, max_bytes)
    return body


class BodyLimit:
    """Answer 413 for request bodies over `max_bytes`: at once when Content-Length announces more,
    else as soon as what the application reads passes it. Nothing is read ahead: a request that is
    answered without its body (no route, a method not allowed, a refusal) never has it read, so a
    client cannot make the service hold a body no route takes."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if declared_too_large(scope, self.max_bytes):
            await reject_too_large(send, self.max_bytes)
            return
        size = 0

        async def counted() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > self.max_bytes:
                    # Raised into the route that reads the body: its exception handling answers it.
                    raise HTTPException(413, f"request body over {self.max_bytes} bytes")
            return message

        await self.app(scope, counted, send)
