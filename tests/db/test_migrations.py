"""Migrations run from an empty database, match the metadata, and reverse cleanly."""

from __future__ import annotations

import psycopg

from alembic import command
from app.db.migrate import alembic_config, upgrade


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
