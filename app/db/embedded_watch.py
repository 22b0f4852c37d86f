"""The watcher of one owner of the embedded PostgreSQL (see app/db/embedded.py).

`python embedded_watch.py PGDATA OWNER_PID`, started by the owner with a pipe on stdin whose
writing end only the owner holds. It blocks on that pipe; end of file means the owner is gone,
whether it exited or was killed. It then removes the owner, and every other owner that no longer
runs, from pgserver's record, and stops the server when no owner is left. An owner that exits
normally has done the same already (pgserver's exit handler), and the watcher finds nothing to do.

It imports pgserver and psutil only, not the application: it starts fast and holds little.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

OWNERS_FILE = ".handle_pids.json"
STOP_SECONDS = 60


def running(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, does not)."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def forget(pgdata: Path, owner: int | None = None) -> tuple[list[int], list[int]]:
    """Remove `owner` and the owners that no longer run from pgserver's record of `pgdata`'s
    owners; (the dead ones removed, the owners left). The caller holds pgserver's lock."""
    path = pgdata / OWNERS_FILE
    try:
        owners = [int(p) for p in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return [], []
    dead = [p for p in owners if p != owner and not running(p)]
    left = [p for p in owners if p != owner and p not in dead]
    if left != owners:
        path.write_text(json.dumps(left))
    return dead, left


def pgserver_lock() -> Any:
    """pgserver's lock between processes, taken by every start and exit of a handle."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, about a missing XDG_RUNTIME_DIR
        from pgserver.postgres_server import PostgresServer
    return PostgresServer._lock


def stop_unowned(pgdata: Path, owner: int) -> bool:
    """Forget `owner` (and dead owners); stop the server if no owner is left. Whether it stopped."""
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]
    from pgserver.utils import PostmasterInfo

    with pgserver_lock():
        _, left = forget(pgdata, owner)
        if left:
            return False
        info = PostmasterInfo.read_from_pgdata(pgdata)
        if info is None or not info.is_running():
            return False
        user = "pgserver" if os.geteuid() == 0 else None  # pgserver runs the server as this user
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=STOP_SECONDS)
        return True


def main(argv: list[str]) -> None:
    """Wait for the owner to be gone, then tidy up after it."""
    pgdata, owner = Path(argv[0]), int(argv[1])
    sys.stdin.buffer.read()  # returns at end of file: the owner is gone
    stop_unowned(pgdata, owner)


if __name__ == "__main__":
    main(sys.argv[1:])
