"""Receipt handles: an opaque, URL-safe token naming one delivery of one message.

A handle packs a version byte, the message's sequence number and the lease id of the receive
that delivered it (25 bytes, base64url without padding: 34 characters). A later receive of the
same message gets a new lease, so an older handle no longer matches and is refused.
"""

from __future__ import annotations

import base64
import binascii
import struct
from uuid import UUID

from app.errors import InvalidReceiptHandle

_VERSION = 1
_LAYOUT = struct.Struct(">BQ16s")
HANDLE_LENGTH = 34


def encode(sequence_number: int, lease_id: UUID) -> str:
    """The handle for one delivery."""
    raw = _LAYOUT.pack(_VERSION, sequence_number, lease_id.bytes)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode(handle: str) -> tuple[int, UUID]:
    """(sequence number, lease id) of a handle; InvalidReceiptHandle for anything else."""
    if not isinstance(handle, str) or len(handle) != HANDLE_LENGTH or not handle.isascii():
        raise InvalidReceiptHandle("receipt handle is malformed")
    try:
        raw = base64.urlsafe_b64decode(handle + "==")
    except (binascii.Error, ValueError):
        raise InvalidReceiptHandle("receipt handle is malformed") from None
    if len(raw) != _LAYOUT.size or encode(*_unpack(raw)) != handle:
        raise InvalidReceiptHandle("receipt handle is malformed")
    return _unpack(raw)


def _unpack(raw: bytes) -> tuple[int, UUID]:
    version, sequence_number, lease = _LAYOUT.unpack(raw)
    if version != _VERSION or sequence_number >= 2**63:
        raise InvalidReceiptHandle("receipt handle is malformed")
    return sequence_number, UUID(bytes=lease)
