"""API keys on a real database: stored hashed, listed, revoked, the first-start admin key (once,
also with two starts at once), the operator's key file, and the verifier's short-lived cache."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.access import EVERYTHING, parse_grant
from app.db.engine import Database
from app.db.sessions import on_connection
from app.errors import KeyNotFound
from app.sealing import ServerKey
from app.service import keys
from app.service.keys import KeyVerifier, bootstrap_admin_key, create_key, create_signing_key, list_keys, revoke_key

SENDER = (parse_grant("jobs-*:send"),)


def key_rows(db_url: str) -> list[dict[str, Any]]:
    """Every api_keys row as JSON (bytea as hex)."""
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT row_to_json(k) FROM api_keys k ORDER BY created_at").fetchall()
    return [r[0] for r in rows]


async def test_a_key_is_stored_hashed_never_in_clear(db: Database, db_url: str) -> None:
    stored, key = await db.run(lambda conn: create_key(conn, "worker", SENDER))
    secret = key.split("_", 2)[-1]
    [row] = key_rows(db_url)
    assert row["id"] == stored.key_id and row["name"] == "worker"
    assert row["scopes"] == [{"queues": "jobs-*", "actions": ["send"]}]
    assert row["secret_hash"] == "\\x" + hashlib.sha256(key.encode()).hexdigest()
    assert row["revoked_at"] is None
    assert key not in str(row) and secret not in str(row)


async def test_list_and_revoke(db: Database) -> None:
    first, _ = await db.run(lambda conn: create_key(conn, "one", SENDER))
    second, _ = await db.run(lambda conn: create_key(conn, "two", EVERYTHING))
    listed = await db.run(list_keys)
    assert [(k.key_id, k.name, k.grants, k.revoked_at) for k in listed] == [
        (first.key_id, "one", SENDER, None),
        (second.key_id, "two", EVERYTHING, None),
    ]
    at = datetime(2030, 1, 2, tzinfo=UTC)
    revoked = await db.run(lambda conn: revoke_key(conn, first.key_id, now=at))
    assert revoked.revoked_at == at
    again = await db.run(lambda conn: revoke_key(conn, first.key_id, now=at + timedelta(days=1)))
    assert again.revoked_at == at, "revoking twice keeps the first time"
    assert [k.revoked_at for k in await db.run(list_keys)] == [at, None]
    with pytest.raises(KeyNotFound):
        await db.run(lambda conn: revoke_key(conn, "0123456789ab"))


async def test_a_taken_key_id_is_drawn_again(db: Database) -> None:
    taken, _ = await db.run(lambda conn: create_key(conn, "first", SENDER, random_bytes=lambda n: b"\x01" * n))
    draws = iter([b"\x01" * 6, b"\x02" * 32, b"\x03" * 6, b"\x04" * 32])
    other, key = await db.run(lambda conn: create_key(conn, "second", SENDER, random_bytes=lambda n: next(draws)))
    assert taken.key_id == "010101010101" and other.key_id == "030303030303"
    assert key.startswith("pqs_030303030303_")


async def test_the_admin_key_is_made_once(db: Database, db_url: str) -> None:
    stored: list[str] = []
    key = await db.run(lambda conn: bootstrap_admin_key(conn, stored.append))
    assert key is not None and stored == [key]
    [row] = key_rows(db_url)
    everything = ["send", "receive", "ack", "read", "admin"]
    assert row["name"] == "admin" and row["scopes"] == [{"queues": "*", "actions": everything}]
    assert await db.run(lambda conn: bootstrap_admin_key(conn, stored.append)) is None
    assert stored == [key] and len(key_rows(db_url)) == 1


async def test_no_admin_key_once_keys_exist_even_revoked_ones(db: Database, db_url: str) -> None:
    made, _ = await db.run(lambda conn: create_key(conn, "only", SENDER))
    await db.run(lambda conn: revoke_key(conn, made.key_id))
    assert await db.run(lambda conn: bootstrap_admin_key(conn, pytest.fail)) is None
    assert len(key_rows(db_url)) == 1


async def test_a_failed_key_file_write_leaves_no_key(db: Database, db_url: str) -> None:
    def fail(_: str) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        await db.run(lambda conn: bootstrap_admin_key(conn, fail))
    assert key_rows(db_url) == []


def test_two_first_starts_at_once_make_one_admin_key(db_url: str) -> None:
    """Two bootstraps on their own connections, each slow to store its key: the table lock makes
    the second wait for the first commit, and then it finds the key."""
    results: list[str | None] = []
    both_started = threading.Barrier(2)

    def slow_store(_: str) -> None:
        time.sleep(0.3)

    def start() -> None:
        both_started.wait()
        results.append(asyncio.run(on_connection(db_url, lambda conn: bootstrap_admin_key(conn, slow_store))))

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 2 and results.count(None) == 1, results
    assert len(key_rows(db_url)) == 1


def test_the_key_file_is_private_and_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "data" / "admin.key"
    keys.write_key_file(path, "pqs_first")
    assert path.read_text() == "pqs_first\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    keys.write_key_file(path, "pqs_second")
    assert keys.read_key_file(path) == "pqs_second"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(path.parent) == ["admin.key"]
    assert keys.read_key_file(tmp_path / "missing.key") is None


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_verifier_trusts_a_key_for_its_ttl_then_asks_again(db: Database) -> None:
    clock = Clock()
    verifier = KeyVerifier(db, ttl=2.0, clock=clock)
    stored, key = await db.run(lambda conn: create_key(conn, "worker", SENDER))
    access = await verifier.verify(key)
    assert access is not None and access.key_id == stored.key_id and access.grants == SENDER
    assert access.allows("send", "jobs-1") and not access.allows("receive", "jobs-1")

    await db.run(lambda conn: revoke_key(conn, stored.key_id))  # as `pqs keys revoke` elsewhere
    clock.now += 1.9
    assert await verifier.verify(key) is not None, "within the TTL the cached verdict stands"
    clock.now += 0.2
    assert await verifier.verify(key) is None, "after the TTL the revocation is seen"


async def test_verifier_refuses_unknown_wrong_and_malformed_keys(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    original = keys.same_hash

    def spy(stored: bytes, presented: bytes) -> bool:
        compared.append((stored, presented))
        return original(stored, presented)

    monkeypatch.setattr(keys, "same_hash", spy)
    verifier = KeyVerifier(db, ttl=0)
    stored, key = await db.run(lambda conn: create_key(conn, "worker", SENDER))
    wrong_secret = f"pqs_{stored.key_id}_" + "A" * 43
    assert await verifier.verify(wrong_secret) is None
    assert compared == [(hashlib.sha256(key.encode()).digest(), hashlib.sha256(wrong_secret.encode()).digest())]
    assert await verifier.verify("pqs_0123456789ab_" + "A" * 43) is None
    for malformed in ("", "pqs", key + "x", key.upper(), "Bearer " + key):
        assert await verifier.verify(malformed) is None
    assert len(compared) == 1, "only a key whose id exists is compared"
    assert await verifier.verify(key) is not None
    assert len(compared) == 2


async def test_a_flood_of_made_up_keys_does_not_evict_a_valid_one(db: Database) -> None:
    """Anyone can present made-up keys; they must not push a valid key out of the cache (each
    eviction would cost a lookup on the next real request)."""
    clock = Clock()
    verifier = KeyVerifier(db, ttl=60.0, clock=clock)
    stored, key = await db.run(lambda conn: create_key(conn, "worker", SENDER))
    assert await verifier.verify(key) is not None
    await db.run(lambda conn: revoke_key(conn, stored.key_id))  # only a cache hit can still admit it
    for n in range(keys.MAX_CACHED_KEYS + 10):
        assert await verifier.verify(f"made-up-{n}") is None  # malformed: refused without a lookup
    assert await verifier.verify(key) is not None, "the valid key was evicted by the flood"


async def test_a_flood_of_made_up_key_ids_does_not_evict_a_signer(db: Database) -> None:
    """An SQS request names its key id before proving anything, so anyone can send made-up ids
    (with a current date); they must not push a valid signer out of the credentials cache."""
    server_key = ServerKey.generate()
    verifier = KeyVerifier(db, ttl=60.0, clock=Clock(), server_key=lambda: server_key)
    stored, _, secret = await db.run(lambda conn: create_signing_key(conn, "worker", SENDER, server_key))
    found = await verifier.credentials(stored.key_id)
    assert found is not None and found[1] == secret
    await db.run(lambda conn: revoke_key(conn, stored.key_id))  # only a cache hit can still admit it
    for n in range(keys.MAX_CACHED_KEYS + 10):
        assert await verifier.credentials(f"made-up-{n}") is None  # malformed: refused without a lookup
    assert await verifier.credentials(stored.key_id) == found, "the valid signer was evicted by the flood"
