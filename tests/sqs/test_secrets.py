"""Sealed secret access keys: they open with their key id under their server key only, and the
server key file is made safely and refused when it is not safe."""

from __future__ import annotations

import base64
import os
import stat
import threading
from pathlib import Path

import pytest

from app.sealing import KEY_BYTES, SealedSecretError, ServerKey, ServerKeyError

SECRET = "zV6rN0l2Rj3Yc9wWqK1mT5uH8pXsA4dE7fGiJoLbQ_c"


def test_a_sealed_secret_opens_with_its_key_id() -> None:
    key = ServerKey.generate()
    sealed = key.seal(SECRET, "0123456789ab")
    assert SECRET.encode() not in sealed
    assert key.open(sealed, "0123456789ab") == SECRET
    assert key.seal(SECRET, "0123456789ab") != sealed  # a fresh nonce each time
    assert key.open(key.seal("sécret ✓", "k"), "k") == "sécret ✓"


def test_a_sealed_secret_does_not_open_for_another_key_id() -> None:
    key = ServerKey.generate()
    sealed = key.seal(SECRET, "0123456789ab")
    with pytest.raises(SealedSecretError):
        key.open(sealed, "ba9876543210")


def test_a_tampered_sealed_secret_does_not_open() -> None:
    key = ServerKey.generate()
    sealed = key.seal(SECRET, "k")
    for at in range(len(sealed)):
        altered = bytearray(sealed)
        altered[at] ^= 0x01
        with pytest.raises(SealedSecretError):
            key.open(bytes(altered), "k")
    for cut in (sealed[:-1], sealed[:20], b"", sealed + b"\x00"):
        with pytest.raises(SealedSecretError):
            key.open(cut, "k")


def test_a_sealed_secret_does_not_open_under_another_server_key() -> None:
    sealed = ServerKey.generate().seal(SECRET, "k")
    with pytest.raises(SealedSecretError):
        ServerKey.generate().open(sealed, "k")


def test_the_server_key_never_shows_in_its_repr() -> None:
    raw = bytes(range(KEY_BYTES))
    assert repr(ServerKey(raw)) == "ServerKey(<hidden>)"


def test_a_server_key_from_a_setting() -> None:
    raw = os.urandom(KEY_BYTES)
    text = base64.urlsafe_b64encode(raw).decode()
    sealed = ServerKey(raw).seal(SECRET, "k")
    assert ServerKey.from_text(text).open(sealed, "k") == SECRET
    assert ServerKey.from_text(text.rstrip("=")).open(sealed, "k") == SECRET
    for bad in ("", "not base64!", base64.urlsafe_b64encode(raw[:16]).decode()):
        with pytest.raises(ServerKeyError):
            ServerKey.from_text(bad)


# -- the key file ---------------------------------------------------------------------------------


def test_the_key_file_is_made_once_with_owner_only_permissions(tmp_path: Path) -> None:
    path = tmp_path / "data" / "sqs-server-key"
    first = ServerKey.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_size == KEY_BYTES
    assert [p.name for p in path.parent.iterdir()] == ["sqs-server-key"]  # no partial file left
    sealed = first.seal(SECRET, "k")
    assert ServerKey.load_or_create(path).open(sealed, "k") == SECRET


def test_servers_starting_together_share_one_key(tmp_path: Path) -> None:
    path = tmp_path / "sqs-server-key"
    keys: list[ServerKey] = []
    threads = [threading.Thread(target=lambda: keys.append(ServerKey.load_or_create(path))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(keys) == 8
    sealed = keys[0].seal(SECRET, "k")
    assert all(key.open(sealed, "k") == SECRET for key in keys)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o666])
def test_a_key_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "sqs-server-key"
    ServerKey.load_or_create(path)
    path.chmod(mode)
    with pytest.raises(ServerKeyError, match=f"permissions {mode:04o}.*chmod 600"):
        ServerKey.load_or_create(path)
    assert path.stat().st_size == KEY_BYTES  # refused, never replaced


@pytest.mark.parametrize("size", [0, 16, 31, 33, 64])
def test_a_key_file_of_the_wrong_length_is_refused(tmp_path: Path, size: int) -> None:
    path = tmp_path / "sqs-server-key"
    path.write_bytes(b"k" * size)
    path.chmod(0o600)
    with pytest.raises(ServerKeyError, match=f"holds {size} bytes"):
        ServerKey.load_or_create(path)
    assert path.read_bytes() == b"k" * size


def test_a_symlink_at_the_key_path_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(os.urandom(KEY_BYTES))
    target.chmod(0o600)
    link = tmp_path / "sqs-server-key"
    link.symlink_to(target)
    with pytest.raises(ServerKeyError, match="symbolic link"):
        ServerKey.load_or_create(link)


def test_a_directory_at_the_key_path_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sqs-server-key"
    path.mkdir(mode=0o700)
    with pytest.raises(ServerKeyError, match="not a regular file"):
        ServerKey.load_or_create(path)
