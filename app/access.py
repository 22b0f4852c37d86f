"""Access control: API keys, their scopes, and what a scope allows. Pure: no I/O, imports nothing
of ours (the database side is `app.db.keys`, the HTTP side `app.api.auth`).

A key reads `pqs_<key id>_<secret>`:

- the key id is 12 hex digits, public: it names the key in `pqs keys list` and `revoke`, and it is
  how the service finds the key's row (one primary-key lookup);
- the secret is 256 random bits from `secrets`, in base64url (43 characters).

Only SHA-256 of the whole key is stored, never the key. A slow password hash (bcrypt, argon2) is
there to make guessing a low-entropy human password expensive; a 256-bit random secret cannot be
guessed at any hash speed, so a fast hash loses nothing and keeps a cache miss cheap. The stored
and the presented hashes are compared with `hmac.compare_digest` (constant time).

A key has grants: a queue-name glob (`fnmatch.fnmatchcase` syntax: `*`, `?`, `[...]`) and the
actions it allows on the queues it matches:

    send     POST /messages, /messages/batch
    receive  POST /messages/receive
    ack      POST /messages/ack, /nack, /visibility; DELETE /messages/{receipt_handle}
    read     look without changing: get (stats), peek, and listing (which names every queue, so it
             needs a pattern that matches every name: `*`); SQS's read-only queue actions
    admin    queues: create, change, delete, purge, redrive, and the API keys (`*` only); it
             implies `read` (IMPLIED), so an admin key looks at what it administers

A `read` key is for people who should only look (the dashboard's read-only view). An action that
another implies is granted wherever that one is, whether or not the grant names it.

A key made through the API (`POST /v1/keys`) never holds more than its maker's (`Access.covers`):
each action of each new grant must be allowed to the maker on every name the new pattern matches.

What an operation needs (`Need`) is one of these actions, or `ANY_ACTION`: some action on the
queue, whichever. Only naming a queue's URL needs no more (SQS's GetQueueUrl, which a worker that
may only send to a queue, or only receive from it, calls before anything else).
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

Action = Literal["send", "receive", "ack", "read", "admin"]
ACTIONS: tuple[Action, ...] = ("send", "receive", "ack", "read", "admin")
# The actions a granted action brings with it.
IMPLIED: Final[dict[Action, frozenset[Action]]] = {"admin": frozenset({"read"})}
ANY_ACTION: Final = "any"
Need = Action | Literal["any"]
# What an operation about the calling key itself needs (`GET /v1/keys/self`): a valid key, and no
# action on any queue. Never a grant's action, never a Need of a queue.
ANY_KEY: Final = "key"
Requirement = Action | Literal["key"]
KEY_ID_BYTES = 6
SECRET_BYTES = 32
KEY_FORMAT = re.compile(r"pqs_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
# Queue names are [A-Za-z0-9_-] with an optional `.fifo`; a pattern adds the glob characters.
PATTERN = re.compile(r"[A-Za-z0-9_.*?!\[\]-]{1,200}")


class InvalidScope(ValueError):
    """A grant that cannot be stored (unknown action, bad pattern, wrong shape)."""


@dataclass(frozen=True)
class Grant:
    """The actions allowed on the queues whose names match the glob `queues`."""

    queues: str
    actions: frozenset[Action]

    def to_json(self) -> dict[str, Any]:
        """The grant as stored (jsonb): actions in their canonical order."""
        return {"queues": self.queues, "actions": [a for a in ACTIONS if a in self.actions]}

    def __str__(self) -> str:
        return f"{self.queues}:{','.join(self.to_json()['actions'])}"


EVERYTHING = (Grant("*", frozenset(ACTIONS)),)


def grant(queues: str, actions: Iterable[str]) -> Grant:
    """A checked grant; `*` among the actions means all of them."""
    if not isinstance(queues, str) or not PATTERN.fullmatch(queues):
        raise InvalidScope(f"queue pattern {queues!r}: 1-200 of [A-Za-z0-9_.-] and the glob characters *?[]!")
    wanted = set(actions)
    if "*" in wanted:
        wanted = set(ACTIONS)
    unknown = sorted(wanted - set(ACTIONS))
    if unknown or not wanted:
        raise InvalidScope(f"actions {sorted(wanted)!r}: one or more of {', '.join(ACTIONS)} (or *)")
    return Grant(queues, frozenset(a for a in ACTIONS if a in wanted))


def parse_grant(text: str) -> Grant:
    """A grant written `PATTERN:ACTION[,ACTION...]`, e.g. `jobs-*:send,receive` or `*:*`."""
    queues, colon, actions = text.rpartition(":")
    if not colon:
        raise InvalidScope(f"scope {text!r}: write it PATTERN:ACTIONS, e.g. 'jobs-*:send,receive'")
    return grant(queues, [a.strip() for a in actions.split(",") if a.strip()])


def grants_from_json(value: Any) -> tuple[Grant, ...]:
    """The grants of a stored `scopes` document (a list of {queues, actions})."""
    if not isinstance(value, list) or not value:
        raise InvalidScope("scopes must be a non-empty list")
    found = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"queues", "actions"} or not isinstance(item["actions"], list):
            raise InvalidScope(f"scope {item!r}: expected {{'queues': PATTERN, 'actions': [...]}}")
        found.append(grant(item["queues"], item["actions"]))
    return tuple(found)


def grants_to_json(grants: Iterable[Grant]) -> list[dict[str, Any]]:
    """The `scopes` document of these grants."""
    return [g.to_json() for g in grants]


@dataclass(frozen=True)
class NewKey:
    """A key just made: `key` is shown once, `secret_hash` is what gets stored."""

    key_id: str
    key: str
    secret_hash: bytes


def generate_key(random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> NewKey:
    """A new random key (`random_bytes` is injectable for tests)."""
    key_id = random_bytes(KEY_ID_BYTES).hex()
    secret = _base64url(random_bytes(SECRET_BYTES))
    key = f"pqs_{key_id}_{secret}"
    return NewKey(key_id, key, hash_key(key))


def _base64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def hash_key(key: str) -> bytes:
    """SHA-256 of the key (see the module docstring for why a fast hash is right here)."""
    return hashlib.sha256(key.encode()).digest()


def key_id_of(key: str) -> str | None:
    """The key id of a well-formed key; None for anything else."""
    match = KEY_FORMAT.fullmatch(key)
    return match[1] if match else None


def same_hash(stored: bytes, presented: bytes) -> bool:
    """Compare two key hashes in constant time."""
    return hmac.compare_digest(stored, presented)


@dataclass(frozen=True)
class ApiKey:
    """A key as stored, without its secret."""

    key_id: str
    name: str
    grants: tuple[Grant, ...]
    created_at: datetime
    revoked_at: datetime | None
    # Whether an SQS secret access key was issued with it (keys made before that have none).
    signs_sqs: bool = False


def expanded(actions: Iterable[Action]) -> frozenset[Action]:
    """`actions` with those they imply."""
    found = set(actions)
    return frozenset(found.union(*(IMPLIED.get(a, frozenset()) for a in found)))


GLOB_CHARACTERS = frozenset("*?[]!")


@dataclass(frozen=True)
class _Compiled:
    actions: frozenset[str]
    match: Callable[[str], object]
    matches_every_name: bool


class Access:
    """What one valid key may do, with its glob patterns compiled once."""

    __slots__ = ("_compiled", "grants", "key_id")

    def __init__(self, key_id: str, grants: tuple[Grant, ...]) -> None:
        self.key_id = key_id
        self.grants = grants
        self._compiled = tuple(
            # fnmatch.translate is what fnmatchcase compiles (and caches) on every call.
            _Compiled(expanded(g.actions), re.compile(fnmatch.translate(g.queues)).match, set(g.queues) == {"*"})
            for g in grants
        )

    def allows(self, need: Need, queue: str | None) -> bool:
        """Whether `need` (an action, or ANY_ACTION) on `queue` is granted; `queue` None means
        every queue (listing)."""
        for item in self._compiled:
            granted = need == ANY_ACTION or need in item.actions
            if granted and (item.matches_every_name if queue is None else item.match(queue)):
                return True
        return False

    def covers(self, wanted: Grant) -> bool:
        """Whether this key holds everything `wanted` grants: each of its actions (with those they
        imply) on every name its pattern can match. Conservative where globs meet: a pattern is
        covered by one that matches every name, by the same pattern, or (a literal name) by any
        pattern that matches it."""
        literal = not GLOB_CHARACTERS.intersection(wanted.queues)
        for action in expanded(wanted.actions):
            if not any(
                action in item.actions
                and (item.matches_every_name or pattern == wanted.queues or (literal and item.match(wanted.queues)))
                for item, pattern in zip(self._compiled, (g.queues for g in self.grants), strict=True)
            ):
                return False
        return True
