"""Dense numbering (columns._dense, dense_keys): the table path numbers rows exactly as np.unique's inverse does."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.telemetry.hours.columns import _dense, dense_keys

INTS = st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-5, 40), max_size=200)


@settings(max_examples=300, deadline=None)
@given(INTS)
def test_dense_is_the_rank_among_distinct_values(values: list[int]) -> None:
    array = np.array(values, np.int64)
    expected = np.unique(array, return_inverse=True)[1].ravel() if len(array) else np.zeros(0, np.int64)
    assert _dense(array).tolist() == expected.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 70), st.integers(-(2**40), 2**40)), max_size=120))
def test_dense_keys_are_equal_exactly_where_every_column_is(rows: list[tuple[int, int, int]]) -> None:
    columns = [np.array([r[i] for r in rows], np.int64) for i in range(3)]
    keys = dense_keys(*columns).tolist()
    for a in range(len(rows)):
        for b in range(len(rows)):
            assert (keys[a] == keys[b]) == (rows[a] == rows[b])
    assert sorted(set(keys)) == list(range(len(set(rows))))
