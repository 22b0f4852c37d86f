"""PQS behind PgBouncer in transaction pooling (Debian's `pgbouncer`, `make pgbouncer-deps`).

The pool's statements go through PgBouncer (PQS_DATABASE_POOLER=pgbouncer: sent unprepared,
lock_timeout per transaction); LISTEN, the publisher of wake-ups and the maintenance leader's
session lock go straight to the server (PQS_DATABASE_DIRECT_URL). PgBouncer gets fewer server
sessions than the pool has connections, so the pool's transactions share them: a statement
prepared on one session, or a session SET, would be found missing on another. Two apps, served
over real HTTP, run the API's core flow; a long poll on one is woken by a send on the other,
which only a NOTIFY reaching the first one's LISTEN can do before the poll's deadline.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from typer.testing import CliRunner

from app.cli import app as cli
from app.db.engine import Database
from app.db.rows import Conn
from app.main import create_app
from tests.api.helpers import client_for, served
from tests.conftest import admin_headers, settings_for

# PgBouncer's server sessions for the test database: fewer than either app's pool.
SERVER_SESSIONS = 2
POOL_SIZE = 6
LOCK_TIMEOUT_SECONDS = 3
STARTUP_SECONDS = 15.0
# A parked long poll answers at its deadline without a wake-up; a woken one far sooner.
WAIT_SECONDS = 20
WOKEN_WITHIN = 10.0
runner = CliRunner()


def pgbouncer_binary() -> str:
    """PQS_PGBOUNCER, else Debian's pgbouncer (in /usr/sbin, often not on a user's PATH)."""
    found = os.environ.get("PQS_PGBOUNCER") or shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.access(found, os.X_OK):
        pytest.fail(f"pgbouncer is not installed ({found}): run `make pgbouncer-deps` (apt-get install pgbouncer)")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def run_as(server_host: str) -> str | None:
    """The user PgBouncer runs as: itself unless root (PgBouncer refuses root); as root, the
    owner of the server's socket directory (only it may open the socket), or nobody over TCP."""
    if os.getuid() != 0:
        return None
    if server_host.startswith("/"):
        return pwd.getpwuid(Path(server_host).stat().st_uid).pw_name
    return "nobody"


