"""Migrations run from an empty database, match the metadata, and reverse cleanly."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from alembic import command
from app.db.migrate import ROOT, alembic_config, upgrade


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {r[0] for r in rows}


def test_upgrade_from_empty_then_check(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    assert {"queues", "messages", "message_groups", "message_dedup", "message_history"} <= _tables(empty_db_url)
    # `alembic check` raises when the metadata and the migrated database differ.
    command.check(alembic_config(empty_db_url))


def test_downgrade_to_base_and_up_again(empty_db_url: str) -> None:
    config = alembic_config(empty_db_url)
    upgrade(empty_db_url)
    command.downgrade(config, "base")
    assert _tables(empty_db_url) <= {"alembic_version"}
    upgrade(empty_db_url)
    command.check(config)


def test_concurrent_upgrades_take_turns(empty_db_url: str) -> None:
    # Service processes started together each migrate at start (`pqs serve`): they must not run
    # the same migration at once (CREATE TABLE of the same name, a CONCURRENTLY index build).
    # Processes, not threads: Alembic keeps its migration context in module globals.
    script = "import sys; from app.db.migrate import upgrade; upgrade(sys.argv[1])"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, empty_db_url], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for _ in range(3)
    ]
    outputs = []
    for proc in procs:
        try:
            output, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        outputs.append((proc.returncode, output.decode(errors="replace")[-2000:]))
    assert all(code == 0 for code, _ in outputs), outputs
    command.check(alembic_config(empty_db_url))
