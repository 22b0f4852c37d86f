"""Alembic environment: runs migrations online against the URL given by `pqs migrate`."""

from __future__ import annotations

import os

from sqlalchemy import create_engine, pool

from alembic import context
from app.db.migrate import sqlalchemy_url
from app.db.tables import metadata

config = context.config
url = config.get_main_option("sqlalchemy.url") or os.environ.get("PQS_DATABASE_URL")
if not url:
    raise SystemExit("no database URL: set PQS_DATABASE_URL or run `pqs migrate`")

engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
