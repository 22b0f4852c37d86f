"""`pqs serve` as a real subprocess on a free 127.0.0.1 port, for the fault tests.

The process runs in a session of its own (so a signal meant for it never reaches pytest), with
its output in a log file, and is always gone when the context exits: SIGKILL to its process
group unless it already exited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import ROOT

READY_SECONDS = 30


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accepting(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Service:
    """A running `pqs serve`."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def send_signal(self, sig: signal.Signals) -> None:
        """Send `sig` to the serving process itself."""
        self.proc.send_signal(sig)

    def output(self) -> str:
        """What the process wrote so far (for assertion messages)."""
        return self.log.read_text(errors="replace")[-4000:]


def _wait_ready(service: Service) -> None:
    deadline = time.monotonic() + READY_SECONDS
    with httpx.Client(base_url=service.url, timeout=2.0) as client:
        while time.monotonic() < deadline:
            assert service.proc.poll() is None, f"pqs serve exited early:\n{service.output()}"
            with contextlib.suppress(httpx.HTTPError):
                if client.get("/readyz").status_code == 200:
                    return
            time.sleep(0.05)
    raise AssertionError(f"pqs serve was not ready within {READY_SECONDS} s:\n{service.output()}")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


# `pqs serve`: uvicorn with PQS's HTTP protocol, whose hot lane serves the hot routes.
PQS_SERVE = ("app.cli", "serve")
# The app under plain uvicorn (its own HTTP protocol), as any ASGI server runs it: the fast path
# (app/api/fastpath.py) serves the hot routes. The database must be migrated and hold a key.
PLAIN_UVICORN = ("uvicorn", "app.main:create_app_from_env", "--factory", "--log-level", "warning")


@contextlib.contextmanager
def pqs_serve(database_url: str, log: Path, *, program: tuple[str, ...] = PQS_SERVE, **env: str) -> Iterator[Service]:
    """`python -m app.cli serve` (or another `program`: a module and its arguments) on a free port
    against `database_url`, ready to answer; killed on exit. `env` adds PQS_ settings (the caller
    passes PQS_DATA_DIR and, for a key made beforehand, nothing else is needed: the first-start
    admin key is only made when no key exists)."""
    port = free_port()
    environment = {
        **os.environ,
        "PQS_DATABASE_URL": database_url,
        "PQS_LOG_LEVEL": "warning",
        "PQS_MAINTENANCE_ENABLED": "false",
        **env,
    }
    command = [sys.executable, "-m", *program, "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=environment, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    service = Service(proc, port, log)
    try:
        _wait_ready(service)
        yield service
    finally:
        _kill(proc)
