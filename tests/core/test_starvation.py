"""Starvation figures (core.analysis.starvation): MFU against the golden truth, miles' wait ratio per step,
the data-buffer depth, and the demo writing what miles writes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from miles_tui.core.analysis.starvation import binned_starvation, buffer_depth, starvation, step_bubbles
from miles_tui.core.synth.demo import write_demo_step
from miles_tui.core.synth.demo_batch import DemoConfig
from miles_tui.core.telemetry import DashboardReader, MetricStore
from miles_tui.core.telemetry.stream_records import decode_snapshot
from miles_tui.core.telemetry.time_bins import time_bins
from tests.conftest import EPOCH

GOLDEN_TRUTH = Path(__file__).resolve().parents[1] / "golden" / "live_streams.truth.json"


def _store(records: list[dict[str, Any]]) -> MetricStore:
    return MetricStore.from_records(records)


def _perf(step: int, **metrics: float) -> dict[str, Any]:
    return {"ts": 100.0 + step, "step_key": "rollout/step", "step": step, "metrics": {**metrics, "rollout/step": step}}


def test_golden_mfu_is_miles_mfu_summary(golden_copy: Any) -> None:
    reader = DashboardReader(golden_copy("live_streams") / "dashboard")
    reader.poll()
    assert reader.meta is not None
    figures = starvation(reader.metrics, reader.records("data_buffer"), reader.meta.args)
    truth = json.loads(GOLDEN_TRUTH.read_text())["dashboard"]["mfu_summary"]
    assert figures.mfu is not None
    assert figures.mfu.latest == pytest.approx(truth["latest"], abs=1e-5)
    assert figures.mfu.mean == pytest.approx(truth["mean"], abs=1e-5)
    assert (figures.mfu.steps, figures.mfu.peak_tflops) == (truth["steps"], truth["peak"])
    assert len(figures.mfu_steps) == truth["steps"] + 1  # the warm-up step is drawn, not averaged
    assert figures.buffer is None  # the golden run wrote no data_buffer.jsonl (its truth counts 0 records)


def test_golden_wait_ratio_comes_from_step_and_train_time(golden_copy: Any) -> None:
    """live_streams logs perf/step_time and perf/train_time but no ratio: miles' step time is train_wait + train."""
    root = golden_copy("live_streams")
    reader = DashboardReader(root / "dashboard")
    reader.poll()
    bubbles = step_bubbles(reader.metrics)
    lines = [json.loads(line) for line in (root / "dashboard" / "metrics.jsonl").read_text().splitlines()]
    perf = [r for r in lines if r["step_key"] == "rollout/step" and "perf/step_time" in r["metrics"]]
    want = [1 - r["metrics"]["perf/train_time"] / r["metrics"]["perf/step_time"] for r in perf]
    assert bubbles.step.tolist() == [r["step"] for r in perf]
    assert bubbles.ts.tolist() == [r["ts"] for r in perf]
    np.testing.assert_allclose(bubbles.wait_ratio, want)
    assert bubbles.derived.all()


def test_a_logged_ratio_wins_then_miles_formula_then_nothing() -> None:
    store = _store(
        [
            _perf(0, **{"perf/wait_time_ratio": 0.25, "perf/step_time": 10.0, "perf/train_time": 1.0}),
            _perf(1, **{"perf/step_time": 8.0, "perf/train_wait_time": 6.0, "perf/train_time": 2.0}),
            _perf(2, **{"perf/step_time": 8.0, "perf/train_time": 6.0}),
            _perf(3, **{"perf/step_time": 8.0}),  # nothing to take the ratio from: a gap, never 0
            _perf(4, **{"perf/wait_time_ratio": 1.5}),  # not a fraction
            {"ts": 200.0, "step_key": "train/step", "step": 9, "metrics": {"perf/step_time": 3.0}},
        ]
    )
    bubbles = step_bubbles(store)
    assert bubbles.step.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(bubbles.wait_ratio, [0.25, 0.75, 0.25, np.nan, np.nan])
    assert bubbles.derived.tolist() == [False, True, True, False, False]
    np.testing.assert_allclose(bubbles.step_time, [10.0, 8.0, 8.0, 8.0, np.nan])
    windowed = step_bubbles(store, since=101.0, until=102.0)
    assert windowed.step.tolist() == [1, 2]


