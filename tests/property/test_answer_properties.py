"""The hot routes encode their answers from plain dicts (app/api/routes_messages.py); they must be
the very bytes the documented response models give (`model_dump_json`), for any stored body,
attributes, ids and times."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.api.routes_messages import batch_answer, receive_answer, send_answer, send_batch_answer
from app.api.schemas import (
    BatchFailure,
    BatchResponse,
    EntryOk,
    MessageOut,
    ReceiveResponse,
    SendBatchResponse,
    SendBatchResult,
    SendResponse,
)
from app.domain import EntryFailure, ReceivedMessage, SendResult
from tests.property.profile import PROPERTY

# What a body can be once stored (jsonb): no NUL, no lone surrogate, finite numbers.
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=False, allow_infinity=False), TEXT
)
BODIES = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(TEXT, children, max_size=4)),
    max_leaves=20,
)
ZONES = st.sampled_from([UTC, timezone(timedelta(hours=1)), timezone(timedelta(hours=-5, minutes=-30))])
TIMES = st.builds(
    lambda t, zone: t.replace(tzinfo=UTC).astimezone(zone),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
    ZONES,
)
UUIDS = st.uuids()
MESSAGES = st.builds(
    ReceivedMessage,
    message_id=UUIDS,
    receipt_handle=TEXT,
    body=BODIES,
    group_id=st.none() | TEXT,
    dedup_id=st.none() | TEXT,
    sequence_number=st.integers(1, 2**63 - 1),
    receive_count=st.integers(1, 10**6),
    sent_at=TIMES,
    first_received_at=TIMES,
    attributes=st.dictionaries(TEXT, TEXT, max_size=10),
)
RESULTS = st.builds(
    SendResult, message_id=UUIDS.map(str), sequence_number=st.integers(1, 2**63 - 1), duplicate=st.booleans()
)
FAILURES = st.builds(EntryFailure, code=TEXT, message=TEXT)


@PROPERTY
@given(st.lists(MESSAGES, max_size=5))
def test_receive_answer_is_the_models_json(messages: list[ReceivedMessage]) -> None:
    model = ReceiveResponse.model_construct(messages=[MessageOut.model_construct(**m.__dict__) for m in messages])
    assert receive_answer(messages) == model.model_dump_json().encode()


def _as_model(result: SendResult) -> dict[str, Any]:
    """A result's fields as the response model holds them (the message id as a UUID)."""
    return {**result.__dict__, "message_id": uuid.UUID(result.message_id)}


@PROPERTY
@given(RESULTS)
def test_send_answer_is_the_models_json(result: SendResult) -> None:
    assert send_answer(result) == SendResponse.model_construct(**_as_model(result)).model_dump_json().encode()


@PROPERTY
@given(st.lists(st.tuples(TEXT, RESULTS | FAILURES), max_size=8, unique_by=lambda pair: pair[0]))
def test_send_batch_answer_is_the_models_json(entries: list[tuple[str, SendResult | EntryFailure]]) -> None:
    ok: list[Any] = []
    failed: list[Any] = []
    for entry_id, result in entries:
        if isinstance(result, EntryFailure):
            failed.append(BatchFailure.model_construct(id=entry_id, code=result.code, message=result.message))
        else:
            ok.append(SendBatchResult.model_construct(id=entry_id, **_as_model(result)))
    model = SendBatchResponse.model_construct(successful=ok, failed=failed)
    assert send_batch_answer([i for i, _ in entries], [r for _, r in entries]) == model.model_dump_json().encode()


@PROPERTY
@given(st.dictionaries(TEXT, st.none() | FAILURES, max_size=8))
def test_batch_answer_is_the_models_json(outcome: dict[str, EntryFailure | None]) -> None:
    model = BatchResponse.model_construct(
        successful=[EntryOk.model_construct(id=i) for i, f in outcome.items() if f is None],
        failed=[
            BatchFailure.model_construct(id=i, code=f.code, message=f.message)
            for i, f in outcome.items()
            if f is not None
        ],
    )
    assert batch_answer(outcome) == model.model_dump_json().encode()
