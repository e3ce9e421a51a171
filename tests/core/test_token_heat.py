"""A sample's statistic ranked into its own deciles: levels, cut points, and what is never a decile."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis import MASKED, NO_VALUE, TOP, HeatStatistic
from miles_tui.core.analysis.token_heat import token_heat
from miles_tui.core.dump import SERIES, FieldState, Run, TokenView
from miles_tui.core.dump.token_view import token_view


def view_of(
    series: dict[str, npt.ArrayLike],
    mask: list[int] | None = None,
    states: dict[str, FieldState] | None = None,
    prompt: int = 3,
) -> TokenView:
    arrays = {name: np.asarray(values, dtype=np.float64) for name, values in series.items()}
    length = len(next(iter(arrays.values()))) if arrays else len(mask or [])
    full = {name: arrays.get(name) for name in SERIES}
    given_states = states or {}
    state = {n: given_states.get(n, FieldState.OK if full[n] is not None else FieldState.NOT_DUMPED) for n in SERIES}
    loss_mask = None if mask is None else np.asarray(mask, dtype=np.int64)
    return TokenView(1, 0, False, tuple(range(prompt + length)), prompt, loss_mask, full, state)


def test_distinct_values_fall_into_their_deciles_and_the_top_is_above_the_90th_percentile() -> None:
    values = np.arange(100.0)[::-1]  # position p holds 99 - p
    heat = token_heat(view_of({"entropy": values}), HeatStatistic.ENTROPY)
    assert heat.state is FieldState.OK and heat.counted == 100
    assert heat.low == 0.0 and heat.high == 99.0 and heat.spread
    np.testing.assert_allclose(heat.cuts, [9.9, 19.8, 29.7, 39.6, 49.5, 59.4, 69.3, 79.2, 89.1])
    assert heat.top_cut == pytest.approx(89.1)
    np.testing.assert_array_equal(np.flatnonzero(heat.top()), np.arange(10))  # values 99 … 90
    np.testing.assert_array_equal(heat.levels, (99 - np.arange(100)) // 10)


def test_masked_positions_are_never_a_decile_and_do_not_move_the_cuts() -> None:
    values = [1.0, 2.0, 1e9, 3.0, np.nan, 4.0]
    mask = [1, 1, 0, 1, 0, 1]
    heat = token_heat(view_of({"advantages": values}, mask), HeatStatistic.ADVANTAGE)
    assert heat.levels[2] == MASKED and heat.levels[4] == MASKED
    assert np.isnan(heat.values[2])  # the masked value is not read as the statistic
    assert heat.high == 4.0 and heat.counted == 4
    assert heat.levels[5] == TOP and not heat.top()[2]


def test_a_trained_position_without_a_value_is_no_value_and_infinities_rank_at_the_ends() -> None:
    values = [0.5, np.nan, np.inf, -np.inf, 0.1, 0.2, 0.3]
    heat = token_heat(view_of({"entropy": values}), HeatStatistic.ENTROPY)
    assert heat.levels[1] == NO_VALUE
    assert heat.levels[2] == TOP and heat.levels[3] == 0
    assert heat.counted == 4 and heat.high == 0.5  # cut over finite values only


def test_lp_diff_is_ranked_by_its_magnitude() -> None:
    diff = [0.01, -0.9, 0.02, 0.03, -0.01, 0.0, 0.04, 0.05, 0.01, 0.02, 0.03]
    heat = token_heat(view_of({"lp_diff": diff}), HeatStatistic.LP_DIFF)
    assert heat.values[1] == 0.9 and heat.levels[1] == TOP
    assert list(np.flatnonzero(heat.top())) == [1]
    assert heat.low == 0.0


def test_the_same_value_everywhere_has_no_top_decile() -> None:
    heat = token_heat(view_of({"advantages": np.full(40, 0.866)}, [1] * 30 + [0] * 10), HeatStatistic.ADVANTAGE)
    assert not heat.spread and heat.low == heat.high == 0.866
    assert not heat.top().any()
    assert set(heat.levels[:30].tolist()) == {0} and set(heat.levels[30:].tolist()) == {MASKED}


def test_an_unreadable_or_missing_series_is_no_value_at_every_trained_position() -> None:
    mask = [1, 0, 1, 1]
    unreadable = view_of({"entropy": [1.0, 2.0, 3.0, 4.0]}, mask, {"lp_diff": FieldState.UNREADABLE})
    for statistic, state in ((HeatStatistic.LP_DIFF, FieldState.UNREADABLE), (HeatStatistic.ADVANTAGE, None)):
        heat = token_heat(unreadable, statistic)
        assert heat.state is (state or FieldState.NOT_DUMPED)
        assert heat.levels.tolist() == [NO_VALUE, MASKED, NO_VALUE, NO_VALUE]
        assert heat.cuts == () and heat.top_cut is None and heat.counted == 0 and not heat.spread
        assert np.isnan(heat.values).all()


def test_no_finite_value_at_all_gives_no_cuts() -> None:
    heat = token_heat(view_of({"entropy": [np.nan, np.nan, 1.0]}, [1, 1, 0]), HeatStatistic.ENTROPY)
    assert heat.levels.tolist() == [NO_VALUE, NO_VALUE, MASKED] and heat.cuts == () and heat.low is None
    infinite = token_heat(view_of({"entropy": [np.inf, -np.inf, np.nan]}), HeatStatistic.ENTROPY)
    assert infinite.levels.tolist() == [TOP, 0, NO_VALUE] and infinite.cuts == ()


def test_an_empty_response() -> None:
    heat = token_heat(view_of({"entropy": []}), HeatStatistic.ENTROPY)
    assert heat.levels.size == 0 and heat.counted == 0


values_strategy = st.lists(
    st.one_of(st.floats(-1e6, 1e6), st.sampled_from([np.nan, np.inf, -np.inf, 0.0, 1.0])), min_size=1, max_size=300
)


@settings(max_examples=300, deadline=None)
@given(values=values_strategy, data=st.data())
def test_levels_follow_the_values_and_only_masks_are_masked(values: list[float], data: st.DataObject) -> None:
    mask = data.draw(st.lists(st.integers(0, 1), min_size=len(values), max_size=len(values)))
    heat = token_heat(view_of({"entropy": values}, mask), HeatStatistic.ENTROPY)
    trained = np.asarray(mask) > 0
    levels = heat.levels
    np.testing.assert_array_equal(levels == MASKED, ~trained)
    array = np.asarray(values)
    np.testing.assert_array_equal(levels == NO_VALUE, trained & np.isnan(array))
    ranked = trained & ~np.isnan(array)
    assert ((levels[ranked] >= 0) & (levels[ranked] <= TOP)).all()
    order = np.argsort(array[ranked], kind="stable")
    sorted_values, sorted_levels = array[ranked][order], levels[ranked][order]
    assert (np.diff(sorted_levels) >= 0).all()  # a larger value never has a lower level
    same = sorted_values[1:] == sorted_values[:-1]  # not np.diff: inf - inf is NaN, and two infs are equal
    assert (np.diff(sorted_levels)[same] == 0).all()  # equal values, equal levels
    if heat.top_cut is not None:
        np.testing.assert_array_equal(heat.top(), ranked & (array > heat.top_cut))


GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def test_on_a_real_dump_the_largest_lp_diff_is_top_and_masks_are_masked() -> None:
    step = Run(GOLDEN / "tp_dup", use_cache=False).open(0, False, time.time() + 3600)
    view = token_view(step, 1)
    assert view.loss_mask is not None and (view.loss_mask == 0).any()
    heat = token_heat(view, HeatStatistic.LP_DIFF)
    assert heat.levels[view.outlier_positions()[0]] == TOP
    np.testing.assert_array_equal(heat.levels == MASKED, view.loss_mask == 0)
    entropy = token_heat(view, HeatStatistic.ENTROPY)
    masked_entropy = view.masked("entropy")
    assert masked_entropy is not None
    assert entropy.high == np.nanmax(masked_entropy) and entropy.counted == int((view.loss_mask > 0).sum())


@pytest.mark.parametrize("statistic", list(HeatStatistic))
def test_every_statistic_ranks_its_own_series(statistic: HeatStatistic) -> None:
    values = np.array([-3.0, 0.5, -0.25, 2.0, 1.0])
    heat = token_heat(view_of({statistic.series: values}), statistic)
    expected = np.abs(values) if statistic is HeatStatistic.LP_DIFF else values
    assert heat.statistic is statistic and np.array_equal(heat.values, expected)
    assert heat.levels[int(np.argmax(expected))] == TOP and heat.levels[int(np.argmin(expected))] == 0
