"""The hot lane: the hot operations served from uvicorn's HTTP protocol, without ASGI.

Why: measured on the bench machine, the request and response of a hot route cost the service
~75 µs of CPU above the handler under uvicorn's ASGI interface (the request cycle's task and
message dicts, uvicorn's `send`, which checks every header with regular expressions, the proxy
headers middleware, our access-control layer, FastAPI's routing and validation); a message's round
trip is three such requests. Next to an ASGI fast path that skipped FastAPI alone, the lane still
took 7-12% less of the service's CPU per message: docs/decisions/hot-lane.md.

What: `PqsHttpProtocol` (app/api/transport.py) hands a request that names a hot operation (see
`hot_match`: the table's hot operations, POST /v1/queues/{name}/messages[/batch|/receive|/ack|
/nack|/visibility], JSON) to the app's HotLane instead of starting the ASGI application for it.
uvicorn still parses the request and keeps the connection's books (keep-alive, pipelined requests
answered in order, flow control, 100-continue, a client that leaves, graceful shutdown): the lane
works on uvicorn's own request cycle. It authenticates the key as the Auth middleware does and
authorizes the action of the operation it matched (app/api/auth.py), reads the body through the
cycle under the byte cap, answers with `hot_answer` (the handler FastAPI's route calls, the
answer FastAPI gives), and writes the response itself in one write (status line, uvicorn's default
headers, ours, body), then marks the cycle complete as uvicorn's `send` would.

The SQS actions that are hot operations (`sqs_hot_match`: `POST /` in the JSON protocol with the
X-Amz-Target of SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch) or
ChangeMessageVisibility(Batch)) take the lane too, matched after the REST operations so that
these pay nothing for it: their body is read under the same cap, and `answer_sqs`, the function
the FastAPI route of `POST /` calls, checks the signature and the action's scope and answers.

The lane reads and sets attributes of uvicorn's request cycle (CYCLE_ATTRIBUTES), a private part of
uvicorn: pyproject.toml pins uvicorn to the minor versions tested. Should an installed uvicorn's
cycle lack one, the lane stands aside, with a warning when the app is made, and every request
goes through ASGI (FastAPI) as it does without the lane; tests/api/test_lane.py fails if that
happens with the uvicorn this project pins. A request behind a trusted proxy is logged (access
log) with the peer's address, not the forwarded one. A request begins as PqsApp's front begins
one (app/api/request_id.py): its X-Request-Id is taken or made and echoed, and its access line
names the operation and queue of the lane's match.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable
from contextlib import nullcontext
from typing import Any

from starlette.types import Scope
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, RequestResponseCycle
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

from app.access import ANY_KEY
from app.api.auth import ACCESS, OPEN, authenticate, refusal
from app.api.errors import INTERNAL_ERROR, Header, answer_to, head
from app.api.hot import SQS_OPERATION, hot_answer, hot_match, sqs_hot_match
from app.api.limits import Disconnected, capped_body
from app.api.metrics import lane_answered
from app.api.operations import SQS_SCOPES, Operation
from app.api.request_id import EXCHANGE, begin, echoing
from app.api.routes_sqs import answer_sqs, sqs_head
from app.service.recipient import Recipient

log = logging.getLogger(__name__)

# What the lane uses of uvicorn's request cycle (uvicorn.protocols.http.httptools_impl).
CYCLE_ATTRIBUTES = (
    "scope",
    "transport",
    "flow",
    "keep_alive",
    "default_headers",
    "access_log",
    "access_logger",
    "on_response",
    "response_started",
    "response_complete",
    "message_event",
    "disconnected",
    "waiting_for_100_continue",
    "receive",
    "send",
)


def missing_from_cycle() -> list[str]:
    """What the lane uses that uvicorn's request cycle lacks (all of it when no cycle can be made
    to look at). A cycle only stores what it is given, so one made of Nones shows its attributes."""
    try:
        nones: dict[str, Any] = dict.fromkeys(inspect.signature(RequestResponseCycle).parameters)
        cycle = RequestResponseCycle(**nones)
    except Exception:
        return list(CYCLE_ATTRIBUTES)
    return [name for name in CYCLE_ATTRIBUTES if not hasattr(cycle, name)]


def wire(
    status: int, headers: Iterable[Header], body: bytes, default_headers: Iterable[Header], *, close: bool
) -> bytes:
    """A response as HTTP/1.1 bytes, as uvicorn writes an ASGI response: status line, uvicorn's
    default headers (server, date), the answer's (`head`, `sqs_head`), `connection: close` when
    `close`, body."""
    content = [STATUS_LINE[status]]
    for name, value in default_headers:
        content += (name, b": ", value, b"\r\n")
    for name, value in headers:
        content += (name, b": ", value, b"\r\n")
    if close:
        content.append(b"connection: close\r\n")
    content += (b"\r\n", body)
    return b"".join(content)


class HotLane:
    """Serves the hot operations of one application on uvicorn's request cycles."""

    def __init__(self, app: Any, *, max_bytes: int, auth: bool) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.auth = auth
        missing = missing_from_cycle()
        # Whether uvicorn's cycle has what the lane uses; said when the app is made, not later.
        self.usable = not missing
        if missing:
            log.warning(
                "uvicorn's request cycle lacks %s: the hot lane stands aside and FastAPI serves every"
                " request (more CPU per message); install the uvicorn version pyproject.toml pins",
                ", ".join(missing),
            )

    def route(self, cycle: Any) -> tuple[Operation, str] | None:
        """(hot operation, queue name) when the lane serves this request cycle (the SQS endpoint's
        row and no name for a hot SQS action); else None."""
        if not self.usable:
            return None
        # The REST operations first: an SQS match costs them nothing.
        found = hot_match(cycle.scope)
        if found is None and sqs_hot_match(cycle.scope):
            return SQS_OPERATION, ""
        return found

    async def serve(self, cycle: Any, operation: Operation, name: str, recipient: Recipient) -> None:
        """Answer one request (see the module docstring); `recipient` is its client, told by the
        protocol when the connection is lost."""
        scope: Scope = cycle.scope
        scope["app"] = self.app  # as PqsApp sets it for ASGI: authenticate() reads app.state
        # As PqsApp's front begins a request: its id, and its match for the log.
        exchange = begin(scope, routed=True)
        exchange.operation = operation.operation_id
        if operation is SQS_OPERATION:
            await self._serve_sqs(cycle, recipient)
            return
        exchange.queue = name
        try:
            # Both steps of access control (app/api/auth.py), the second on the lane's own match.
            if self.auth:
                error = await authenticate(scope)
            else:
                scope[ACCESS] = OPEN
                error = None
            # Every hot operation has an action on its queue (`hot`).
            assert operation.action is not None and operation.action != ANY_KEY
            error = error or refusal(scope, operation.action, name)
            if error is not None:
                answer = answer_to(error)
                await self._write(cycle, answer.status, head(answer), answer.body)
                return
            try:
                body = await capped_body(scope, cycle.receive, echoing(cycle.send, exchange), self.max_bytes)
            except Disconnected:
                return
            if body is None:  # 413, answered by capped_body
                lane_answered(scope, 413)
                return
            answer = await hot_answer(self.app.state.messages, operation, name, body, recipient)
            await self._write(cycle, answer.status, head(answer), answer.body)
            if recipient.left:  # the answer did not go out: what a receive leased goes back at once
                await self.app.state.messages.give_back(recipient)
        except Exception:
            await self._failed(cycle)

    async def _serve_sqs(self, cycle: Any, recipient: Recipient) -> None:
        """Answer a hot SQS action as the FastAPI route of `POST /` does (`answer_sqs`): access
        control is the signature and the action's scope, both checked there."""
        scope: Scope = cycle.scope
        try:
            if not self.auth:
                scope[ACCESS] = OPEN  # as the Auth middleware sets it
            try:
                body = await capped_body(scope, cycle.receive, echoing(cycle.send, scope[EXCHANGE]), self.max_bytes)
            except Disconnected:
                return
            if body is None:  # 413, answered by capped_body
                lane_answered(scope, 413)
                return
            state = self.app.state
            answer = await answer_sqs(state, scope, body, SQS_SCOPES, lambda: nullcontext(recipient))
            await self._write(cycle, answer.status, sqs_head(answer), answer.body)
            if recipient.left:  # the answer did not go out: what a receive leased goes back at once
                await state.messages.give_back(recipient)
        except Exception:
            await self._failed(cycle)

    async def _failed(self, cycle: Any) -> None:
        log.exception("unhandled error in the hot lane")
        if not cycle.response_started:
            await self._write(cycle, INTERNAL_ERROR.status, head(INTERNAL_ERROR), INTERNAL_ERROR.body)
        else:
            cycle.transport.close()

    async def _write(self, cycle: Any, status: int, headers: Iterable[Header], body: bytes) -> None:
        """The whole response in one write, with uvicorn's bookkeeping of a finished response."""
        if cycle.flow.write_paused and not cycle.disconnected:
            await cycle.flow.drain()
        if cycle.disconnected:
            return
        cycle.response_started = True
        cycle.waiting_for_100_continue = False
        scope = cycle.scope
        if cycle.access_log:
            cycle.access_logger.info(
                '%s - "%s %s HTTP/%s" %d',
                get_client_addr(scope),
                scope["method"],
                get_path_with_query_string(scope),
                scope["http_version"],
                status,
            )
        # The request's X-Request-Id last, as PqsApp's front adds it (app/api/request_id.py).
        headers = (*headers, scope[EXCHANGE].header)
        cycle.transport.write(wire(status, headers, body, cycle.default_headers, close=not cycle.keep_alive))
        lane_answered(scope, status)
        cycle.response_complete = True
        cycle.message_event.set()
        if not cycle.keep_alive:
            cycle.transport.close()
        cycle.on_response()


def find_lane(app: Any) -> HotLane | None:
    """The HotLane of the application uvicorn serves, looked for through the middlewares it wraps
    the application in (each keeps the next in `.app`)."""
    for _ in range(16):
        if app is None:
            return None
        lane = getattr(app, "lane", None)
        if isinstance(lane, HotLane):
            return lane
        app = getattr(app, "app", None)
    return None
