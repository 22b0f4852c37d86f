"""API keys: create, list, revoke, the admin key of the first start, the operator's key file, and
the verifier the auth middleware asks (with its short-lived per-process cache).

Key functions take a connection and run inside the caller's transaction. The `pqs keys` verbs
and the bench call them on a connection of their own (app.db.sessions.on_connection); the
service writes keys only through `KeyAdmin` (the /v1/keys operations), which calls the same functions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from app.access import EVERYTHING, Access, ApiKey, Grant, generate_key, hash_key, key_id_of, same_hash
from app.config import Settings
from app.db import keys as kdb
from app.db.engine import Database
from app.db.rows import Conn
from app.errors import GrantBeyondKey, KeyNotFound, KeyRevokesItself, Unauthorized, Unavailable
from app.sealing import SealedSecretError, ServerKey, ServerKeyError, generate_secret

log = logging.getLogger(__name__)
ADMIN_KEY_NAME = "admin"
# A key id is 48 random bits: a clash is rare enough that a few draws always do.
MAX_ID_DRAWS = 5
# Verdicts kept per process. Valid keys and refused ones are kept apart: a flood of made-up keys
# (anyone can send them) empties only the refusals, never evicting a valid key whose eviction
# would cost a lookup on the next real request.
MAX_CACHED_KEYS = 10_000


SQS_SERVER_KEY_FILE = "sqs-server.key"
KEY_ID = re.compile(r"[0-9a-f]{12}")


def server_key_for(settings: Settings) -> ServerKey:
    """The key SQS secrets are sealed under: the PQS_SQS_SERVER_KEY setting, else the 0600 file in
    the data directory, made there on first use (ServerKeyError when either is unusable)."""
    if settings.sqs_server_key is not None:
        return ServerKey.from_text(settings.sqs_server_key.get_secret_value())
    return ServerKey.load_or_create(settings.data_dir / SQS_SERVER_KEY_FILE)


async def create_key(
    conn: Conn,
    name: str,
    grants: tuple[Grant, ...],
    *,
    random_bytes: Callable[[int], bytes] = secrets.token_bytes,
    now: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Make and store a key without an SQS secret; returns it with the key string, which exists
    nowhere else."""
    stored, key, _ = await _create(conn, name, grants, None, random_bytes, now)
    return stored, key


async def create_signing_key(
    conn: Conn,
    name: str,
    grants: tuple[Grant, ...],
    server_key: ServerKey,
    *,
    random_bytes: Callable[[int], bytes] = secrets.token_bytes,
    now: datetime | None = None,
) -> tuple[ApiKey, str, str]:
    """Make and store a key with an SQS secret access key (stored sealed under `server_key`);
    returns it with the key string and the secret, which exist nowhere else."""
    stored, key, secret = await _create(conn, name, grants, server_key, random_bytes, now)
    assert secret is not None
    return stored, key, secret


async def _create(
    conn: Conn,
    name: str,
    grants: tuple[Grant, ...],
    server_key: ServerKey | None,
    random_bytes: Callable[[int], bytes],
    now: datetime | None,
) -> tuple[ApiKey, str, str | None]:
    if not grants:
        raise ValueError("a key needs at least one scope")
    secret = generate_secret() if server_key is not None else None
    for _ in range(MAX_ID_DRAWS):
        new = generate_key(random_bytes)
        sealed = server_key.seal(secret, new.key_id) if server_key is not None and secret is not None else None
        stored = await kdb.api_key_insert(conn, new, name, grants, now, sealed)
        if stored is not None:
            return stored, new.key, secret
    raise RuntimeError(f"no free key id after {MAX_ID_DRAWS} draws")


async def list_keys(conn: Conn) -> list[ApiKey]:
    """Every key, oldest first (no secrets: they are not stored)."""
    return await kdb.api_key_list(conn)


async def revoke_key(conn: Conn, key_id: str, now: datetime | None = None) -> ApiKey:
    """Revoke a key by its id (again: no change); KeyNotFound when there is none."""
    revoked = await kdb.api_key_revoke(conn, key_id, now)
    if revoked is None:
        raise KeyNotFound(key_id)
    return revoked


