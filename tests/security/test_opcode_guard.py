"""The opcode guard walks any honest pickle, however its bytes are chunked, and refuses bombs at any split."""

from __future__ import annotations

import datetime
import itertools
import pickle
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.base.errors import CorruptFileError
from miles_tui.core.dump.pt.pt_archive import loads_pickle
from miles_tui.core.dump.pt.pt_guard import LoadBudget, OpcodeGuard

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=300)
    | st.binary(max_size=300)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=40)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=8), inner, max_size=8)
        | st.frozensets(st.integers(), max_size=8)
    ),
    max_leaves=200,
)


def _walk(data: bytes, cuts: list[int], budget: LoadBudget | None = None) -> OpcodeGuard:
    """Feed ``data`` to a guard in pieces cut at ``cuts``, as the record stream does."""
    guard = OpcodeGuard(budget or LoadBudget(len(data), Path("x.pkl")), len(data))
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
    for start, end in itertools.pairwise(bounds):
        piece = data[start:end]
        taken = guard.skip(len(piece))
        guard.feed(piece[taken:])
    return guard


@settings(max_examples=150, deadline=None)
@given(value=values, protocol=st.integers(min_value=0, max_value=5), cuts=st.lists(st.integers(0, 4000), max_size=12))
def test_honest_pickles_pass_the_guard_in_any_chunking(value: object, protocol: int, cuts: list[int]) -> None:
    data = pickle.dumps(value, protocol=protocol)
    guard = _walk(data, cuts)
    assert guard.done
    assert loads_pickle(data) == value


def test_a_bomb_is_refused_wherever_the_chunks_split_it() -> None:
    honest = pickle.dumps([list(range(300)), "x" * 500, 1.5], protocol=2)[:-1]
    bomb = honest + b"]r" + struct.pack("<I", 2**26) + b"."
    for cut in range(1, len(bomb)):
        with pytest.raises(CorruptFileError, match="memo index"):
            _walk(bomb, [cut])


def test_long_strings_are_skipped_across_chunks_without_being_read() -> None:
    data = pickle.dumps(["a" * 100_000, b"b" * 100_000, [0.5] * 5000], protocol=4)
    guard = _walk(data, list(range(0, len(data), 4096)))
    assert guard.done


def test_builtin_values_round_trip_through_the_stand_ins() -> None:
    value = {
        "set": {1, 2, 3},
        "frozenset": frozenset({"a"}),
        "bytes": b"\x00\xff" * 10,
        "bytearray": bytearray(b"xyz"),
        "complex": 1 + 2j,
        "slice": slice(1, 9, 2),
        "range": range(0, 10, 3),
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        "delta": datetime.timedelta(days=2, seconds=7),
    }
    for protocol in range(6):
        assert loads_pickle(pickle.dumps(value, protocol=protocol)) == value
