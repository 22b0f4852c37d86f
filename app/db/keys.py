"""Repository functions for API keys. Each takes a connection and never commits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from app.access import ApiKey, Grant, NewKey, grants_from_json, grants_to_json
from app.db.rows import Conn
from app.db.sql import QUERIES


@dataclass(frozen=True)
class StoredKey:
    """What the auth check needs of a key row."""

    key_id: str
    secret_hash: bytes
    grants: tuple[Grant, ...]
    revoked: bool


def _api_key(row: dict[str, Any]) -> ApiKey:
    return ApiKey(
        key_id=row["id"],
        name=row["name"],
        grants=grants_from_json(row["scopes"]),
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
    )


async def api_key_insert(
    conn: Conn, new: NewKey, name: str, grants: tuple[Grant, ...], now: datetime | None = None
) -> ApiKey | None:
    """Store a new key; None when its key id is already taken."""
    params = {
        "id": new.key_id,
        "name": name,
        "secret_hash": new.secret_hash,
        "scopes": Jsonb(grants_to_json(grants)),
        "now": now,
    }
    row = await (await conn.execute(QUERIES["api_key_insert"].sql, params)).fetchone()
    return _api_key(row) if row else None


async def api_key_get(conn: Conn, key_id: str) -> StoredKey | None:
    """The key with this id, hash and grants included."""
    row = await (await conn.execute(QUERIES["api_key_get"].sql, {"id": key_id})).fetchone()
    if row is None:
        return None
    return StoredKey(
        key_id=row["id"],
        secret_hash=bytes(row["secret_hash"]),
        grants=grants_from_json(row["scopes"]),
        revoked=row["revoked_at"] is not None,
    )


async def api_key_list(conn: Conn) -> list[ApiKey]:
    """Every key, oldest first."""
    cur = await conn.execute(QUERIES["api_key_list"].sql)
    return [_api_key(row) for row in await cur.fetchall()]


async def api_key_revoke(conn: Conn, key_id: str, now: datetime | None = None) -> ApiKey | None:
    """Revoke a key (idempotent); None when there is no such key."""
    row = await (await conn.execute(QUERIES["api_key_revoke"].sql, {"id": key_id, "now": now})).fetchone()
    return _api_key(row) if row else None


async def api_key_lock(conn: Conn) -> None:
    """Hold off other bootstraps and key writers until this transaction ends."""
    await conn.execute(QUERIES["api_key_lock"].sql)


async def api_key_any(conn: Conn) -> bool:
    """Whether the table holds any key at all (revoked ones included)."""
    row = await (await conn.execute(QUERIES["api_key_any"].sql)).fetchone()
    return bool(row and row["found"])
