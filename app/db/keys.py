"""Repository functions for API keys. Each takes a connection and never commits."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from psycopg.types.json import Jsonb

from app.access import ApiKey, Grant, NewKey, grants_from_json, grants_to_json
from app.db.rows import Conn
from app.db.statements import NoRow, execute, fetch, fetch_one, statement


@dataclass(frozen=True)
class StoredKey:
    """What the auth check needs of a key row."""

    key_id: str
    secret_hash: bytes
    grants: tuple[Grant, ...]
    revoked: bool
    sealed_sqs_secret: bytes | None = None


class KeyRow(NamedTuple):
    """A key as listed (no hash)."""

    id: str
    name: str
    scopes: Any
    created_at: datetime
    revoked_at: datetime | None
    signs_sqs: bool


class SecretRow(NamedTuple):
    """A key as the auth check reads it."""

    id: str
    secret_hash: bytes
    scopes: Any
    revoked_at: datetime | None
    sqs_secret: bytes | None


class Held(NamedTuple):
    """A key locked by api_key_hold, and whether it is valid (not revoked)."""

    id: str
    valid: bool


class Found(NamedTuple):
    """Whether something exists."""

    found: bool


_INSERT = statement("api_key_insert", KeyRow)
_GET = statement("api_key_get", SecretRow)
_LIST = statement("api_key_list", KeyRow)
_REVOKE = statement("api_key_revoke", KeyRow)
_LOCK = statement("api_key_lock", NoRow)
_ANY = statement("api_key_any", Found)
_HOLD = statement("api_key_hold", Held)


def _api_key(row: KeyRow) -> ApiKey:
    return ApiKey(
        key_id=row.id,
        name=row.name,
        grants=grants_from_json(row.scopes),
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        signs_sqs=row.signs_sqs,
    )


async def api_key_insert(
    conn: Conn,
    new: NewKey,
    name: str,
    grants: tuple[Grant, ...],
    now: datetime | None = None,
    sealed_sqs_secret: bytes | None = None,
) -> ApiKey | None:
    """Store a new key (with its sealed SQS secret, if any); None when its key id is taken."""
    params = {
        "id": new.key_id,
        "name": name,
        "secret_hash": new.secret_hash,
        "scopes": Jsonb(grants_to_json(grants)),
        "now": now,
        "sqs_secret": sealed_sqs_secret,
    }
    row = await fetch_one(conn, _INSERT, params)
    return _api_key(row) if row else None


async def api_key_get(conn: Conn, key_id: str) -> StoredKey | None:
    """The key with this id, hash and grants included."""
    row = await fetch_one(conn, _GET, {"id": key_id})
    if row is None:
        return None
    return StoredKey(
        key_id=row.id,
        secret_hash=bytes(row.secret_hash),
        grants=grants_from_json(row.scopes),
        revoked=row.revoked_at is not None,
        sealed_sqs_secret=bytes(row.sqs_secret) if row.sqs_secret is not None else None,
    )


async def api_key_list(conn: Conn) -> list[ApiKey]:
    """Every key, oldest first."""
    return [_api_key(row) for row in await fetch(conn, _LIST, {})]


async def api_key_revoke(conn: Conn, key_id: str, now: datetime | None = None) -> ApiKey | None:
    """Revoke a key (idempotent); None when there is no such key."""
    row = await fetch_one(conn, _REVOKE, {"id": key_id, "now": now})
    return _api_key(row) if row else None


async def api_key_lock(conn: Conn) -> None:
    """Hold off other bootstraps and key writers until this transaction ends."""
    await execute(conn, _LOCK)


async def api_key_any(conn: Conn) -> bool:
    """Whether the table holds any key at all (revoked ones included)."""
    row = await fetch_one(conn, _ANY, {})
    return bool(row and row.found)


async def api_key_hold(conn: Conn, key_ids: Iterable[str]) -> set[str]:
    """Lock these keys' rows until this transaction ends; the ids of those that exist unrevoked."""
    return {row.id for row in await fetch(conn, _HOLD, {"ids": sorted(set(key_ids))}) if row.valid}
