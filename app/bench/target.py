"""What the bench drives: a fresh database on the embedded (or given) PostgreSQL and a `pqs serve`
subprocess on a free 127.0.0.1 port, or a running service given with `--url`.

Access control stays on. The bench makes an API key of its own (every action on every queue)
directly in the database before it starts the service, so the service finds a key and writes no
admin key file; against a running service (`--url`) the key is revoked when the run ends."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg

from app.bench.config import BenchConfig
from app.bench.procs import ProcessTree, listening_pid, postmaster_pid
from app.sealing import ServerKey

# A bench measures what users get: durable commits, whatever an earlier run of this data
# directory set (the test clusters turn these off).
PRODUCTION_SETTINGS = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
READY_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 15.0


class BenchError(Exception):
    """A run cannot go on (no database, the service did not start, ...)."""


@dataclass(frozen=True)
class Target:
    """The service under test and the database it uses."""

    base_url: str
    database_url: str
    service: ProcessTree | None
    postgres: ProcessTree | None
    started_service: bool
    embedded: bool
    workers: int | None
    api_key: str
    # The same key's id and SQS secret access key, for the SQS requests (`--api sqs`).
    sqs_key: tuple[str, str]


def with_database(url: str, name: str) -> str:
    """The same server URL pointing at database `name`."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on (right now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_local(url: str) -> None:
    """The bench only ever targets this machine."""
    host = urlsplit(url).hostname
    if host not in ("127.0.0.1", "localhost"):
        raise BenchError(f"the bench only targets 127.0.0.1, not {url!r}")


def postgres_tree(database_url: str) -> ProcessTree | None:
    """The server's process tree (postmaster and backends) when it runs on this machine."""
    host = urlsplit(database_url).hostname
    query_host = dict(p.split("=", 1) for p in urlsplit(database_url).query.split("&") if "=" in p).get("host", "")
    if host not in (None, "", "127.0.0.1", "localhost", "::1") or (query_host and not query_host.startswith("/")):
        return None
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        # Asked while the backend still exists: it is gone once the connection closes.
        pid = postmaster_pid(int(row[0])) if row else None
    return ProcessTree(pid) if pid else None


def server_url(config: BenchConfig) -> tuple[str, bool]:
    """Admin URL of the PostgreSQL server to create the run's database on, and whether it is the
    embedded one: `--database-url`, else PQS_DATABASE_URL, else the embedded server."""
    url = config.database_url or os.environ.get("PQS_DATABASE_URL") or None
    if url:
        return url, False
    from app.db.embedded import embedded_url

    return embedded_url(config.data_dir, tuning=PRODUCTION_SETTINGS), True


@contextlib.contextmanager
def fresh_database(server: str) -> Iterator[str]:
    """A new database on `server`, migrated to head; dropped afterwards."""
    from app.db.migrate import upgrade

    name = f"pqs_bench_{time.strftime('%Y%m%d%H%M%S')}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # the name is generated above, never input
    try:
        url = with_database(server, name)
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_server_key() -> str:
    """A server key for a service the bench starts (PQS_SQS_SERVER_KEY): its SQS secrets are
    sealed under it, and it is gone with the run's database."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


@contextlib.contextmanager
def bench_key(database_url: str, server_key: ServerKey) -> Iterator[tuple[str, str, str]]:
    """An API key for this run with an SQS secret, made in the database: (bearer key, key id,
    secret); revoked afterwards."""
    from app.access import EVERYTHING
    from app.db.sessions import on_connection
    from app.service.keys import create_signing_key, revoke_key

    stored, key, secret = asyncio.run(
        on_connection(database_url, lambda conn: create_signing_key(conn, "pqs bench", EVERYTHING, server_key))
    )
    try:
        yield key, stored.key_id, secret
    finally:
        with contextlib.suppress(psycopg.Error):
            asyncio.run(on_connection(database_url, lambda conn: revoke_key(conn, stored.key_id)))


@contextlib.contextmanager
def service_process(
    database_url: str, workers: int, log_path: Path, extra_env: dict[str, str]
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`pqs serve` on a free port with `workers` processes; stopped (SIGTERM, then SIGKILL to its
    process group) on the way out, errors and Ctrl-C included."""
    port = free_port()
    env = {
        **os.environ,
        "PQS_DATABASE_URL": database_url,
        "PQS_MAINTENANCE_INTERVAL_SECONDS": "5",
        "PQS_LOG_LEVEL": "warning",
        "PQS_AUTH_ENABLED": "true",
        **extra_env,
    }
    command = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", str(workers)]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        # Its own session: a Ctrl-C in the terminal reaches the bench, which stops the service.
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base_url = f"http://127.0.0.1:{port}"
        _wait_ready(base_url, proc, log_path)
        yield base_url, proc
    finally:
        _stop(proc)


def _wait_ready(base_url: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    with httpx.Client(base_url=base_url, timeout=2.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise BenchError(f"the service exited with {proc.returncode}:\n{tail}")
            with contextlib.suppress(httpx.HTTPError):
                if client.get("/readyz").status_code == 200:
                    return
            time.sleep(0.1)
    raise BenchError(f"the service was not ready within {READY_TIMEOUT_SECONDS:.0f} s (log: {log_path})")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT_SECONDS)


@contextlib.contextmanager
def open_target(config: BenchConfig, say: Callable[[str], None]) -> Iterator[Target]:
    """The target of this run, set up and torn down around the caller."""
    if config.url:
        check_local(config.url)
        if not config.database_url:
            raise BenchError("--url needs --database-url (for preloading backlogs and the baseline)")
        port = urlsplit(config.url).port or 80
        pid = listening_pid(port)
        from app.config import Settings
        from app.sealing import ServerKeyError
        from app.service.keys import server_key_for

        # The running service's server key, found as `pqs keys create` finds it.
        try:
            running_key = server_key_for(Settings())
        except ServerKeyError as exc:
            raise BenchError(f"the service's SQS server key: {exc}") from None
        with bench_key(config.database_url, running_key) as (key, key_id, secret):
            yield Target(
                base_url=config.url.rstrip("/"),
                database_url=config.database_url,
                service=ProcessTree(pid) if pid else None,
                postgres=postgres_tree(config.database_url),
                started_service=False,
                embedded=False,
                workers=None,
                api_key=key,
                sqs_key=(key_id, secret),
            )
        return
    say("starting PostgreSQL" + ("" if config.database_url else f" (embedded in {config.data_dir})"))
    server, embedded = server_url(config)
    server_key = run_server_key()
    with fresh_database(server) as database_url, bench_key(database_url, ServerKey.from_text(server_key)) as keys:
        key, key_id, secret = keys
        say(f"starting the service ({config.workers} workers)")
        log_path = config.data_dir / "service.log"
        env = {"PQS_SQS_SERVER_KEY": server_key, **config.extra_env}
        with service_process(database_url, config.workers, log_path, env) as (base_url, proc):
            yield Target(
                base_url=base_url,
                database_url=database_url,
                service=ProcessTree(proc.pid),
                postgres=postgres_tree(database_url),
                started_service=True,
                embedded=embedded,
                workers=config.workers,
                api_key=key,
                sqs_key=(key_id, secret),
            )
