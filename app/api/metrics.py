"""GET /metrics (Prometheus' text format), who may read it, and the requests it counts.

Access: the clients of PQS_METRICS_NETWORKS (loopback by default) read it without a key; anyone
else needs an API key that allows the action its row of the operation table declares (`read`;
admin implies it) on every queue, a grant on `*`, as listing does: the metrics name every queue,
so a key that may look at some queues only is refused them all. Without a key 403, with a bad
one 401, with a lesser one 403. With access control off (loopback only) it is open. The client
is the address uvicorn gives the request: behind a proxy that uvicorn trusts
(`--forwarded-allow-ips`, 127.0.0.1 by default), the one its X-Forwarded-For names; a proxy on the
same host that does not send it makes every client look like loopback.

Requests (pqs_requests_total, pqs_request_duration_seconds), by operation: the operation the
access log names (app/api/access_log.py's `dispatched`, from the request's Exchange), that is the
operationId of the operation table's row whose match dispatched the request
(app/api/operations.py), never its path. A request answered before its dispatch (401 of access
control, 413 of the body cap) has the row that would have dispatched it; a path no row matches, or
a method its path does not take, is `unmatched`. An SQS request is labelled `sqs:<Action>` (its
action, once decoded; `sqs` when it names none that PQS serves, or its signature fails first), not
by the REST operation the action maps to: an operator sees the two front doors apart. Latency is
from the Exchange's start (the request's head) to the end of its answer. Counted when the answer
is written, by both ways of serving: the hot lane (`lane_answered`) and ASGI (`measured`). A
request that gets no answer (its client left) is not counted, nor the answers of the HTTP protocol
itself (app/api/transport.py: unparsable requests, timeouts, surplus connections).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from time import perf_counter

from fastapi import Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from starlette.types import Message, Scope, Send

from app.access import ANY_KEY, Action
from app.api.access_log import dispatched
from app.api.auth import ACCESS, EVERY_QUEUE, authenticate, bearer_key, needed_action, refusal
from app.api.request_id import EXCHANGE, Exchange
from app.errors import Forbidden, PqsError
from app.metrics import exposition, observe_request
from app.service.metrics_loop import QueueGauges

UNMATCHED = "unmatched"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def operation_of(exchange: Exchange) -> str:
    """The operation label of a request (see the module docstring): what the access log names as
    its operation and SQS action (app/api/access_log.py), read the same way."""
    if exchange.sqs_action is not None:
        return "sqs:" + exchange.sqs_action
    operation, _ = dispatched(exchange)
    return operation or UNMATCHED


def measured(send: Send, exchange: Exchange) -> Send:
    """`send`, counting the request (operation, status, latency) when its answer is complete."""
    status = 0

    async def measuring(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            observe_request(operation_of(exchange), status, perf_counter() - exchange.started)
        await send(message)

    return measuring


def lane_answered(scope: Scope, status: int) -> None:
    """Count a request the hot lane answered."""
    exchange: Exchange = scope[EXCHANGE]
    observe_request(operation_of(exchange), status, perf_counter() - exchange.started)


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


async def metrics_refusal(scope: Scope, networks: Iterable[Network], action: Action) -> PqsError | None:
    """Why this request may not read the metrics, which need `action` on every queue from outside
    `networks` (see the module docstring); None when it may."""
    if _client_in(scope, networks):
        return None
    if ACCESS not in scope:  # access control is on: /metrics is outside /v1, not checked yet
        if bearer_key(scope) is None:
            return Forbidden(
                "GET /metrics answers clients of PQS_METRICS_NETWORKS without a key;"
                f" from elsewhere, send an API key that allows {action} on every queue"
            )
        error = await authenticate(scope)
        if error is not None:
            return error
    return refusal(scope, action, EVERY_QUEUE)


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
    allows read on every queue is needed."""
    state = request.app.state
    # The action its route declares (the operation table's row; not a GuardedRoute: outside /v1).
    action = needed_action(request.scope["route"])
    assert action != ANY_KEY
    error = await metrics_refusal(request.scope, state.settings.metrics_networks, action)
    if error is not None:
        raise error
    state.metrics.sample_pool()  # this process's pool, now
    body = exposition(QueueCollector(state.metrics.gauges))
    return Response(body, media_type=CONTENT_TYPE_LATEST)
