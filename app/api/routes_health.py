"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.schemas import Health
from app.errors import Unavailable

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Process is alive", response_model=Health)
async def healthz() -> Health:
    """Always `ok` while the process serves requests."""
    return Health(status="ok")


@router.get("/readyz", summary="Database is reachable", response_model=Health)
async def readyz(request: Request) -> Health:
    """`ok` when a pooled connection answers; 503 otherwise."""

    async def ping(conn: object) -> None:
        await conn.execute("SELECT 1")  # type: ignore[attr-defined]

    try:
        await request.app.state.db.run(ping)
    except Unavailable:
        raise
    except Exception as exc:
        raise Unavailable("the database is unavailable") from exc
    return Health(status="ok")
