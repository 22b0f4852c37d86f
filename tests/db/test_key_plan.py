"""The key lookup behind an auth cache miss is one primary-key probe, whatever the number of keys."""

from __future__ import annotations

import json

import psycopg

from app.db.sql import QUERIES


def test_key_lookup_probes_the_primary_key(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO api_keys (id, name, secret_hash, scopes)"
            " SELECT lpad(to_hex(i), 12, '0'), 'k' || i, sha256(i::text::bytea), %s"
            " FROM generate_series(1, 5000) AS i",
            (json.dumps([{"queues": "*", "actions": ["send"]}]),),
        )
        conn.execute("ANALYZE api_keys")
        row = conn.execute("EXPLAIN (FORMAT JSON) " + QUERIES["api_key_get"].text, {"id": "000000000abc"}).fetchone()  # type: ignore[arg-type]
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    plan = document[0]["Plan"]
    assert plan["Node Type"] in ("Index Scan", "Index Only Scan"), plan
    assert plan["Index Name"] == "api_keys_pkey", plan
