"""Message ids drawn in bulk are version-4 UUIDs in canonical text, as uuid4() gives them."""

from __future__ import annotations

import uuid
from collections import Counter

from app.ids import message_ids, random_uuid_hex


def test_ids_are_canonical_version_4_uuids() -> None:
    ids = message_ids(2000)
    assert len(ids) == 2000
    assert len(set(ids)) == 2000
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        assert str(parsed) == text  # lowercase, hyphenated: the text a send answers with


def test_the_random_bits_are_all_used() -> None:
    # Every hex digit outside the version nibble and the variant's top bits takes all its values:
    # a slip in the slicing (a fixed or repeated digit) fails this.
    ids = random_uuid_hex(4000)
    for position in range(32):
        digits = Counter(ids[i + position] for i in range(0, len(ids), 32))
        if position == 12:
            assert set(digits) == {"4"}
        elif position == 16:
            assert set(digits) == set("89ab")
        else:
            assert len(digits) == 16, (position, digits)


def test_zero_ids() -> None:
    assert message_ids(0) == []
