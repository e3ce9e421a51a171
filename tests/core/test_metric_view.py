"""The metrics view's headless half: grouping, filtering, EMA, downsampling, log gaps, lookups, dump series."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis import (
    PointAt,
    chart_keys,
    dump_series,
    group_keys,
    key_matches,
    move_cursor,
    plot_data,
    same_points,
    step_union,
    value_at,
    values_at,
)
from miles_tui.core.analysis.metric_view import (
    DUMP_FIELDS,
    DUMP_X_KEY,
    category,
    downsample,
    ema,
    filter_keys,
    in_step_order,
    log_safe,
    smoothing_alpha,
)
from miles_tui.core.dump import Run, StepAggregate
from miles_tui.core.telemetry import MetricSeries, MetricStore
from tests.conftest import GOLDEN

NAN = math.nan


def _series(steps: list[float], values: list[float], key: str = "train/loss") -> MetricSeries:
    count = len(steps)
    return MetricSeries(
        key=key,
        x_key="train/step",
        record=np.arange(count, dtype=np.int64),
        step=np.array(steps, dtype=np.float64),
        value=np.array(values, dtype=np.float64),
        ts=np.zeros(count),
    )


def _record(step_key: str, step: int, **metrics: Any) -> dict[str, Any]:
    return {"ts": 1.0 + step, "step_key": step_key, "step": step, "metrics": metrics}


# -- keys ----------------------------------------------------------------------------


def test_keys_group_by_prefix_in_category_order() -> None:
    keys = ["perf/mfu", "eval/aime", "train/loss", "rollout/raw_reward", "trainer/x", "loss", "train/grad_norm"]
    assert group_keys(keys) == (
        ("train", ("train/grad_norm", "train/loss")),
        ("rollout", ("rollout/raw_reward",)),
        ("perf", ("perf/mfu",)),
        ("eval", ("eval/aime",)),
        ("other", ("loss", "trainer/x")),
    )
    assert category("dump/reward_mean") == "dump"
    # the trainer's log-probs, logged under rollout/, are charted with the train step's figures (as miles shows them)
    assert category("rollout/log_probs") == category("rollout/ref_log_probs") == "train"
    assert category("rollout/log_probs_x") == "rollout"
    assert category("train") == "other"  # no slash: not a prefix
    assert group_keys([]) == ()


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("", ("train/loss", "train/pg_loss", "perf/step_time", "perf/train_time", "eval/aime")),
        ("perf/*", ("perf/step_time", "perf/train_time")),
        ("*time", ("perf/step_time", "perf/train_time")),
        ("loss", ("train/loss", "train/pg_loss")),  # substring
        ("LOSS", ("train/loss", "train/pg_loss")),  # case-insensitive
        ("train/?oss", ("train/loss",)),
        ("aime perf/s*", ("perf/step_time", "eval/aime")),  # alternatives, order kept
        ("zzz", ()),
    ],
)
def test_filter_is_a_glob_or_a_substring(pattern: str, expected: tuple[str, ...]) -> None:
    keys = ("train/loss", "train/pg_loss", "perf/step_time", "perf/train_time", "eval/aime")
    assert filter_keys(keys, pattern) == expected
    assert all(key_matches(key, pattern) for key in expected)


def test_chart_keys_leave_out_the_step_counters() -> None:
    store = MetricStore.from_records(
        [
            _record("train/step", 0, **{"train/loss": 0.5, "train/step": 0}),
            _record("rollout/step", 0, **{"rollout/raw_reward": 0.1, "rollout/step": 0}),
        ]
    )
    assert chart_keys(store) == ("rollout/raw_reward", "train/loss")


# -- EMA -----------------------------------------------------------------------------


def test_ema_matches_a_hand_computation_and_skips_gaps() -> None:
    values = np.array([1.0, 2.0, NAN, 4.0, math.inf, 0.0])
    # s0 = 1; s1 = .5*1 + .5*2 = 1.5; NaN stays; s3 = .5*1.5 + .5*4 = 2.75; inf stays; s5 = .5*2.75 + 0
    expected = [1.0, 1.5, NAN, 2.75, NAN, 1.375]
    np.testing.assert_allclose(ema(values, 0.5), expected, equal_nan=True)
    np.testing.assert_allclose(ema(values, span=3), expected, equal_nan=True)  # alpha = 2 / (3 + 1)
    weight = 0.9  # TensorBoard-style: 90 % of the past
    alpha = smoothing_alpha(weight)
    assert alpha == pytest.approx(0.1)
    np.testing.assert_allclose(ema(np.array([10.0, 0.0, 0.0]), alpha), [10.0, 9.0, 8.1])
    assert ema(np.array([]), 0.5).shape == (0,)
    np.testing.assert_array_equal(ema(np.array([3.0, 1.0]), 1.0), [3.0, 1.0])


@pytest.mark.parametrize("alpha", [0.999, 0.4, 0.1, 0.01, 0.0005])
def test_ema_agrees_with_the_recurrence_on_long_series(alpha: float) -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(5.0, 2.0, 10_000)
    values[rng.integers(0, len(values), 300)] = NAN
    got = ema(values, alpha)
    state = None
    for i, v in enumerate(values):
        if math.isnan(v):
            assert math.isnan(got[i])
            continue
        state = v if state is None else (1 - alpha) * state + alpha * v
        assert got[i] == pytest.approx(state, rel=1e-9, abs=1e-9)


def test_ema_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        ema(np.ones(3))
    with pytest.raises(ValueError):
        ema(np.ones(3), 0.5, span=3)
    with pytest.raises(ValueError):
        ema(np.ones(3), 0.0)
    with pytest.raises(ValueError):
        smoothing_alpha(1.0)


# -- downsampling --------------------------------------------------------------------


def test_downsampling_keeps_spikes_and_fits_the_width() -> None:
    rng = np.random.default_rng(5)
    y = rng.normal(0.0, 1.0, 10_000)
    y[1234], y[7777] = -100.0, 100.0
    x = np.arange(10_000, dtype=np.float64) * 10
    for width in (2, 3, 40, 97, 200, 1000):
        dx, dy = downsample(x, y, width)
        assert len(dx) == len(dy) <= width
        assert dy.max() == 100.0 and dx[dy.argmax()] == 77_770.0  # x of the spike kept
        assert dy.min() == -100.0 and dx[dy.argmin()] == 12_340.0
        assert np.all(np.diff(dx) > 0)  # a subset of the points, in order
        assert set(dx.tolist()) <= set(x.tolist())


def test_downsampling_leaves_short_series_alone_and_keeps_gaps() -> None:
    x, y = np.arange(5.0), np.array([1.0, NAN, 3.0, 4.0, 5.0])
    dx, dy = downsample(x, y, 10)
    np.testing.assert_array_equal(dx, x)
    np.testing.assert_array_equal(dy, y)
    y = np.concatenate([np.ones(100), np.full(100, NAN), np.ones(100) * 2])
    dx, dy = downsample(np.arange(300.0), y, 20)
    assert np.isnan(dy).any(), "a bucket with no value keeps a gap"
    assert np.isfinite(dy[0]) and np.isfinite(dy[-1])
    with pytest.raises(ValueError):
        downsample(x, y[:5], 1)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=500),
    st.integers(2, 120),
)
def test_downsampling_keeps_the_extremes_of_any_series(values: list[float], width: int) -> None:
    y = np.array(values)
    x = np.arange(len(y), dtype=np.float64)
    dx, dy = downsample(x, y, width)
    assert len(dy) <= width
    assert dy.max() == y.max() and dy.min() == y.min()
    np.testing.assert_array_equal(dy, y[dx.astype(int)])  # every kept point is a real point


# -- log, order, lookups ---------------------------------------------------------------


def test_log_safety_turns_non_positive_values_into_gaps() -> None:
    np.testing.assert_array_equal(log_safe(np.array([-1.0, 0.0, 0.5, NAN, 2.0])), [NAN, NAN, 0.5, NAN, 2.0])
    data = plot_data(_series([0, 1, 2, 3], [-1.0, 10.0, 0.0, 1000.0]), 100, log_y=True)
    np.testing.assert_allclose(data.raw, [NAN, 1.0, NAN, 3.0])
    assert (data.lo, data.hi) == (1.0, 3.0)
    assert plot_data(_series([0, 1], [-1.0, 0.0]), 100, log_y=True).lo is None


def test_plot_data_smooths_before_downsampling() -> None:
    steps = list(range(1000))
    values = [float(i % 7) for i in steps]
    data = plot_data(_series(steps, values), 50, smoothing=0.9)
    assert len(data.x) <= 50 and len(data.smooth_x) <= 25  # the smoothed line: one point per column
    full = ema(np.array(values), 0.1)
    assert set(np.round(data.smooth, 12)) <= set(np.round(full, 12))
    assert data.points == 1000 and (data.x_lo, data.x_hi) == (0.0, 999.0)
    assert len(plot_data(_series(steps, values), 50).smooth) == 0


def test_step_order_drops_stepless_points_and_keeps_repeats() -> None:
    ordered = in_step_order(_series([2, NAN, 0, 1, 1], [20.0, 99.0, 0.0, 10.0, 11.0]))
    np.testing.assert_array_equal(ordered.step, [0, 1, 1, 2])
    np.testing.assert_array_equal(ordered.value, [0.0, 10.0, 11.0, 20.0])  # a repeated step: file order kept
    already = _series([0, 1], [1.0, 2.0])
    assert in_step_order(already) is already


def test_value_at_is_the_last_point_at_or_before_the_step() -> None:
    series = _series([0, 10, 20, 20], [1.0, 2.0, 3.0, 4.0])
    assert value_at(series, 10) == PointAt(10.0, 2.0)
    assert value_at(series, 15) == PointAt(10.0, 2.0)
    assert value_at(series, 20) == PointAt(20.0, 4.0)  # the later of two points at a step
    assert value_at(series, 99) == PointAt(20.0, 4.0)
    assert value_at(series, -1) is None
    other = _series([5], [NAN], key="train/x")
    found = values_at({"a": series, "b": other}, 5)
    assert found["a"] == PointAt(0.0, 1.0)
    assert found["b"] is not None and math.isnan(found["b"].value)
    np.testing.assert_array_equal(step_union([series, other]), [0, 5, 10, 20])
    assert len(step_union([])) == 0


def test_the_cursor_walks_the_steps_and_stops_at_the_ends() -> None:
    stops = np.array([0.0, 10.0, 20.0, 30.0])
    assert move_cursor(stops, None, -1) == 30.0  # first press: the newest step
    assert move_cursor(stops, None, 1) == 30.0
    assert move_cursor(stops, 30.0, 1) == 30.0
    assert move_cursor(stops, 30.0, -1) == 20.0
    assert move_cursor(stops, 30.0, -10) == 0.0
    assert move_cursor(stops, 15.0, 1) == 20.0  # between stops: the next one on
    assert move_cursor(stops, 15.0, -1) == 10.0
    assert move_cursor(stops, 99.0, -1) == 30.0
    assert move_cursor(np.zeros(0), None, 1) is None


def test_same_points_compares_steps_and_values_nan_aware() -> None:
    a = _series([0, 1], [1.0, NAN])
    assert same_points(a, _series([0, 1], [1.0, NAN]))
    assert not same_points(a, _series([0, 1], [1.0, 2.0]))
    assert not same_points(a, _series([0, 1, 2], [1.0, NAN, 3.0]))


# -- dump-derived series ---------------------------------------------------------------


def _aggregate(rid: int, evaluation: bool = False, **values: float | None) -> StepAggregate:
    fields: dict[str, Any] = dict.fromkeys(DUMP_FIELDS, 0.5)
    fields.update(mixed_version_frac=None, reward_std=None)
    fields.update(values)
    return StepAggregate(rollout_id=rid, evaluation=evaluation, n_samples=8, alignment_failed=0, **fields)


def test_dump_series_chart_the_step_aggregates_against_rollout_id() -> None:
    aggregates = [
        _aggregate(2, reward_mean=0.3, avg_staleness=None),
        _aggregate(0, reward_mean=0.1, avg_staleness=None),
        _aggregate(1, reward_mean=None, avg_staleness=None),
        _aggregate(0, evaluation=True, reward_mean=0.7),
    ]
    series = dump_series(aggregates)
    assert "dump/avg_staleness" not in series  # never a value: no chart
    unset = {"avg_staleness", "reward_std", "mixed_version_frac"}  # never a value in these aggregates
    assert set(series) == {f"dump/{f}" for f in DUMP_FIELDS if f not in unset} | {"dump/eval_reward_mean"}
    reward = series["dump/reward_mean"]
    assert reward.x_key == DUMP_X_KEY
    np.testing.assert_array_equal(reward.step, [0, 1, 2])
    np.testing.assert_array_equal(reward.value, [0.1, NAN, 0.3])
    np.testing.assert_array_equal(series["dump/eval_reward_mean"].value, [0.7])
    assert dump_series([]) == {}


def test_dump_series_chart_reward_std_and_mixed_version_frac() -> None:
    aggregates = [
        _aggregate(0, reward_std=0.25, mixed_version_frac=0.0),
        _aggregate(1, reward_std=None, mixed_version_frac=0.5),
        _aggregate(1, evaluation=True, reward_std=0.1),
    ]
    series = dump_series(aggregates)
    np.testing.assert_array_equal(series["dump/reward_std"].value, [0.25, NAN])
    np.testing.assert_array_equal(series["dump/mixed_version_frac"].value, [0.0, 0.5])
    np.testing.assert_array_equal(series["dump/eval_reward_std"].value, [0.1])
    assert "dump/eval_mixed_version_frac" not in series


def test_dump_series_of_a_golden_run_are_its_step_figures(golden_copy: Any) -> None:
    """On the staleness case (mixed versions), the charted figures are the step header's, which the golden
    truth (miles' own reading of the same files) confirms."""
    run_dir = golden_copy("staleness")
    truth = json.loads((GOLDEN / "staleness.truth.json").read_text())
    run = Run(run_dir, use_cache=False)
    now = time.time()
    aggregates = [run.summary(record["rollout_id"], False, now).aggregate for record in truth["step_aggregates"]]
    series = dump_series(aggregates)
    for name in ("reward_std", "mixed_version_frac"):
        expected = [record[name] for record in truth["step_aggregates"]]
        np.testing.assert_allclose(series[f"dump/{name}"].value, expected, atol=1e-6)
        assert list(series[f"dump/{name}"].value) == [getattr(a, name) for a in aggregates]
    assert max(series["dump/mixed_version_frac"].value) > 0


def _long(count: int, seed: int = 3) -> MetricSeries:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=count)
    values[rng.integers(0, count, 50)] = np.nan  # gaps
    values[count // 3] = 40.0  # one spike
    steps = np.arange(count, dtype=np.float64)
    rng.shuffle(steps)  # logged out of order: the chart sorts
    return MetricSeries("train/loss", "train/step", np.arange(count), steps, values, np.zeros(count))


def test_a_long_series_keeps_few_real_points_and_its_whole_smoothing() -> None:
    from miles_tui.core.analysis import SMOOTHING_LEVELS, chart_series
    from miles_tui.core.analysis.metric_view import CHART_POINTS, in_step_order

    full = in_step_order(_long(200_000))
    chart = chart_series(_long(200_000))
    kept = chart.series
    assert chart.total == 200_000 and len(kept.value) <= CHART_POINTS
    assert np.all(np.diff(kept.step) >= 0)
    index = kept.step.astype(int)  # steps are 0..n-1: a kept point's step is its position in the full series
    assert np.array_equal(full.value[index], kept.value, equal_nan=True)  # real points, exact values
    assert np.nanmax(kept.value) == 40.0 and np.nanmin(kept.value) == np.nanmin(full.value)  # extremes kept
    for weight in SMOOTHING_LEVELS[1:]:
        whole = ema(full.value, 1 - weight)
        assert np.array_equal(chart.smooth[weight], whole[index], equal_nan=True)
    data = plot_data(chart, 200, smoothing=SMOOTHING_LEVELS[-1])
    assert data.points == 200_000 and len(data.x) <= 200


def test_a_short_series_is_kept_whole_and_smoothed_when_drawn() -> None:
    from miles_tui.core.analysis import chart_series

    series = _series([3, 1, 2], [0.3, 0.1, 0.2])
    chart = chart_series(series)
    assert chart.total == 3 and chart.smooth == {} and list(chart.series.step) == [1, 2, 3]
    assert np.array_equal(plot_data(chart, 40, 0.6).smooth, plot_data(series, 40, 0.6).smooth)


def test_reading_a_store_for_charts_stops_when_cancelled() -> None:
    from miles_tui.core.analysis import store_chart_series

    store = MetricStore()
    store.append_rows([(float(step), "train/step", step, {"a": step, "b": -step}) for step in range(10)])
    asked: list[int] = []
    read = store_chart_series(store, {"a": None, "b": None}, cancelled=lambda: asked.append(1) or len(asked) > 1)
    assert read is None and len(asked) == 2  # cancelled before the second key was read
    whole = store_chart_series(store, {"a": None, "b": None})
    assert whole is not None and whole["b"].series.value[-1] == -9


def test_point_counts_now_never_waits_for_a_busy_store() -> None:
    """The UI thread asks the store's point counts on every tick; a long load holds the store while it stores a
    block of records, and the UI must not wait behind it."""
    import threading

    store = MetricStore()
    store.append_rows([(0.0, "train/step", 0, {"a": 1.0})])
    assert store.point_counts_now() == {"a": 1}
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store._lock:
            held.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(5)
    try:
        assert store.point_counts_now() is None
    finally:
        release.set()
        thread.join()
    assert store.point_counts_now() == {"a": 1}
