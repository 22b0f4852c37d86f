"""The API tests run twice: through the hot lane (the default) and through FastAPI alone
(`fast_path=False`), so the two ways of serving the hot operations cannot drift apart.

The lane runs on uvicorn's request cycle (app/api/lane.py), which an in-process ASGI client never
reaches: for the `lane` runs the app is served as `pqs serve` serves it, by uvicorn with
PqsHttpProtocol on a free 127.0.0.1 port in this event loop, and the clients talk to it over a
real socket (`client_for`). The `fastapi` runs call the app in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from app.main import create_app
from tests.api.helpers import client_for, served
from tests.conftest import admin_headers, settings_for


@pytest_asyncio.fixture(params=["lane", "fastapi"])
async def app(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[FastAPI]:
    """The application with its lifespan running, served through the hot lane or FastAPI alone."""
    lane = request.param == "lane"
    application = create_app(settings_for(db_url, fast_path=lane))
    async with application.router.lifespan_context(application):
        if lane:
            async with served(application):
                yield application
        else:
            yield application


@pytest_asyncio.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the app, with an admin key."""
    async with client_for(app, await admin_headers(app)) as http:
        yield http
