"""The embedded PostgreSQL used when no `PQS_DATABASE_URL` is given (the `pgserver` wheel).

The server lives in a data directory of the project's own and listens on a unix socket only.

Who owns it: pgserver keeps the pids of the processes using a server in
`pgdata/.handle_pids.json` and stops the server when the last of them exits. A process killed
with SIGKILL runs no exit handler, so its pid would stay there for good and no later owner
would ever be the last: the server would outlive every `pqs serve`. Two things prevent that:

- every owner has a watcher (app/db/embedded_watch.py), a small process that waits on a pipe
  from its owner; when the owner is gone, however it ended, the watcher removes its pid and,
  when no owner is left alive, stops the server (a fast shutdown: sessions are ended, nothing
  committed is lost);
- a start first drops the pids of owners that are no longer running (their watcher was killed
  too, say), and says so: the server that was left running is taken over and stopped when its
  new owners are gone.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
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

log = logging.getLogger(__name__)


def start_embedded(data_dir: Path, *, tuning: dict[str, str] | None = None) -> Any:
    """Start (or attach to) the embedded server in `data_dir/pgdata` and return its handle."""
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = data_dir.resolve() / "pgdata"
    # Processes starting at once (pytest-xdist workers, `--workers N`) take turns: pgserver
    # creates the data directory without a lock of its own, and a second creator fails.
    with (data_dir / ".start.lock").open("w") as lock, warnings.catch_warnings():
        fcntl.flock(lock, fcntl.LOCK_EX)
        # platformdirs warns about a missing XDG_RUNTIME_DIR on headless machines; harmless here.
        warnings.simplefilter("ignore")
        from pgserver import get_server  # type: ignore[attr-defined]

        gone = forget_dead_owners(pgdata)
        if gone:
            log.warning(
                "the embedded PostgreSQL in %s was left running by process %s, which ended without "
                "stopping it: this process takes it over",
                pgdata,
                ", ".join(map(str, gone)),
            )
        server = get_server(pgdata, cleanup_mode="stop")
    if getattr(server, "pqs_watch", None) is None:
        server.pqs_watch = watch_owner(pgdata)  # type: ignore[attr-defined]
    for key, value in {**SERVER_SETTINGS, **(tuning or {})}.items():
        server.psql(f"ALTER SYSTEM SET {key} = '{value}';")
    server.psql("SELECT pg_reload_conf();")
    return server


def forget_dead_owners(pgdata: Path) -> list[int]:
    """Drop the processes that no longer run from pgserver's record of a server's owners (under
    pgserver's own lock); the pids dropped."""
    from app.db.embedded_watch import forget, pgserver_lock

    with pgserver_lock():
        return forget(pgdata)[0]


def watch_owner(pgdata: Path) -> subprocess.Popen[bytes]:
    """Start this process's watcher (app/db/embedded_watch.py): it waits on a pipe of which this
    process holds the only writing end, so it wakes when this process is gone, killed or not."""
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("embedded_watch.py")), str(pgdata), str(os.getpid())],
        stdin=subprocess.PIPE,
        # not the owner's output: a caller reading it to its end would wait for the watcher too
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # its own session: a Ctrl-C meant for the owner (its process group) does not reach it
        start_new_session=True,
    )


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
