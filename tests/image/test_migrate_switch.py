"""PQS_MIGRATE_ON_START=false (the image's setting): `pqs serve` leaves the schema alone, and on a
database not at the latest migration it stops at start with what to run, instead of serving."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg

from app.db.migrate import ROOT, is_current, upgrade


def serve_without_migrating(url: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PQS_DATABASE_URL": url, "PQS_DATA_DIR": str(data_dir), "PQS_MIGRATE_ON_START": "false"}
    # Port 0: should it serve after all, it fails the timeout rather than a port in use.
    argv = [sys.executable, "-m", "app.cli", "serve", "--port", "0"]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_is_current_only_at_the_latest_migration(empty_db_url: str) -> None:
    assert not is_current(empty_db_url)
    upgrade(empty_db_url, "0001")
    assert not is_current(empty_db_url)
    upgrade(empty_db_url)
    assert is_current(empty_db_url)


def test_serve_refuses_an_unmigrated_database_and_leaves_it_alone(empty_db_url: str, tmp_path: Path) -> None:
    done = serve_without_migrating(empty_db_url, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "run `pqs migrate` first" in done.stderr
    with psycopg.connect(empty_db_url) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert tables == (0,)
