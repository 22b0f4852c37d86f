"""`pqs keys create` issues an SQS secret access key, shown once and stored only sealed under the
server key (a setting, or a 0600 file made in the data directory); `pqs keys list` tells which
keys can sign SQS requests."""

from __future__ import annotations

import stat
from pathlib import Path

import psycopg
from typer.testing import CliRunner

from app.cli import app as cli
from app.sealing import ServerKey
from tests.sqs.harness import SERVER_KEY

runner = CliRunner()


def _sealed(db_url: str, key_id: str) -> bytes | None:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT sqs_secret FROM api_keys WHERE id = %s", (key_id,)).fetchone()
    assert row is not None
    return bytes(row[0]) if row[0] is not None else None


def test_keys_create_shows_the_secret_once_and_stores_it_sealed(db_url: str, tmp_path: Path) -> None:
    env = {"PQS_DATABASE_URL": db_url, "PQS_SQS_SERVER_KEY": SERVER_KEY, "PQS_DATA_DIR": str(tmp_path)}
    created = runner.invoke(cli, ["keys", "create", "worker", "--scope", "jobs:send"], env=env)
    assert created.exit_code == 0, created.output
    key = created.stdout.strip()
    key_id = key.split("_")[1]
    assert "\n" not in key, "stdout is the key alone, as before"
    lines = dict(line.split(": ", 1) for line in created.stderr.splitlines() if line.startswith("SQS "))
    assert lines["SQS access key id"] == key_id
    secret = lines["SQS secret access key"]
    assert len(secret) == 40
    sealed = _sealed(db_url, key_id)
    assert sealed is not None and secret.encode() not in sealed
    assert ServerKey.from_text(SERVER_KEY).open(sealed, key_id) == secret
    assert not list(tmp_path.iterdir()), "the setting is used: no key file"

    listed = runner.invoke(cli, ["keys", "list"], env=env)
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith(key_id))
    assert "\tsqs\tworker\t" in line and secret not in listed.output


def test_without_the_setting_the_server_key_is_a_0600_file(db_url: str, tmp_path: Path) -> None:
    env = {"PQS_DATABASE_URL": db_url, "PQS_SQS_SERVER_KEY": None, "PQS_DATA_DIR": str(tmp_path)}
    created = runner.invoke(cli, ["keys", "create", "worker", "--scope", "*:*"], env=env)
    assert created.exit_code == 0, created.output
    [key_file] = tmp_path.iterdir()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key_id = created.stdout.strip().split("_")[1]
    sealed = _sealed(db_url, key_id)
    assert sealed is not None
    assert len(ServerKey.load_or_create(key_file).open(sealed, key_id)) == 40
    again = runner.invoke(cli, ["keys", "create", "other", "--scope", "*:*"], env=env)
    assert again.exit_code == 0 and list(tmp_path.iterdir()) == [key_file], "one server key, kept"


def test_keys_made_before_are_listed_as_unable_to_sign(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO api_keys (id, name, secret_hash, scopes) VALUES ('00000000000a', 'old', %s,"
            ' \'[{"queues": "*", "actions": ["send"]}]\')',
            (b"\x00" * 32,),
        )
    listed = runner.invoke(cli, ["keys", "list"], env={"PQS_DATABASE_URL": db_url})
    assert listed.exit_code == 0, listed.output
    assert "\tno-sqs\told\t" in next(ln for ln in listed.stdout.splitlines() if ln.startswith("00000000000a"))
