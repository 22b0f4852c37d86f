"""The receipt handle codec."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from app.errors import InvalidReceiptHandle
from app.service import receipts


def test_round_trip() -> None:
    lease = uuid.uuid4()
    handle = receipts.encode(123_456_789, lease)
    assert len(handle) == receipts.HANDLE_LENGTH
    assert receipts.decode(handle) == (123_456_789, lease)


def test_distinct_leases_give_distinct_handles() -> None:
    assert receipts.encode(7, uuid.uuid4()) != receipts.encode(7, uuid.uuid4())


@pytest.mark.parametrize(
    "handle",
    ["", "junk", "A" * 34, "A" * 33 + "!", "é" * 34, receipts.encode(1, uuid.UUID(int=0))[:-1] + "=="],
)
def test_malformed_handles_are_refused(handle: str) -> None:
    with pytest.raises(InvalidReceiptHandle):
        receipts.decode(handle)


def test_every_single_character_change_is_refused_or_decodes_differently() -> None:
    lease = uuid.uuid4()
    handle = receipts.encode(42, lease)
    for i in range(len(handle)):
        for replacement in "A_-z9":
            changed = handle[:i] + replacement + handle[i + 1 :]
            if changed == handle:
                continue
            with contextlib.suppress(InvalidReceiptHandle):
                assert receipts.decode(changed) != (42, lease)
