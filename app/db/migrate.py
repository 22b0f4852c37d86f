"""Apply Alembic migrations programmatically (used by `pqs migrate`, `pqs serve` and the tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, pool

from alembic import command

ROOT = Path(__file__).resolve().parents[2]


def sqlalchemy_url(url: str) -> str:
    """Turn a libpq URL into one SQLAlchemy drives with psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def alembic_config(url: str) -> Config:
    """An Alembic config for this project's migrations pointed at `url`."""
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "alembic"))
    # ConfigParser treats % as interpolation; escape it for URLs with percent-encoding.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def earlier_text(migration: str, name: str) -> str:
    """A text an earlier migration defines (a function's SQL, say), read from its file: a
    migration's downgrade restores what an earlier one wrote without writing it out again."""
    path = ROOT / "alembic" / "versions" / migration
    spec = importlib.util.spec_from_file_location(f"pqs_migration_{migration[:4]}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(getattr(module, name))


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at `url` to `revision`."""
    command.upgrade(alembic_config(url), revision)


def is_current(url: str) -> bool:
    """Whether the database at `url` is at the latest revision (as `upgrade` leaves it)."""
    heads = set(ScriptDirectory.from_config(alembic_config(url)).get_heads())
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            return set(MigrationContext.configure(conn).get_current_heads()) == heads
    finally:
        engine.dispose()