async def bootstrap_admin_key(conn: Conn, store: Callable[[str], None]) -> str | None:
    """On the first start (no key at all, revoked ones included): make a key with every action on
    every queue, `store` it (inside the transaction, so a failed write leaves no key behind) and
    return it. None when keys exist already."""
    await kdb.api_key_lock(conn)
    if await kdb.api_key_any(conn):
        return None
    _, key = await create_key(conn, ADMIN_KEY_NAME, EVERYTHING)
    store(key)
    return key


def write_key_file(path: Path, key: str) -> None:
    """Write `key` to `path`, readable by its owner only (0600), replacing the file atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # also when the file was left behind by a crash with other bits
        with os.fdopen(fd, "w") as out:
            out.write(key + "\n")
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def read_key_file(path: Path) -> str | None:
    """The key stored in `path`, or None when it is missing or unreadable."""
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


class KeyVerifier:
    """Turns a presented key into its Access, or None for an unknown, revoked or malformed key.

    Verdicts are kept per process for `ttl` seconds, keyed by the key's SHA-256 (the key itself is
    not kept): a hit costs one hash and a dict lookup, a miss one primary-key SELECT. A key
    revoked by another process (`pqs keys revoke`) is refused here within `ttl` seconds.

    The SQS credentials of a key id (`credentials`) are kept the same way, apart: an SQS request
    names its key id and proves the secret with a signature the caller checks."""

    def __init__(
        self,
        db: Database,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
        server_key: Callable[[], ServerKey] | None = None,
    ) -> None:
        self.db = db
        self.ttl = ttl
        self.clock = clock
        self.server_key = server_key
        self._valid: dict[bytes, tuple[Access, float]] = {}
        self._refused: dict[bytes, float] = {}
        self._signers: dict[str, tuple[tuple[Access, str], float]] = {}
        self._refused_signers: dict[str, float] = {}
        # Counts `forget`s: a lookup that was under way when a key was forgotten may have read it
        # before its revocation, and its verdict is not kept (it would trust the key for `ttl`).
        self._forgets = 0

    async def credentials(self, key_id: str) -> tuple[Access, str] | None:
        """The Access and SQS secret access key of a key id; None for an unknown or revoked key,
        or one without an SQS secret. Raises Unavailable when the database cannot be asked."""
        now = self.clock()
        hit = self._signers.get(key_id)
        if hit is not None and hit[1] > now:
            return hit[0]
        if self._refused_signers.get(key_id, 0.0) > now:
            return None
        forgets = self._forgets
        found = await self._load_signer(key_id)
        if found is not None and forgets != self._forgets:
            return found  # a key forgotten meanwhile: this verdict may predate its revocation
        # Apart, as in verify(): made-up key ids (anyone can send them with a current date) fill
        # and empty only the refusals, never evicting a signer that would then cost a lookup.
        if found is None:
            if len(self._refused_signers) >= MAX_CACHED_KEYS:
                self._refused_signers.clear()
            self._refused_signers[key_id] = now + self.ttl
        else:
            if len(self._signers) >= MAX_CACHED_KEYS:
                self._signers.clear()
            self._signers[key_id] = (found, now + self.ttl)
        return found

    async def _load_signer(self, key_id: str) -> tuple[Access, str] | None:
        if self.server_key is None or KEY_ID.fullmatch(key_id) is None:
            return None
        stored = await self.db.run_single(lambda conn: kdb.api_key_get(conn, key_id))
        if stored is None or stored.revoked or stored.sealed_sqs_secret is None:
            return None
        try:
            secret = self.server_key().open(stored.sealed_sqs_secret, key_id)
        except SealedSecretError:
            return None  # sealed under another server key: this key cannot sign here
        return Access(stored.key_id, stored.grants), secret

    def forget(self, key_id: str) -> None:
        """Drop what this process holds of a key id (it was just revoked here): its next request
        is looked up again. Other processes refuse it within `ttl` seconds."""
        self._forgets += 1
        self._valid = {digest: hit for digest, hit in self._valid.items() if hit[0].key_id != key_id}
        self._signers.pop(key_id, None)

    async def verify(self, key: str) -> Access | None:
        """The key's Access; raises Unavailable when the database cannot be asked."""
        digest = hash_key(key)
        now = self.clock()
        hit = self._valid.get(digest)
        if hit is not None and hit[1] > now:
            return hit[0]
        if self._refused.get(digest, 0.0) > now:
            return None
        forgets = self._forgets
        access = await self._load(key, digest)
        if access is not None and forgets != self._forgets:
            return access  # a key forgotten meanwhile: this verdict may predate its revocation
        if access is None:
            if len(self._refused) >= MAX_CACHED_KEYS:
                self._refused.clear()
            self._refused[digest] = now + self.ttl
        else:
            if len(self._valid) >= MAX_CACHED_KEYS:
                self._valid.clear()
            self._valid[digest] = (access, now + self.ttl)
        return access

    async def _load(self, key: str, digest: bytes) -> Access | None:
        key_id = key_id_of(key)
        if key_id is None:
            return None
        stored = await self.db.run_single(lambda conn: kdb.api_key_get(conn, key_id))
        if stored is None or not same_hash(stored.secret_hash, digest) or stored.revoked:
            return None
        return Access(stored.key_id, stored.grants)


