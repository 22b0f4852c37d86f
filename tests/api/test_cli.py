"""The `pqs` command: migrate, and the ops verbs against a real server over TCP (access control on:
the verbs send the key of PQS_API_KEY)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
import uvicorn
from typer.testing import CliRunner

from app.cli import app as cli
from app.main import create_app
from tests.conftest import admin_key, settings_for

runner = CliRunner()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def key(db_url: str) -> str:
    """An admin key in this test's database."""
    return admin_key(db_url)


@pytest.fixture
def served(db_url: str) -> Iterator[str]:
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings_for(db_url)), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    assert server.started, "server did not start within 5 s"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def run(url: str, key: str, *args: str) -> str:
    result = runner.invoke(cli, list(args), env={"PQS_URL": url, "PQS_API_KEY": key})
    assert result.exit_code == 0, result.output
    return result.output


def test_ops_verbs(served: str, key: str) -> None:
    created = json.loads(run(served, key, "queue", "create", "jobs.fifo", "--visibility-timeout", "60"))
    assert (created["name"], created["fifo"], created["visibility_timeout"]) == ("jobs.fifo", True, 60)
    run(served, key, "queue", "create", "plain")
    assert run(served, key, "queue", "list").split() == ["jobs.fifo", "plain"]
    sent = json.loads(run(served, key, "send", "jobs.fifo", '{"task": 1}', "--group", "g", "--dedup", "t1"))
    assert sent["duplicate"] is False
    assert json.loads(run(served, key, "queue", "stats", "jobs.fifo", "--json"))["stats"]["visible"] == 1
    output = run(served, key, "receive", "jobs.fifo", "--max", "5", "--ack")
    assert '"task": 1' in output and '"failed": []' in output
    assert json.loads(run(served, key, "queue", "stats", "jobs.fifo", "--json"))["stats"]["visible"] == 0
    run(served, key, "send", "plain", "hello")
    assert json.loads(run(served, key, "queue", "purge", "plain")) == {"count": 1}


def test_an_operator_looks_at_the_queues_peeks_at_a_dead_letter_queue_and_redrives_it(served: str, key: str) -> None:
    run(served, key, "queue", "create", "orders-dlq")
    run(served, key, "queue", "create", "orders", "--dead-letter", "orders-dlq", "--max-receive-count", "1",
        "--visibility-timeout", "0")  # fmt: skip
    run(served, key, "send", "orders", '{"order": 7}')
    run(served, key, "receive", "orders")  # received once, not acked: its next receive dead-letters it
    assert json.loads(run(served, key, "receive", "orders"))["messages"] == []

    table = run(served, key, "queue", "stats")
    assert "orders-dlq" in table and "dead letters to" in table
    counts = {q["name"]: q["stats"] for q in json.loads(run(served, key, "queue", "stats", "--json"))}
    assert counts["orders-dlq"]["visible"] == 1 and counts["orders"]["visible"] == 0

    peeked = json.loads(run(served, key, "queue", "peek", "orders-dlq", "--json"))
    assert [(m["body"], m["source_queue"], m["state"]) for m in peeked] == [({"order": 7}, "orders", "ready")]
    table = run(served, key, "queue", "peek", "orders-dlq")
    assert '{"order":7}' in table and "orders" in table
    # The peek changed nothing: the message is there still, and is redriven.
    assert run(served, key, "queue", "redrive", "orders-dlq").strip() == (
        "moved 1 message(s) from orders-dlq back to their queues"
    )
    assert json.loads(run(served, key, "queue", "redrive", "orders-dlq", "--json")) == {"count": 0}
    assert json.loads(run(served, key, "queue", "peek", "orders", "--json"))[0]["body"] == {"order": 7}


def test_keys_list_as_json(db_url: str, key: str) -> None:
    result = runner.invoke(cli, ["keys", "list", "--json"], env={"PQS_DATABASE_URL": db_url})
    assert result.exit_code == 0, result.output
    [found] = json.loads(result.output)
    assert (
        key.split("_")[1] == found["key_id"]
        and found["revoked_at"] is None
        and found["scopes"] == ["*:send,receive,ack,read,admin"]
    )


def test_errors_are_reported_with_exit_code_1(served: str, key: str) -> None:
    result = runner.invoke(cli, ["queue", "stats", "missing"], env={"PQS_URL": served, "PQS_API_KEY": key})
    assert result.exit_code == 1
    assert "queue_not_found" in result.output


def test_migrate_builds_the_schema(empty_db_url: str) -> None:
    result = runner.invoke(cli, ["migrate"], env={"PQS_DATABASE_URL": empty_db_url})
    assert result.exit_code == 0, result.output
    with psycopg.connect(empty_db_url) as conn:
        row = conn.execute("SELECT to_regclass('public.messages') IS NOT NULL").fetchone()
    assert row == (True,)
