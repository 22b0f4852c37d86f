"""Test harness: a real PostgreSQL (PQS_TEST_DATABASE_URL, else the embedded one in
.pqs/test), a template database migrated once per schema version, and a fresh database
cloned from it for every test that asks for one.

Apps run with access control on; the shared `client` carries an admin key made in the test's
own database (`admin_headers`), so every API test also goes through the auth middleware."""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
import pytest_asyncio
from fastapi import FastAPI

from app.access import EVERYTHING
from app.config import Settings
from app.db.engine import Database
from app.db.sessions import on_connection
from app.main import create_app
from app.service.keys import create_key
from app.service.messages import MessageService
from app.service.queues import QueueService

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_LOCK = 0x5051_5302


# Set on a test of an xdist_group that `--dist loadgroup` did not tag with its group.
UNGROUPED = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup` (`make test`), find the tests of an xdist_group that pytest-xdist
    did not tag with their group: it spreads them over the workers without a word (as under pytest
    9.2, pytest-xdist issue 1386), and every worker would start its own Spark session."""
    if config.getoption("loadgroup", default=False):
        for item in items:
            item.stash[UNGROUPED] = item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail each test `pytest_collection_modifyitems` found ungrouped, saying why."""
    if item.stash.get(UNGROUPED, False):
        pytest.fail(
            "--dist loadgroup did not group this xdist_group test: this pytest and pytest-xdist do not"
            " work together (see the pin of pytest in pyproject.toml)",
            pytrace=False,
        )


def with_database(url: str, name: str) -> str:
    """The same server URL pointing at database `name`."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def schema_fingerprint() -> str:
    """Changes whenever a migration or the schema metadata changes."""
    digest = hashlib.sha256()
    for path in [*sorted((ROOT / "alembic" / "versions").glob("*.py")), ROOT / "app" / "db" / "tables.py"]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@pytest.fixture(scope="session")
def server_url() -> str:
    """Admin URL of the test server."""
    url = os.environ.get("PQS_TEST_DATABASE_URL")
    if url:
        return url
    from app.db.embedded import TEST_SERVER_SETTINGS, embedded_url

    return embedded_url(ROOT / ".pqs" / "test", tuning=TEST_SERVER_SETTINGS)


def create_database(server: str, name: str, template: str | None = None) -> str:
    """CREATE DATABASE (from a template) and return its URL."""
    with psycopg.connect(server, autocommit=True) as conn:
        suffix = f' TEMPLATE "{template}"' if template else ""
        conn.execute(f'CREATE DATABASE "{name}"{suffix}')  # names are generated here, never input
    return with_database(server, name)


def drop_database(server: str, name: str) -> None:
    """DROP DATABASE, disconnecting whoever is still connected."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def template_db(server_url: str) -> str:
    """Name of a database migrated to head, built once per schema version (across workers)."""
    from app.db.migrate import upgrade

    name = f"pqs_tmpl_{schema_fingerprint()}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (TEMPLATE_LOCK,))
        try:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                stale = conn.execute(
                    "SELECT datname FROM pg_database"
                    " WHERE datname LIKE 'pqs\\_tmpl\\_%%' OR datname LIKE 'pqs\\_t\\_%%'"
                ).fetchall()
                for (old,) in stale:
                    conn.execute(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
                building = name + "_build"
                conn.execute(f'DROP DATABASE IF EXISTS "{building}"')
                conn.execute(f'CREATE DATABASE "{building}"')
                upgrade(with_database(server_url, building))
                conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (TEMPLATE_LOCK,))
    return name


@pytest.fixture
def db_url(server_url: str, template_db: str) -> Iterator[str]:
    """A fresh, migrated database of this test's own."""
    name = f"pqs_t_{uuid.uuid4().hex[:16]}"
    url = create_database(server_url, name, template_db)
    yield url
    drop_database(server_url, name)


@pytest.fixture
def empty_db_url(server_url: str) -> Iterator[str]:
    """A fresh database with no schema at all."""
    name = f"pqs_t_{uuid.uuid4().hex[:16]}"
    url = create_database(server_url, name)
    yield url
    drop_database(server_url, name)


@pytest_asyncio.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    """A pool on this test's database."""
    database = Database(db_url, min_size=1, max_size=24)
    await database.open()
    yield database
    await database.close()


@pytest.fixture
def queues(db: Database) -> QueueService:
    """The queue service, without long-poll wake-ups."""
    return QueueService(db)


@pytest.fixture
def messages(db: Database) -> MessageService:
    """The message service, without long-poll wake-ups (wait_seconds is ignored)."""
    return MessageService(db, None)


# 32 bytes of URL-safe base64, as tests/sqs/harness.py's SERVER_KEY.
TEST_SQS_SERVER_KEY = "q" * 43


def settings_for(db_url: str, **overrides: object) -> Settings:
    """Settings for an app on this test's database."""
    values: dict[str, object] = {
        "database_url": db_url,
        "maintenance_enabled": False,
        "pool_max_size": 24,
        # A key made over REST (POST /v1/keys) is sealed under it: never a file in the working
        # directory's `.pqs`, which `make run` uses.
        "sqs_server_key": TEST_SQS_SERVER_KEY,
        **overrides,
    }
    return Settings.model_validate(values)


@pytest_asyncio.fixture
async def app(db_url: str) -> AsyncIterator[FastAPI]:
    """The application with its lifespan running (pool, listener)."""
    application = create_app(settings_for(db_url))
    async with application.router.lifespan_context(application):
        yield application


async def admin_headers(app: FastAPI) -> dict[str, str]:
    """An Authorization header with a new key allowing everything, made in the app's database
    (its lifespan must be running)."""
    db: Database = app.state.db
    _, key = await db.run(lambda conn: create_key(conn, "test admin", EVERYTHING))
    return {"Authorization": f"Bearer {key}"}


def admin_key(db_url: str) -> str:
    """A new key allowing everything, made in the database at `db_url` (from synchronous code)."""
    _, key = asyncio.run(on_connection(db_url, lambda conn: create_key(conn, "test admin", EVERYTHING)))
    return key


@pytest_asyncio.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client talking to the app in-process, with an admin key."""
    transport = httpx.ASGITransport(app=app)
    headers = await admin_headers(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://pqs.test", headers=headers, timeout=60) as http:
        yield http
