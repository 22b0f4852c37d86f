"""Properties of the enqueue rules (app/service/enqueue.py): repeats inside a batch against an
oracle written from its sentence, and the backfill's Arrow form of the same rule (rows.py
`_repeats`) against `repeats` on any list of dedup keys, keyless entries among them."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import example, given
from hypothesis import strategies as st

from app.pipeline.backfill.rows import _repeats
from app.service.enqueue import dedup_key_text, repeats
from tests.property.profile import PROPERTY

# Few distinct keys, so that lists repeat some; the tab is the one of dedup_key_text.
KEYS = st.lists(st.none() | st.text(alphabet="ab\t", max_size=3), max_size=40)


@PROPERTY
@given(KEYS)
@example([])
@example([None, None])
@example(["", None, ""])
def test_the_first_entry_with_a_key_is_enqueued_and_later_ones_repeat_it(keys: list[str | None]) -> None:
    found = repeats(keys)

    oracle = {i: keys.index(k) for i, k in enumerate(keys) if k is not None and keys.index(k) < i}
    assert found == oracle


@PROPERTY
@given(KEYS, st.integers(min_value=0, max_value=40))
@example([dedup_key_text("", "a"), None, dedup_key_text("g", "a"), dedup_key_text("", "a")], 2)
def test_the_backfills_arrow_repeats_are_the_rule(keys: list[str | None], cut: int) -> None:
    expected = repeats(keys)
    cut = min(cut, len(keys))
    whole = pa.array(keys, pa.string())
    chunked = pa.chunked_array([pa.array(keys[:cut], pa.string()), pa.array(keys[cut:], pa.string())])

    for column in (whole, chunked):
        flags = _repeats(column)
        if not expected:
            assert flags is None
        else:
            assert flags is not None
            assert flags.to_pylist() == ["t" if i in expected else "f" for i in range(len(keys))]
