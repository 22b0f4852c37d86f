"""The FastAPI application: `create_app(settings)`. The lifespan opens the pool, the LISTEN
connection and the maintenance loop, and closes them on shutdown."""

from __future__ import annotations

import functools
import gc
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api import access_log, document, errors, request_id
from app.api.auth import Auth, check_guarded
from app.api.errors import error_answer, send_answer
from app.api.lane import HotLane
from app.api.limits import BodyLimit
from app.api.metrics import measured
from app.api.operations import ROUTERS
from app.config import Settings
from app.db.engine import Database
from app.metrics import forget_process, multiprocess_directory
from app.sealing import ServerKey
from app.service.activity import ActivityService
from app.service.keys import KeyAdmin, KeyVerifier, server_key_for
from app.service.maintenance import Maintenance
from app.service.messages import MessageService
from app.service.metrics_loop import STALE_INTERVALS, MetricsLoop, QueueGauges
from app.service.move_tasks import MoveTasks
from app.service.queues import QueueService
from app.service.throughput import Throughput
from app.service.wakeup import Wakeup
from app.shutdown import drain_on_signal

# Any ASCII control character: no route has one, and `$` in a route's pattern would accept a
# trailing newline; such a path is answered 404 before anything else reads it.
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")
NO_SUCH_PATH = error_answer(404, "not_found", "no route has a control character in its path")

DESCRIPTION = """SQS-FIFO-style job queues over HTTP on PostgreSQL.

Every request under `/v1` needs an API key: `Authorization: Bearer pqs_<key id>_<secret>`.
A key's scopes grant actions (`send`, `receive`, `ack`, `admin`) on queues whose names match a
glob; without a valid key the answer is 401, without the scope 403.

Every error response has the body `{"error": {"code": "...", "message": "..."}}`."""


class PqsApp(FastAPI):
    """FastAPI with a front: HTTP requests begin here (their id: app/api/request_id.py), then go
    through `front` (a path with a control character is refused, then access control) before
    FastAPI's own middleware stack, which `front` ends in (`stack`)."""

    front: ASGIApp | None = None
    # Serves the hot operations from uvicorn's protocol (app/api/lane.py); None: PQS_FAST_PATH is
    # off, and FastAPI serves them too.
    lane: HotLane | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.front is not None and scope["type"] == "http":
            scope["app"] = self  # as Starlette sets it: auth reads app.state
            # Its id, echoed on every answer from here on, and what the log says of it.
            exchange = request_id.begin(scope)
            send = request_id.echoing(send, exchange)
            send = measured(send, exchange)  # request metrics (app/api/metrics.py)
            try:
                if CONTROL_CHARACTER.search(scope["path"]) is not None:
                    exchange.routed = True  # no route: none may be read into such a path
                    await send_answer(send, NO_SUCH_PATH)
                    return
                await self.front(scope, receive, send)
            finally:
                exchange.scope = None  # the request has ended (request_id.begin)
        else:
            await super().__call__(scope, receive, send)

    async def stack(self, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI's own handling (its middleware stack, routes, exception handlers)."""
        await super().__call__(scope, receive, send)


# The cyclic garbage collector's young generation is collected after this many new container
# objects (CPython's default: 700). A 1,000-message send makes about 5,000 of them that all die
# with the request, so with the default every large send ran several collections, each also
# walking what other requests in flight hold (measured: ~20% of the CPU of a 1,000-message send).
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """For a serving process (`pqs serve`, each worker): fewer, larger young-generation
    collections; and the objects made while starting (modules, routes, models) moved out of the
    collector's sight (gc.freeze), so that the rare full collections do not walk them again."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)
    gc.freeze()


def create_app(settings: Settings) -> FastAPI:
    """The PQS application for these settings (`settings.database_url` must be set)."""
    if not settings.database_url:
        raise ValueError("create_app needs settings.database_url (the CLI starts the embedded server)")
    settings.check_auth()
    url = settings.database_url

    @functools.cache
    def server_key() -> ServerKey:
        # Read when the first SQS request needs it; `pqs serve` makes the file before it starts.
        return server_key_for(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = Database(
            url,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            timeout=settings.pool_timeout_seconds,
            lock_timeout=settings.lock_timeout_seconds,
            queue_cache_seconds=settings.queue_cache_seconds,
            direct_url=settings.database_direct_url,
            transaction_pooling=settings.database_pooler == "pgbouncer",
        )
        await db.open()
        # LISTEN holds a session: straight to the server, never through PgBouncer.
        wakeup = Wakeup(db.direct_url)
        await wakeup.start()
        maintenance = Maintenance(db, settings.maintenance_interval_seconds)
        if settings.maintenance_enabled:
            maintenance.start()
        app.state.db = db
        app.state.settings = settings
        app.state.keys = KeyVerifier(db, settings.auth_cache_seconds, server_key=server_key)
        app.state.key_admin = KeyAdmin(db, app.state.keys, server_key)
        app.state.wakeup = wakeup
        app.state.maintenance = maintenance
        app.state.queues = QueueService(db, wakeup)
        # Each process's counts per queue and minute, flushed to queue_minutes every 10 s.
        throughput = Throughput(db)
        throughput.start()
        app.state.activity = ActivityService(db, throughput)
        app.state.messages = MessageService(db, wakeup, settings.dedup_window_seconds, throughput)
        app.state.moves = MoveTasks(db)
        gauges = QueueGauges(multiprocess_directory(), STALE_INTERVALS * settings.metrics_interval_seconds)
        app.state.metrics = MetricsLoop(db, maintenance, gauges, settings.metrics_interval_seconds)
        app.state.metrics.start()
        try:
            # Under uvicorn, SIGTERM/SIGINT also answer parked long polls at once (app/shutdown.py).
            with drain_on_signal(wakeup.drain):
                yield
        finally:
            await app.state.metrics.stop()
            forget_process(os.getpid())  # its gauges no longer count (multiprocess mode)
            await throughput.stop()  # its last counts, while the pool is open
            await maintenance.stop()
            await wakeup.stop()
            await db.close()

    app = PqsApp(
        title="PQS — Postgres Queue Service",
        version="1.0.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # A path with a slash too many or too few is no route (404), not a redirect: one match
        # decides what a request is.
        redirect_slashes=False,
    )
    errors.install(app)
    access_log.install()
    for router in ROUTERS:
        check_guarded(router)
        app.include_router(router)
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)
    # In front of FastAPI's whole middleware stack (PqsApp): no request reaches FastAPI under /v1
    # without a valid key.
    app.front = Auth(app.stack, enabled=settings.auth_enabled)
    if settings.fast_path:
        app.lane = HotLane(app, max_bytes=settings.max_request_bytes, auth=settings.auth_enabled)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document.build(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn workers (`--workers N`): settings come from the environment."""
    app = create_app(Settings())
    tune_gc()
    return app
