"""Secret access keys kept so that a copy of the database alone cannot sign requests.

SigV4 is an HMAC: to verify a signature the server needs the secret itself, not a hash of it as
for PQS's bearer keys. So each secret is stored sealed: AES-256-GCM under a server key that never
enters the database, with the PQS key id as associated data, so a sealed secret moved to another
key's row does not open. Whoever has the database but not the server key holds ciphertext only.

The server key comes from a setting (`ServerKey.from_text`, 32 bytes in URL-safe base64) or from
a file in the data directory, created on first use with mode 0600 (`ServerKey.load_or_create`).
A file readable by anyone but its owner, owned by another user, or of the wrong length is refused
with the reason, rather than used or replaced: replacing it would orphan every sealed secret.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
_NONCE_BYTES = 12
# The first byte of every sealed secret: the format, so a later one can be told apart.
_VERSION = b"\x01"
_CONTEXT = b"pqs sqs secret access key\x00"
# A secret access key: 240 random bits, 40 characters of URL-safe base64 (AWS's are 40 too).
SECRET_BYTES = 30


def generate_secret() -> str:
    """A new secret access key (shown once by `pqs keys create`, stored only sealed)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


class ServerKeyError(Exception):
    """The server key cannot be had; the message says why and what to do."""


class SealedSecretError(Exception):
    """A sealed secret that does not open: another key id, another server key, or altered bytes."""


class ServerKey:
    """The key that seals secret access keys at rest."""

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ServerKeyError(f"a server key is {KEY_BYTES} bytes, not {len(key)}")
        self._aead = AESGCM(key)

    def __repr__(self) -> str:
        return "ServerKey(<hidden>)"

    @classmethod
    def generate(cls) -> ServerKey:
        return cls(secrets.token_bytes(KEY_BYTES))

    @classmethod
    def from_text(cls, text: str) -> ServerKey:
        """A key given as a setting: 32 bytes in URL-safe base64 (padding optional)."""
        try:
            key = base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4))
        except (binascii.Error, ValueError):
            raise ServerKeyError("the server key setting is not URL-safe base64") from None
        if len(key) != KEY_BYTES:
            raise ServerKeyError(f"the server key setting must decode to {KEY_BYTES} bytes, not {len(key)}")
        return cls(key)

    @classmethod
    def load_or_create(cls, path: Path) -> ServerKey:
        """The key in `path`, made there first (0600, atomically) when there is none."""
        try:
            return cls(_read_key_file(path))
        except FileNotFoundError:
            pass
        _create_key_file(path)
        return cls(_read_key_file(path))

    def seal(self, secret: str, key_id: str) -> bytes:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, secret.encode(), _associated(key_id))
        return _VERSION + nonce + sealed

    def open(self, sealed: bytes, key_id: str) -> str:
        if sealed[:1] != _VERSION or len(sealed) < 1 + _NONCE_BYTES + 16:
            raise SealedSecretError("not a sealed secret of a format this version knows")
        nonce, body = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
        try:
            return self._aead.decrypt(nonce, body, _associated(key_id)).decode()
        except InvalidTag:
            raise SealedSecretError(
                f"the secret of key {key_id} does not open: sealed for another key, "
                "under another server key, or altered"
            ) from None


def _associated(key_id: str) -> bytes:
    return _VERSION + _CONTEXT + key_id.encode()


def _read_key_file(path: Path) -> bytes:
    # O_NOFOLLOW: a symlink planted at the key's path is refused, not followed.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ServerKeyError(f"{path} is a symbolic link; the server key must be a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ServerKeyError(f"{path} is not a regular file")
        if info.st_uid != os.getuid():
            raise ServerKeyError(f"{path} belongs to user {info.st_uid}, not to this server's user {os.getuid()}")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise ServerKeyError(
                f"{path} has permissions {mode:04o}: the server key must be readable by its owner only "
                f"(chmod 600 {path})"
            )
        if info.st_size != KEY_BYTES:
            raise ServerKeyError(
                f"{path} holds {info.st_size} bytes, not the {KEY_BYTES} of a server key: it is damaged or "
                "not a server key; restore it from a backup (a new key would not open the stored secrets)"
            )
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise ServerKeyError(f"{path} changed while it was read")
    return key


def _create_key_file(path: Path) -> None:
    """Write a new key beside `path` and link it into place: readers see no key or a whole one,
    and of two servers starting at once, the second links nothing and reads the first's key."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(8)}.new")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