def test_no_perf_metrics_is_no_bubble() -> None:
    bubbles = step_bubbles(_store([{"ts": 1.0, "step_key": "train/step", "step": 0, "metrics": {"train/loss": 1}}]))
    assert len(bubbles.step) == 0


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(-10, 10)),
            st.one_of(st.none(), st.floats(-1e3, 1e3)),
            st.one_of(st.none(), st.floats(-1e3, 1e3)),
        ),
        max_size=12,
    )
)
def test_a_ratio_is_a_fraction_or_a_gap(rows: list[tuple[float | None, float | None, float | None]]) -> None:
    records = []
    for i, (ratio, step_time, train) in enumerate(rows):
        figures = {"perf/wait_time_ratio": ratio, "perf/step_time": step_time, "perf/train_time": train}
        records.append(_perf(i, **{k: v for k, v in figures.items() if v is not None}))
    ratio = step_bubbles(_store(records)).wait_ratio
    assert all(math.isnan(r) or 0 <= r <= 1 for r in ratio)


def test_buffer_depth_keeps_whole_lengths_and_counts_the_rest() -> None:
    lines = [
        {"ts": 10.0, "length": 3},
        {"ts": 20.0, "length": 0},
        {"ts": 30.0, "length": -1},
        {"ts": 40.0, "length": 2.5},
        {"ts": "later", "length": 1},
        {"ts": 50.0, "length": True},
        {"ts": 60.0, "length": 7},
    ]
    with pytest.raises(ValueError, match="no numeric ts"):  # a line without a time is malformed, never held
        decode_snapshot(lines[4])
    records = [decode_snapshot(line) for line in lines if line["ts"] != "later"]
    depth = buffer_depth(records)
    assert depth is not None
    assert depth.ts.tolist() == [10.0, 20.0, 60.0]
    assert depth.length.tolist() == [3.0, 0.0, 7.0]
    assert depth.skipped == 3
    windowed = buffer_depth(records, since=15.0, until=59.0)
    assert windowed is not None and windowed.length.tolist() == [0.0]
    assert buffer_depth([]) is None


def test_the_demo_writes_miles_perf_figures_and_the_data_buffer(tmp_path: Path) -> None:
    config = DemoConfig(samples_per_step=16, seed=5)
    for rid in range(8):
        write_demo_step(tmp_path, rid, config, np.random.default_rng([5, rid]), now=EPOCH + 30 * rid)
    reader = DashboardReader(tmp_path / "dashboard")
    reader.poll()
    assert reader.meta is not None
    figures = starvation(reader.metrics, reader.records("data_buffer"), reader.meta.args)
    bubbles = figures.bubbles
    assert bubbles.step.tolist() == list(range(8)) and not bubbles.derived.any()
    wait = reader.metrics.series("perf/train_wait_time", "rollout/step")
    train = reader.metrics.series("perf/train_time", "rollout/step")
    assert wait is not None and train is not None
    np.testing.assert_allclose(bubbles.wait_ratio, wait.value / (wait.value + train.value), atol=1e-5)  # miles' formula
    assert len(set(np.round(bubbles.wait_ratio, 3))) > 1  # some steps starve longer than others
    buffer = figures.buffer
    assert buffer is not None and len(buffer.ts) == 8 and buffer.skipped == 0
    starved = bubbles.wait_ratio > np.median(bubbles.wait_ratio)
    assert (buffer.length[starved] == 0).all()  # a step that waited longer found the buffer empty
    assert figures.mfu is not None and figures.mfu.peak_tflops == 989.0


def test_binned_starvation_keeps_the_worst_step_and_the_deepest_report_of_each_bin() -> None:
    store = _store(
        [
            _perf(0, **{"perf/wait_time_ratio": 0.2}),  # ts 100
            _perf(1, **{"perf/wait_time_ratio": 0.6}),  # ts 101: same bin as step 0
            _perf(5, **{"perf/wait_time_ratio": 0.4}),  # ts 105
            _perf(30, **{"perf/wait_time_ratio": 0.9}),  # ts 130: outside the window
        ]
    )
    records = [decode_snapshot({"ts": t, "length": n}) for t, n in ((100.5, 3), (101.0, 5), (107.0, 0))]
    figures = starvation(store, records, {})
    binned = binned_starvation(figures, time_bins(100.0, 110.0, 5))
    np.testing.assert_allclose(binned.wait, [0.6, np.nan, 0.4, np.nan, np.nan])
    assert binned.steps == 3
    assert binned.buffer is not None
    np.testing.assert_allclose(binned.buffer, [5, np.nan, np.nan, 0, np.nan])
    assert binned_starvation(starvation(store, [], {}), time_bins(100.0, 110.0, 5)).buffer is None
