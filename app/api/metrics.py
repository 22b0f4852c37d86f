"""GET /metrics (Prometheus' text format), who may read it, and the requests it counts.

Access: the clients of PQS_METRICS_NETWORKS (loopback by default) read it without a key; anyone
else needs an API key that allows `admin` on every queue (the metrics name every queue): without a
key 403, with a bad one 401, with a lesser one 403. With access control off (loopback only) it is
open. The client is the address uvicorn gives the request: behind a proxy that uvicorn trusts
(`--forwarded-allow-ips`, 127.0.0.1 by default), the one its X-Forwarded-For names; a proxy on the
same host that does not send it makes every client look like loopback.

Requests (pqs_requests_total, pqs_request_duration_seconds), by operation: the operationId of the
operation table's row whose match dispatched the request (app/api/operations.py), never its path.
An SQS request is labelled `sqs:<Action>` (its action; `sqs` when the request names none that PQS
serves, or its signature fails first), not by the REST operation the action maps to: an operator
sees the two front doors apart. A request answered before its dispatch (401 of access control, 413
of the body cap) is labelled by the route that would have dispatched it; a path no route matches,
or a method its route does not take, is `unmatched`. Counted when the answer is written, by both
ways of serving: the hot lane (`lane_answered`) and ASGI (`measured`). A client that leaves before
its answer is not counted, nor the answers of the HTTP protocol itself (app/api/transport.py:
unparsable requests, timeouts, surplus connections).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from time import perf_counter

from fastapi import Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from starlette.routing import compile_path
from starlette.types import Message, Scope, Send

from app.api.auth import ACCESS, EVERY_QUEUE, authenticate, bearer_key, refusal
from app.errors import Forbidden, PqsError
from app.metrics import exposition, observe_request
from app.service.metrics_loop import QueueGauges

# The label of the request's operation, when what serves it knows better than its route (the hot
# lane; the SQS endpoint, once it has decoded the action), and when the lane began to serve it.
OPERATION = "pqs.operation"
STARTED = "pqs.started"
UNMATCHED = "unmatched"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def operation_of(scope: Scope) -> str:
    """The operation label of an ASGI request (see the module docstring)."""
    label: str | None = scope.get(OPERATION)
    if label is not None:
        return label
    route = scope.get("route")  # the route that dispatched it, if one did
    if route is not None:
        name = getattr(route, "name", None)
        if isinstance(name, str) and scope["method"] in (getattr(route, "methods", None) or ()):
            return name
        return UNMATCHED  # a partial match: its path, not its method (405)
    method, path = scope["method"], scope["path"]
    for operation_method, pattern, operation_id in _table():
        if operation_method == method and pattern.match(path):
            return operation_id
    return UNMATCHED


@functools.cache
def _table() -> tuple[tuple[str, re.Pattern[str], str], ...]:
    """The operations as the routes made from them match a request (Starlette's path patterns),
    for a request answered before its dispatch."""
    # Imported here: the table imports this module (the handler of its /metrics row).
    from app.api.operations import OPERATIONS

    return tuple((o.method, compile_path(o.path)[0], o.operation_id) for o in OPERATIONS)


def measured(scope: Scope, send: Send) -> Send:
    """`send`, counting the request (operation, status, latency) when its answer is complete."""
    started = perf_counter()
    status = 0

    async def measuring(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            observe_request(operation_of(scope), status, perf_counter() - started)
        await send(message)

    return measuring


def lane_answered(scope: Scope, status: int) -> None:
    """Count a request the hot lane answered (it set OPERATION and STARTED)."""
    observe_request(scope[OPERATION], status, perf_counter() - scope[STARTED])


def _client_in(scope: Scope, networks: Iterable[Network]) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        address = ipaddress.ip_address(client[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks if network.version == address.version)


async def metrics_refusal(scope: Scope, networks: Iterable[Network]) -> PqsError | None:
    """Why this request may not read the metrics (see the module docstring); None when it may."""
    if _client_in(scope, networks):
        return None
    if ACCESS not in scope:  # access control is on: /metrics is outside /v1, not checked yet
        if bearer_key(scope) is None:
            return Forbidden(
                "GET /metrics answers clients of PQS_METRICS_NETWORKS without a key;"
                " from elsewhere, send an API key that allows admin on every queue"
            )
        error = await authenticate(scope)
        if error is not None:
            return error
    return refusal(scope, "admin", EVERY_QUEUE)


class QueueCollector(Collector):
    """The per-queue gauges, from the latest counts the maintenance leader published."""

    def __init__(self, gauges: QueueGauges) -> None:
        self.gauges = gauges

    def collect(self) -> Iterable[Metric]:
        messages = GaugeMetricFamily(
            "pqs_queue_messages",
            "Messages of a queue, by state (visible, in_flight, delayed).",
            labels=["queue", "state"],
        )
        age = GaugeMetricFamily(
            "pqs_queue_oldest_message_age_seconds", "Age of the oldest message of a queue.", labels=["queue"]
        )
        counts = self.gauges.latest()
        for name, stats in sorted(counts.queues.items()) if counts is not None else ():
            messages.add_metric([name, "visible"], stats.visible)
            messages.add_metric([name, "in_flight"], stats.in_flight)
            messages.add_metric([name, "delayed"], stats.delayed)
            if stats.oldest_age_seconds is not None:
                age.add_metric([name], stats.oldest_age_seconds)
        yield messages
        yield age


async def metrics(request: Request) -> Response:
    """The service's metrics in Prometheus' text format (docs/operations.md lists them). Open to
    the clients of PQS_METRICS_NETWORKS (loopback by default); from elsewhere, an API key that
    allows admin on every queue is needed."""
    state = request.app.state
    error = await metrics_refusal(request.scope, state.settings.metrics_networks)
    if error is not None:
        raise error
    state.metrics.sample_pool()  # this process's pool, now
    body = exposition(QueueCollector(state.metrics.gauges))
    return Response(body, media_type=CONTENT_TYPE_LATEST)