@pytest.fixture
def pgbouncer_url(db_url: str) -> Iterator[str]:
    """PgBouncer on a free 127.0.0.1 port, pool_mode=transaction, in front of this test's
    database; its URL. Stopped after the test."""
    binary = pgbouncer_binary()
    server = conninfo_to_dict(db_url)
    # Server sessions start in a DateStyle app.db.prepared cannot read: the pool's `SET datestyle`
    # must follow its connections from session to session (PgBouncer tracks DateStyle per client).
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE \"{server['dbname']}\" SET datestyle = 'Postgres, DMY'")
    host, dbname = str(server.get("host") or "127.0.0.1"), str(server["dbname"])
    user = str(server.get("user") or pwd.getpwuid(os.getuid()).pw_name)
    target = f"host={host} port={server.get('port') or 5432} dbname={dbname} user={user}"
    if server.get("password"):
        target += f" password={server['password']}"
    port = free_port()
    directory = Path(tempfile.mkdtemp(prefix="pqs-pgbouncer-"))
    (directory / "users.txt").write_text(f'"{user}" ""\n')
    settings = {
        "listen_addr": "127.0.0.1",
        "listen_port": str(port),
        "unix_socket_dir": "",
        "auth_type": "trust",
        "auth_file": str(directory / "users.txt"),
        "pool_mode": "transaction",
        "default_pool_size": str(SERVER_SESSIONS),
        "max_client_conn": "100",
        "logfile": str(directory / "pgbouncer.log"),
        "pidfile": str(directory / "pgbouncer.pid"),
    }
    owner = run_as(host)
    if owner is not None:
        settings["user"] = owner
    lines = ["[databases]", f"{dbname} = {target}", "[pgbouncer]", *(f"{k} = {v}" for k, v in settings.items())]
    ini = directory / "pgbouncer.ini"
    ini.write_text("\n".join(lines) + "\n")
    if owner is not None:
        record = pwd.getpwnam(owner)
        for path in (directory, *directory.iterdir()):
            os.chown(path, record.pw_uid, record.pw_gid)
    process = subprocess.Popen([binary, str(ini)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"postgresql://{user}@127.0.0.1:{port}/{dbname}"
    try:
        wait_until_up(url, process, directory)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
        shutil.rmtree(directory, ignore_errors=True)


def wait_until_up(url: str, process: subprocess.Popen[bytes], directory: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            log = directory / "pgbouncer.log"
            said = log.read_text() if log.exists() else ""
            if process.poll() is not None:
                stderr = process.stderr.read().decode() if process.stderr else ""
                pytest.fail(f"pgbouncer exited ({process.returncode}): {stderr}{said}")
            if time.monotonic() > deadline:
                pytest.fail(f"pgbouncer did not answer within {STARTUP_SECONDS} s: {exc}\n{said}")
        time.sleep(0.1)


async def no_server_errors(response: httpx.Response) -> None:
    """An event hook: every answer of the flow is below 500."""
    assert response.status_code < 500, f"{response.request.method} {response.request.url}: {response.status_code}"


async def parked(app: Any, poll: asyncio.Task[httpx.Response]) -> None:
    """Return once a long poll is parked on the app's wake-up registry."""
    deadline = time.monotonic() + 5
    while not app.state.wakeup._waiters and not poll.done():
        assert time.monotonic() < deadline, "the receive never started waiting"
        await asyncio.sleep(0.005)  # polling a condition, not waiting out a duration


async def serve(
    stack: AsyncExitStack, pgbouncer_url: str, db_url: str, **overrides: Any
) -> tuple[Any, httpx.AsyncClient]:
    """An app whose pool goes through PgBouncer, served over HTTP with its lifespan; with a client
    holding an admin key."""
    settings = settings_for(
        db_url,
        database_url=pgbouncer_url,
        database_direct_url=db_url,
        database_pooler="pgbouncer",
        pool_min_size=POOL_SIZE,
        pool_max_size=POOL_SIZE,
        lock_timeout_seconds=LOCK_TIMEOUT_SECONDS,
        **overrides,
    )
    app = create_app(settings)
    await stack.enter_async_context(served(app, lifespan="on", log_level="critical"))
    headers = await admin_headers(app)
    client = await stack.enter_async_context(client_for(app, headers))
    client.event_hooks["response"].append(no_server_errors)
    return app, client


@pytest.fixture
async def pair(pgbouncer_url: str, db_url: str) -> AsyncIterator[tuple[Any, httpx.AsyncClient, httpx.AsyncClient]]:
    """Two apps behind the same PgBouncer (the first runs the maintenance loop)."""
    async with AsyncExitStack() as stack:
        first, one = await serve(
            stack, pgbouncer_url, db_url, maintenance_enabled=True, maintenance_interval_seconds=0.1
        )
        _, other = await serve(stack, pgbouncer_url, db_url)
        yield first, one, other


async def test_core_flow_behind_pgbouncer(pair: tuple[Any, httpx.AsyncClient, httpx.AsyncClient]) -> None:
    first, one, other = pair
    db: Database = first.state.db
    assert db.transaction_pooling and db.direct_url != db.url

    dlq = "pgb-dead.fifo"
    source = "pgb-jobs.fifo"
    assert (await one.put(f"/v1/queues/{dlq}", json={"fifo": True})).status_code == 201
    created = await one.put(
        f"/v1/queues/{source}",
        json={"fifo": True, "dead_letter": {"queue": dlq, "max_receive_count": 1}},
    )
    assert created.status_code == 201, created.text

    # Send, and the same again (deduplicated), then a batch: through PgBouncer, over and over,
    # on pooled connections that share two server sessions.
    sent = await one.post(f"/v1/queues/{source}/messages", json={"body": {"n": 0}, "group_id": "a", "dedup_id": "d0"})
    assert sent.status_code == 201, sent.text
    again = await other.post(
        f"/v1/queues/{source}/messages", json={"body": {"n": 0}, "group_id": "a", "dedup_id": "d0"}
    )
    assert again.json()["message_id"] == sent.json()["message_id"]
    entries = [{"id": f"e{n}", "body": {"n": n}, "group_id": f"g{n}", "dedup_id": f"d{n}"} for n in range(1, 6)]
    batch = await other.post(f"/v1/queues/{source}/messages/batch", json={"entries": entries})
    assert batch.status_code == 200, batch.text
    assert len(batch.json()["successful"]) == 5

    # Receives from both apps at once: each message once.
    answers = await asyncio.gather(
        *(
            client.post(f"/v1/queues/{source}/messages/receive", json={"max_messages": 2, "wait_seconds": 0})
            for client in (one, other, one, other)
        )
    )
    got = [m for answer in answers for m in answer.json()["messages"]]
    assert sorted(m["body"]["n"] for m in got) == list(range(6))
    by_n = {m["body"]["n"]: m for m in got}

    acked = await one.post(
        f"/v1/queues/{source}/messages/ack",
        json={"entries": [{"id": "a0", "receipt_handle": by_n[0]["receipt_handle"]}]},
    )
    assert [s["id"] for s in acked.json()["successful"]] == ["a0"]
    visible = await other.post(
        f"/v1/queues/{source}/messages/visibility",
        json={"entries": [{"id": "v1", "receipt_handle": by_n[1]["receipt_handle"], "visibility_timeout": 600}]},
    )
    assert [s["id"] for s in visible.json()["successful"]] == ["v1"]
    # A nack of a message received once, with max_receive_count 1: its next receive dead-letters it.
    nacked = await one.post(
        f"/v1/queues/{source}/messages/nack",
        json={"entries": [{"id": "n2", "receipt_handle": by_n[2]["receipt_handle"]}]},
    )
    assert [s["id"] for s in nacked.json()["successful"]] == ["n2"]
    assert (await one.post(f"/v1/queues/{source}/messages/receive", json={"wait_seconds": 0})).json()["messages"] == []
    dead = (await other.get(f"/v1/queues/{dlq}")).json()["stats"]
    assert dead["visible"] == 1, dead

    redriven = await one.post(f"/v1/queues/{dlq}/redrive")
    assert redriven.json() == {"count": 1}, redriven.text
    [back] = (await other.post(f"/v1/queues/{source}/messages/receive", json={"wait_seconds": 0})).json()["messages"]
    assert back["body"] == {"n": 2}

    # A long poll parked on the first app, woken by a send through the second: the second's
    # NOTIFY (from its direct connection) reaches the first's LISTEN (on its own).
    assert (await one.post(f"/v1/queues/{source}/purge")).status_code == 200
    poll = asyncio.create_task(one.post(f"/v1/queues/{source}/messages/receive", json={"wait_seconds": WAIT_SECONDS}))
    await parked(first, poll)
    assert not poll.done(), poll.result().text
    started = asyncio.get_running_loop().time()
    woke = await other.post(f"/v1/queues/{source}/messages", json={"body": "wake", "group_id": "w", "dedup_id": "w"})
    assert woke.status_code == 201, woke.text
    answer = await asyncio.wait_for(poll, timeout=WAIT_SECONDS + 5)
    assert [m["body"] for m in answer.json()["messages"]] == ["wake"]
    assert asyncio.get_running_loop().time() - started < WOKEN_WITHIN

    # lock_timeout holds in every pooled transaction, explicit or not (SET LOCAL in each).
    async def lock_timeout(conn: Conn) -> object:
        row = await (await conn.execute("SHOW lock_timeout")).fetchone()
        return row and row["lock_timeout"]

    for _ in range(POOL_SIZE):
        assert await db.run(lock_timeout) == f"{LOCK_TIMEOUT_SECONDS}s"
        assert await db.run_single(lock_timeout) == f"{LOCK_TIMEOUT_SECONDS}s"

    # The maintenance leader holds its session lock on a direct connection.
    for _ in range(200):
        if first.state.maintenance.is_leader:
            break
        await asyncio.sleep(0.05)
    assert first.state.maintenance.is_leader

    for name in (source, dlq):
        assert (await other.delete(f"/v1/queues/{name}")).status_code == 204
    assert (await one.get(f"/v1/queues/{source}")).status_code == 404


def test_migrations_and_keys_go_direct(empty_db_url: str) -> None:
    # PQS_DATABASE_URL leads nowhere: `pqs migrate` and `pqs keys` reach the database only if they
    # take PQS_DATABASE_DIRECT_URL (Alembic's DDL and session lock cannot go through PgBouncer).
    env = {"PQS_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nowhere", "PQS_DATABASE_DIRECT_URL": empty_db_url}
    migrated = runner.invoke(cli, ["migrate"], env=env)
    assert migrated.exit_code == 0, migrated.output
    listed = runner.invoke(cli, ["keys", "list"], env=env)
    assert listed.exit_code == 0, listed.output
