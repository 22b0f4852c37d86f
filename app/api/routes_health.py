"""Liveness and readiness handlers (their routes: app/api/operations.py)."""

from __future__ import annotations

from fastapi import Request

from app.api.schemas import Health

# A readiness probe must have its answer within a second or two (Kubernetes' default probe
# timeout is 1 s), whatever the database does; the pool timeout is much longer.
READY_SECONDS = 1.0


async def healthz() -> Health:
    """Always `ok` while the process serves requests."""
    return Health(status="ok")


async def readyz(request: Request) -> Health:
    """`ok` when a pooled connection answers `SELECT 1` within a second; 503 otherwise."""
    await request.app.state.db.ping(READY_SECONDS)
    return Health(status="ok")
