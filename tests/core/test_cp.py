"""CP zigzag slicing and reassembly share one offset function: the round trip is the identity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.base.errors import CpLayoutError
from miles_tui.core.dump import slice_response
from miles_tui.core.dump.cp import assemble_response, response_ranges, slice_width, widths_match


@st.composite
def sequences(draw: st.DrawFn) -> tuple[int, int, int, str, int | None]:
    cp_size = draw(st.integers(1, 8))
    prompt = draw(st.integers(1, 300))
    response = draw(st.integers(1, 600))
    total = prompt + response
    qkv = draw(st.sampled_from(["thd", "bshd"]))
    max_seq_len = None
    if qkv == "bshd":
        max_seq_len = total + draw(st.integers(0, 256))
    return total, response, cp_size, qkv, max_seq_len


@given(sequences())
@settings(max_examples=400, deadline=None)
def test_slice_for_every_rank_then_assemble_is_the_identity(case: tuple[int, int, int, str, int | None]) -> None:
    total, response, cp_size, qkv, max_seq_len = case
    values = np.random.default_rng(total * 31 + response).normal(size=response)
    slices = {
        rank: slice_response(values, total, rank, cp_size, qkv, max_seq_len)  # type: ignore[arg-type]
        for rank in range(cp_size)
    }
    assert sum(len(s) for s in slices.values()) == response
    rebuilt = assemble_response(slices, total, response, cp_size, qkv, max_seq_len)  # type: ignore[arg-type]
    assert np.array_equal(rebuilt, values)
    widths = [len(slices[r]) for r in range(cp_size)]
    assert widths_match(widths, total, response, qkv, max_seq_len)  # type: ignore[arg-type]


@given(sequences())
@settings(max_examples=200, deadline=None)
def test_assembling_a_partial_group_is_refused(case: tuple[int, int, int, str, int | None]) -> None:
    total, response, cp_size, qkv, max_seq_len = case
    if cp_size == 1:
        return
    values = np.arange(response, dtype=np.float64)
    slices = {
        rank: slice_response(values, total, rank, cp_size, qkv, max_seq_len)  # type: ignore[arg-type]
        for rank in range(cp_size)
    }
    del slices[cp_size - 1]
    with pytest.raises(CpLayoutError, match="partial CP group"):
        assemble_response(slices, total, response, cp_size, qkv, max_seq_len)  # type: ignore[arg-type]


def test_a_slice_of_the_wrong_width_is_refused() -> None:
    total, response = 40, 30
    slices = {0: np.zeros(slice_width(total, response, 0, 2) + 1), 1: np.zeros(slice_width(total, response, 1, 2))}
    with pytest.raises(CpLayoutError, match="slicing rule gives it"):
        assemble_response(slices, total, response, 2)


def test_the_zigzag_matches_the_spec_by_hand() -> None:
    # T=10, R=6, P=4, C=2: cs=ceil(10/4)=3; chunks [0,3) [3,6) [6,9) [9,12).
    # Rank 0 holds chunks 0 and 3: logits [3,3)=empty ... [max(0,3), min(3,9)) = [3,3) empty, [9,9) empty.
    # Rank 1 holds chunks 1 and 2: [3,6) and [6,9) -> response [0,3) and [3,6).
    assert response_ranges(10, 6, 0, 2) == ((0, 0), (0, 0))
    assert response_ranges(10, 6, 1, 2) == ((0, 3), (3, 6))
    # T=16, R=12, P=4, C=2: cs=4; rank0: [0,4)->[3,4)->resp[0,1); [12,16)->[12,15)->resp[9,12)
    assert response_ranges(16, 12, 0, 2) == ((0, 1), (9, 12))
    assert response_ranges(16, 12, 1, 2) == ((1, 5), (5, 9))


def test_widths_that_fit_thd_by_coincidence_do_not_prove_bshd() -> None:
    total, response, max_seq_len = 37, 30, 80
    thd = [slice_width(total, response, r, 2, "thd") for r in range(2)]
    bshd = [slice_width(total, response, r, 2, "bshd", max_seq_len) for r in range(2)]
    assert thd != bshd
    assert widths_match(thd, total, response, "thd")
    assert not widths_match(thd, total, response, "bshd", max_seq_len)
