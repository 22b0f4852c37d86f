"""The embedded PostgreSQL used when no `PQS_DATABASE_URL` is given (the `pgserver` wheel).

The server lives in a data directory of the project's own and listens on a unix socket only.
`pgserver` stops it when the last process that asked for it exits.
"""

from __future__ import annotations

import fcntl
import logging
import warnings
from pathlib import Path
from typing import Any

from app.config import Settings

# Settings of every embedded server: the autovacuum launcher visits each database every
# naptime, and at queue churn rates (every message inserted, updated and deleted) the default
# 60 s lets tens of thousands of dead tuples pile up between visits.
SERVER_SETTINGS = {"autovacuum_naptime": "10s"}
# Unit-level server tweaks for throwaway test clusters only; a user's data never runs with these.
TEST_SERVER_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def start_embedded(data_dir: Path, *, tuning: dict[str, str] | None = None) -> Any:
    """Start (or attach to) the embedded server in `data_dir/pgdata` and return its handle."""
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    data_dir.mkdir(parents=True, exist_ok=True)
    # Processes starting at once (pytest-xdist workers, `--workers N`) take turns: pgserver
    # creates the data directory without a lock of its own, and a second creator fails.
    with (data_dir / ".start.lock").open("w") as lock, warnings.catch_warnings():
        fcntl.flock(lock, fcntl.LOCK_EX)
        # platformdirs warns about a missing XDG_RUNTIME_DIR on headless machines; harmless here.
        warnings.simplefilter("ignore")
        from pgserver import get_server  # type: ignore[attr-defined]

        server = get_server(data_dir.resolve() / "pgdata", cleanup_mode="stop")
    for key, value in {**SERVER_SETTINGS, **(tuning or {})}.items():
        server.psql(f"ALTER SYSTEM SET {key} = '{value}';")
    server.psql("SELECT pg_reload_conf();")
    return server


def database_url(settings: Settings) -> str:
    """The database the settings name (PQS_DATABASE_URL), else the embedded server's (started on
    demand, in PQS_DATA_DIR): what every command that needs the database connects to."""
    if settings.database_url:
        return settings.database_url
    return embedded_url(settings.data_dir)


def direct_database_url(settings: Settings) -> str:
    """The database reached without a pooler (PQS_DATABASE_DIRECT_URL, else database_url's):
    for migrations, LISTEN, session advisory locks and the CLI, none of which survives
    transaction pooling."""
    return settings.database_direct_url or database_url(settings)


def embedded_url(data_dir: Path, database: str = "postgres", **kwargs: Any) -> str:
    """Start the embedded server and return a libpq URL for `database` on it."""
    server = start_embedded(data_dir, **kwargs)
    return str(server.get_uri(database))


def bin_dir() -> Path | None:
    """The PostgreSQL binaries shipped in the pgserver wheel (pg_ctl, pgbench ...), if installed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # see start_embedded
        try:
            from pgserver._commands import POSTGRES_BIN_PATH
        except ImportError:
            return None
    return Path(POSTGRES_BIN_PATH)
