"""Alembic environment: runs migrations online against the URL given by `pqs migrate`."""

from __future__ import annotations

import os
import time

from sqlalchemy import Connection, create_engine, pool, text

from alembic import context
from app.db.migrate import sqlalchemy_url
from app.db.tables import metadata

config = context.config
url = config.get_main_option("sqlalchemy.url") or os.environ.get("PQS_DATABASE_URL")
if not url:
    raise SystemExit("no database URL: set PQS_DATABASE_URL or run `pqs migrate`")

# Processes that start together (`pqs serve` migrates at start) take turns: a session lock held
# until this connection closes, through the migrations' own commits (0007 builds its index
# outside a transaction). Without it two of them ran the same migration at once: both created
# the same tables (one failed), or waited on each other's index build for good. The lock is
# tried, not waited for: a CREATE INDEX CONCURRENTLY waits for every transaction older than it,
# and a session waiting in pg_advisory_lock for the builder's lock would be one (a deadlock).
MIGRATION_LOCK_KEY = 0x5051_5302  # "PQS" + 2 (app.service.maintenance has + 1)
LOCK_TRY_SECONDS = 0.1
LOCK_TRIES = 6000  # 10 minutes: longer than any migration here takes


def take_migration_lock(connection: Connection) -> None:
    for _ in range(LOCK_TRIES):
        taken = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY}).scalar()
        connection.commit()  # the lock is the session's; no transaction stays open while waiting
        if taken:
            return
        time.sleep(LOCK_TRY_SECONDS)
    raise SystemExit("another process has been migrating this database for 10 minutes; try again later")


engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
with engine.connect() as connection:
    take_migration_lock(connection)
    context.configure(connection=connection, target_metadata=metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
