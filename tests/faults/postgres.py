"""A PostgreSQL server of a test's own, from the pgserver wheel's binaries, that the test may kill.

`initdb` into a fresh directory, `pg_ctl start` listening on a unix socket in that directory only
(no TCP), and `stop(mode="immediate")`: the postmaster and every backend quit at once, without a
checkpoint, as if the machine lost power to PostgreSQL alone; the next start replays the WAL.

`fsync` is off (the run is throwaway and no operating-system crash is simulated: every commit's
WAL is still written to the kernel before the commit returns, so an immediate stop loses nothing
committed), `synchronous_commit` stays on: with it off, an immediate stop may lose commits the
service already answered, which is exactly what the fault tests look for.

Run as root (containers), PostgreSQL refuses to start; as pgserver does, the commands then run as
the unprivileged user `pgserver`, and the directory lives under the system temp dir (pytest's
tmp_path is private to root). Unix socket paths are also limited to ~100 bytes, another reason for
a short directory.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from app.db.embedded import bin_dir
from app.db.migrate import upgrade

SYSTEM_USER = "pgserver"
COMMAND_TIMEOUT = 60
SETTINGS = {
    "listen_addresses": "''",
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "100",
    "shared_buffers": "32MB",
}


def _run_as() -> dict[str, Any]:
    """Keyword arguments for subprocess.run: as the `pgserver` user when we are root."""
    if os.geteuid() != 0:
        return {}
    from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    binaries = bin_dir()
    assert binaries is not None
    ensure_prefix_permissions(binaries)
    ensure_folder_permissions(binaries, 0o055)
    ensure_folder_permissions(binaries.parent / "lib", 0o044)
    return {"user": SYSTEM_USER}


class PrivatePostgres:
    """One PostgreSQL server in `root`, listening on a unix socket in its data directory (and,
    with `tcp_port`, on 127.0.0.1 at that port, trusting the `postgres` role there too)."""

    def __init__(self, root: Path, tcp_port: int | None = None) -> None:
        binaries = bin_dir()
        assert binaries is not None, "the pgserver wheel is not installed"
        self.bin = binaries
        self.root = root
        self.data = root / "pgdata"
        self.log = root / "postgres.log"
        self.tcp_port = tcp_port
        self._as = _run_as()

    def url(self, database: str = "postgres") -> str:
        """libpq URL of `database` on this server (over TCP when it listens there)."""
        if self.tcp_port is not None:
            return f"postgresql://postgres@127.0.0.1:{self.tcp_port}/{database}"
        return f"postgresql://postgres:@/{database}?host={self.data}"

    def _pg(self, program: str, *args: str) -> None:
        subprocess.run(
            [str(self.bin / program), *args],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=COMMAND_TIMEOUT,
            **self._as,
        )

    def init(self) -> None:
        """initdb (trust authentication for the `postgres` role, as the embedded server)."""
        if self._as:
            entry = pwd.getpwnam(SYSTEM_USER)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._pg("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=utf8", "--no-sync")

    def start(self) -> None:
        """pg_ctl start, returning once the server accepts connections."""
        settings = dict(SETTINGS)
        if self.tcp_port is not None:
            settings |= {"listen_addresses": "127.0.0.1", "port": str(self.tcp_port)}
        options = " ".join(f"-c {key}={value}" for key, value in settings.items())
        self._pg(
            "pg_ctl", "start", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "30",
            "-o", f"-k {self.data} {options}",
        )  # fmt: skip

    def stop(self, mode: str = "immediate") -> None:
        """pg_ctl stop in `mode` (`immediate`: every process quits at once, no checkpoint)."""
        self._pg("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w", "-t", "30")

    def postmaster_pid(self) -> int | None:
        """The postmaster's pid while it runs (its postmaster.pid file)."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        return None

    def kill(self) -> None:
        """Make sure the server is gone: an immediate stop, else SIGKILL to the postmaster."""
        try:
            self.stop("immediate")
        except (subprocess.SubprocessError, OSError):
            pid = self.postmaster_pid()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def wait_ready(self, timeout: float = 30) -> None:
        """Block until a connection succeeds (after a start)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


@contextlib.contextmanager
def private_postgres(database: str = "pqs", tcp_port: int | None = None) -> Iterator[tuple[PrivatePostgres, str]]:
    """A running private server with a migrated database `database`; its URL (over TCP on 127.0.0.1
    with `tcp_port`). The server is killed and its directory removed on the way out, whatever
    happened."""
    root = Path(tempfile.mkdtemp(prefix="pqs-pg-"))
    server = PrivatePostgres(root, tcp_port)
    try:
        server.init()
        server.start()
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')  # a fixed name, never input
        url = server.url(database)
        upgrade(url)
        yield server, url
    finally:
        server.kill()
        shutil.rmtree(root, ignore_errors=True)
