"""Properties of the receipt handle codec: every (sequence number, lease) round-trips, and any text
either decodes to a pair that encodes back to exactly that text or is refused as malformed."""

from __future__ import annotations

import string
from uuid import UUID

from hypothesis import example, given
from hypothesis import strategies as st

from app.errors import InvalidReceiptHandle
from app.service.receipts import HANDLE_LENGTH, decode, encode
from tests.property.profile import PROPERTY

SEQUENCE_NUMBERS = st.integers(min_value=0, max_value=2**63 - 1)
URLSAFE = string.ascii_letters + string.digits + "-_"
HANDLES = st.builds(encode, SEQUENCE_NUMBERS, st.uuids())


@PROPERTY
@given(SEQUENCE_NUMBERS, st.uuids())
@example(0, UUID(int=0)).via("smallest")
@example(2**63 - 1, UUID(int=2**128 - 1)).via("largest")
def test_every_delivery_round_trips(sequence_number: int, lease: UUID) -> None:
    handle = encode(sequence_number, lease)
    assert len(handle) == HANDLE_LENGTH
    assert set(handle) <= set(URLSAFE)
    assert decode(handle) == (sequence_number, lease)


def _mutated(handle: str, position: int, replacement: str) -> str:
    position %= len(handle)
    return handle[:position] + replacement + handle[position + 1 :]


# Mostly text of the right length, since anything else is refused on its length alone.
TEXT = st.one_of(
    st.text(),
    st.text(min_size=HANDLE_LENGTH, max_size=HANDLE_LENGTH),
    st.text(alphabet=URLSAFE + "+/=", min_size=HANDLE_LENGTH, max_size=HANDLE_LENGTH),
    st.builds(_mutated, HANDLES, st.integers(0, HANDLE_LENGTH - 1), st.sampled_from(URLSAFE + "+/=!é\n")),
)


@PROPERTY
@given(TEXT)
@example("A" * HANDLE_LENGTH).via("version 0")
@example(encode(5, UUID(int=7))[:-1] + "B").via("non-zero padding bits")
@example(encode(5, UUID(int=7)).replace("A", "+", 1)).via("standard base64 alphabet")
@example("/w" + "A" * 32).via("version 255")
def test_any_text_decodes_canonically_or_is_malformed(text: str) -> None:
    try:
        sequence_number, lease = decode(text)
    except InvalidReceiptHandle:
        return
    assert 0 <= sequence_number < 2**63
    assert encode(sequence_number, lease) == text