class KeyAdmin:
    """The keys REST operations (`/v1/keys`): the functions above, each in a transaction of its own,
    with the rules a key acting on keys obeys (app/access.py): it grants nothing it does not hold
    (GrantBeyondKey), it does not revoke itself (KeyRevokesItself: the dashboard would sign out
    under its user, and the last key that administers everything could go with it), and it is
    valid in the database, not only in a process' cache (`_hold`)."""

    def __init__(self, db: Database, verifier: KeyVerifier, server_key: Callable[[], ServerKey]) -> None:
        self.db = db
        self.verifier = verifier
        self.server_key = server_key

    async def _hold(self, conn: Conn, caller: Access, *others: str) -> None:
        """Lock the caller's key row (and `others'`) until commit; Unauthorized when the caller was
        revoked meanwhile. A verdict another process revoked stays in this one's cache for up to
        PQS_AUTH_CACHE_SECONDS; a key made in that time would outlive the revocation."""
        if not caller.key_id:
            return  # access control off (OPEN): no key acts
        valid = await kdb.api_key_hold(conn, (caller.key_id, *others))
        if caller.key_id not in valid:
            self.verifier.forget(caller.key_id)
            raise Unauthorized("unknown or revoked API key")

    async def keys(self, caller: Access) -> list[ApiKey]:
        """Every key, oldest first."""

        async def work(conn: Conn) -> list[ApiKey]:
            await self._hold(conn, caller)
            return await list_keys(conn)

        return await self.db.run(work)

    async def create(self, maker: Access, name: str, grants: tuple[Grant, ...]) -> tuple[ApiKey, str, str]:
        """A key holding at most what `maker` holds, with its SQS secret: (key, key string, secret)."""
        for wanted in grants:
            if not maker.covers(wanted):
                raise GrantBeyondKey(str(wanted))
        try:
            server_key = self.server_key()
        except (ServerKeyError, OSError) as exc:
            # Its path and mode are the operator's business: the log has them, the answer not.
            log.error("the SQS server key cannot be used: %s", exc)
            raise Unavailable("the SQS server key cannot be used: see the service's log") from None

        async def work(conn: Conn) -> tuple[ApiKey, str, str]:
            await self._hold(conn, maker)
            return await create_signing_key(conn, name, grants, server_key)

        return await self.db.run(work)

    async def revoke(self, caller: Access, key_id: str) -> ApiKey:
        """Revoke another key (again: no change), and stop trusting it in this process at once."""
        if KEY_ID.fullmatch(key_id) is None:
            raise KeyNotFound(key_id)  # before it reaches SQL: a path can hold a NUL
        if key_id == caller.key_id:
            raise KeyRevokesItself(key_id)

        async def work(conn: Conn) -> ApiKey:
            await self._hold(conn, caller, key_id)
            return await revoke_key(conn, key_id)

        revoked = await self.db.run(work)
        self.verifier.forget(key_id)
        return revoked
