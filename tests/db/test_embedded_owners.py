"""The embedded PostgreSQL does not outlive `pqs serve`, however `pqs serve` ends (app/db/embedded.py):
real `pqs serve` processes on a data directory of their own, killed with SIGKILL."""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from app.db.embedded_watch import OWNERS_FILE
from tests.faults.service import Service, pqs_serve

SECONDS = 30


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory of the test's own (not under pytest's root-only tmp_path: pgserver runs the
    server as an unprivileged user when we are root); its server is stopped on the way out."""
    root = Path(tempfile.mkdtemp(prefix="pqs-own-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        pid = postmaster(root)
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
        shutil.rmtree(root, ignore_errors=True)


def postmaster(data_dir: Path) -> int | None:
    """The embedded server's postmaster while it runs."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int((data_dir / "pgdata" / "postmaster.pid").read_text().split("\n", 1)[0])
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            return pid
    return None


def watcher_of(service: Service) -> psutil.Process:
    """The owner watcher `pqs serve` started (app/db/embedded_watch.py)."""
    for child in psutil.Process(service.proc.pid).children():
        if any(part.endswith("embedded_watch.py") for part in child.cmdline()):
            return child
    raise AssertionError("pqs serve has no owner watcher")


def wait_gone(pid: int) -> bool:
    """Whether process `pid` ends within SECONDS."""
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


def serving(data_dir: Path, log: Path) -> contextlib.AbstractContextManager[Service]:
    """`pqs serve` on the embedded server in `data_dir`."""
    return pqs_serve("", log, PQS_DATA_DIR=str(data_dir), PQS_AUTH_ENABLED="false")


def test_a_killed_serve_does_not_leave_the_server_running(data_dir: Path, tmp_path: Path) -> None:
    with serving(data_dir, tmp_path / "serve.log") as service:
        server = postmaster(data_dir)
        assert server is not None
        service.proc.send_signal(signal.SIGKILL)
        service.proc.wait(timeout=SECONDS)

        assert wait_gone(server), "the embedded PostgreSQL outlived the killed pqs serve"
    assert (data_dir / "pgdata" / OWNERS_FILE).read_text() == "[]"


def test_the_next_start_takes_over_a_server_whose_owner_was_killed(data_dir: Path, tmp_path: Path) -> None:
    # The owner and its watcher both killed: nothing is left to stop the server, and its record
    # still names the dead owner, as pgserver alone leaves it after a SIGKILL.
    with serving(data_dir, tmp_path / "first.log") as first:
        server = postmaster(data_dir)
        assert server is not None
        watcher_of(first).kill()
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=SECONDS)
    time.sleep(1)
    assert postmaster(data_dir) == server
    assert str(first.proc.pid) in (data_dir / "pgdata" / OWNERS_FILE).read_text()

    with serving(data_dir, tmp_path / "second.log") as second:
        assert postmaster(data_dir) == server  # taken over, not started twice
        assert httpx.get(f"{second.url}/readyz", timeout=5).status_code == 200
        assert f"was left running by process {first.proc.pid}, which ended without stopping it" in second.output()
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(timeout=SECONDS) == 0

        # The new owner's exit stops the server: the dead owner no longer counts as one.
        assert wait_gone(server), "the embedded PostgreSQL outlived its last owner"


def test_a_server_with_a_live_owner_keeps_running(data_dir: Path, tmp_path: Path) -> None:
    # A second owner killed while the first still serves: the server stays for the first.
    with serving(data_dir, tmp_path / "first.log") as first, serving(data_dir, tmp_path / "second.log") as second:
        server = postmaster(data_dir)
        assert server is not None
        second.proc.send_signal(signal.SIGKILL)
        second.proc.wait(timeout=SECONDS)
        watcher = watcher_of_dead(second.proc.pid)
        assert watcher is None or wait_gone(watcher)
        assert postmaster(data_dir) == server
        assert httpx.get(f"{first.url}/readyz", timeout=5).status_code == 200
        assert (data_dir / "pgdata" / OWNERS_FILE).read_text() == f"[{first.proc.pid}]"


def watcher_of_dead(owner: int) -> int | None:
    """The pid of the watcher of a dead owner, while it still runs (it was re-parented)."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(part.endswith("embedded_watch.py") for part in cmdline) and cmdline[-1] == str(owner):
            return int(proc.pid)
    return None
