"""The API tests run twice: through the fast path (the default) and through FastAPI alone
(`fast_path=False`), so the two ways of serving the message routes cannot drift apart."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from fastapi import FastAPI

from app.main import create_app
from tests.conftest import settings_for


@pytest_asyncio.fixture(params=[True, False], ids=["fastpath", "fastapi"])
async def app(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[FastAPI]:
    """The application with its lifespan running, with the fast path on or off."""
    application = create_app(settings_for(db_url, fast_path=request.param))
    async with application.router.lifespan_context(application):
        yield application
