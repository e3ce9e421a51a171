"""Each GPU lane's own phases: the phase that took most of each bin, each phase's share, the lane grid's
memory peaks, the columns' extent over hours not parsed yet, and the view over a panned window."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis.compute_view import bin_lanes, compute_view
from miles_tui.core.telemetry import (
    DashboardReader,
    LanePhases,
    Phase,
    StreamRecord,
    TelemetryColumns,
    TimeWindow,
    frame,
    phase_time,
)
from miles_tui.core.telemetry.gpu_samples import gpu_samples
from miles_tui.core.telemetry.lane_phases import _per_lane, lane_phases
from miles_tui.core.telemetry.phase_bands import binned_cover, phase_bands, phase_spans
from miles_tui.core.telemetry.stream_records import GpuUtil
from miles_tui.core.telemetry.time_bins import time_bins
from tests.core.fleet_writer import write_fleet

T0 = 1_787_223_000.0


def _phase(name: str, t0: float, t1: float, node: str, gpus: tuple[object, ...], rank: int) -> Phase:
    return Phase(name, t0, t1, node, gpus, rank, "train")


def _names(phases: LanePhases, ids: np.ndarray) -> list[str | None]:
    return [None if i < 0 else phases.bands[i][1] for i in ids.tolist()]


def _shares(phases: LanePhases, lane: int) -> dict[str, float]:
    return {phases.bands[band][1]: share for band, share in phases.shares(lane)}


def test_each_bin_of_a_lane_shows_the_phase_that_took_most_of_it() -> None:
    records: list[StreamRecord] = [
        _phase("train_wait", T0 + 0, T0 + 7, "n0", (0,), 0),  # bin 0: 7 s waiting, 3 s training
        _phase("actor_train", T0 + 7, T0 + 24, "n0", (0,), 0),  # bin 1 whole, bin 2: 4 s
        _phase("update_weights", T0 + 24, T0 + 30, "n0", (0,), 0),  # bin 2: 6 s
        _phase("actor_train", T0 + 0, T0 + 10, "n0", (1,), 1),  # the other lane: bin 0 only
        _phase("actor_train", T0 + 0, T0 + 3, "n1", (0,), 2),  # 3 s of 10: mostly in no phase
        _phase("actor_train", T0 + 10, T0 + 15, "n1", (0,), 2),  # 5 s of 10: a tie shows the phase
    ]
    lanes = [("n0", 0), ("n0", 1), ("n9", 0), ("n1", 0)]
    phases = lane_phases(phase_spans(records), lanes, time_bins(T0, T0 + 40, 4), now=T0 + 40)
    assert _names(phases, phases.dominant[0]) == ["train_wait", "actor_train", "update_weights", None]
    assert _names(phases, phases.dominant[1]) == ["actor_train", None, None, None]
    assert phases.dominant[2].tolist() == [-1] * 4, "a lane no rank names is in no phase"
    assert _names(phases, phases.dominant[3]) == [None, "actor_train", None, None], "a sliver is not a phase"
    assert _shares(phases, 0) == pytest.approx({"train_wait": 7 / 40, "actor_train": 17 / 40, "update_weights": 6 / 40})
    assert list(_shares(phases, 0)) == ["actor_train", "train_wait", "update_weights"], "largest first"
    assert _shares(phases, 1) == pytest.approx({"actor_train": 10 / 40})
    assert _shares(phases, 2) == {}


def test_a_rank_on_several_gpus_counts_on_each_and_two_ranks_on_one_lane_average() -> None:
    records: list[StreamRecord] = [
        _phase("rollout", T0 + 0, T0 + 20, "n0", (0, 1), 5),  # one engine on two GPUs
        _phase("actor_train", T0 + 0, T0 + 8, "n0", (1,), 1),  # shares GPU 1 for 8 s of 10
    ]
    phases = lane_phases(phase_spans(records), [("n0", 0), ("n0", 1)], time_bins(T0, T0 + 20, 2), now=T0 + 20)
    assert _names(phases, phases.dominant[0]) == ["rollout", "rollout"]
    assert _names(phases, phases.dominant[1]) == ["rollout", "rollout"], "10 rank-seconds beat 8"
    assert _shares(phases, 1) == pytest.approx({"rollout": 0.5, "actor_train": 0.2}), "averaged over 2 ranks"
    assert _shares(phases, 0) == pytest.approx({"rollout": 1.0})


def test_an_open_phase_runs_until_now_and_odd_gpu_values_match_no_lane() -> None:
    records: list[StreamRecord] = [
        _phase("train_wait", T0 + 5, -1, "n0", (0,), 0),
        _phase("actor_train", T0 + 0, T0 + 30, "n0", ([0],), 1),  # a list where an index belongs
        _phase("actor_train", T0 + 0, T0 + 30, "n0", ("0",), 2),  # a string: not GPU 0
    ]
    phases = lane_phases(phase_spans(records), [("n0", 0)], time_bins(T0, T0 + 30, 3), now=T0 + 15)
    assert _names(phases, phases.dominant[0]) == ["train_wait", "train_wait", None]
    assert _shares(phases, 0) == pytest.approx({"train_wait": 10 / 30})


@settings(max_examples=200, deadline=None)
@given(
    spans=st.lists(st.tuples(st.integers(0, 2), st.floats(-50, 150), st.floats(0, 120)), min_size=1, max_size=40),
    count=st.integers(1, 13),
)
def test_binned_cover_is_the_overlap_of_every_span_with_every_bin(
    spans: list[tuple[int, float, float]], count: int
) -> None:
    bins = time_bins(T0, T0 + 100, count)
    key = np.array([k for k, _, _ in spans], dtype=np.int64)
    lo = np.clip([a for _, a, _ in spans], 0, 100).astype(np.float64)
    hi = np.clip([a + d for _, a, d in spans], 0, 100).astype(np.float64)
    keep = hi > lo
    cover = binned_cover(key[keep], lo[keep], hi[keep], 3, bins)
    edges = np.linspace(0.0, 100.0, count + 1)
    expected = np.zeros((3, count))
    for k, a, b in zip(key[keep], lo[keep], hi[keep], strict=True):
        expected[k] += np.maximum(0, np.minimum(b, edges[1:]) - np.maximum(a, edges[:-1]))
    np.testing.assert_allclose(cover, expected, atol=1e-9)


def test_lane_peaks_and_latest_skip_gaps() -> None:
    samples = gpu_samples([
        GpuUtil(T0 + 1, "n0", 0, 50, 1000, 0), GpuUtil(T0 + 11, "n0", 0, 50, 3000, 0),
        GpuUtil(T0 + 21, "n0", 0, 50, 2000, 0), GpuUtil(T0 + 1, "n1", 0, 50, None, 0),
    ])  # fmt: skip
    grid = bin_lanes(samples, time_bins(T0, T0 + 40, 4))
    assert grid.peak(grid.mem_mb)[0] == 3000.0 and grid.latest(grid.mem_mb)[0] == 2000.0
    assert math.isnan(grid.peak(grid.mem_mb)[1]), "no number: no peak, never 0"


def test_extent_reaches_back_to_hours_not_parsed_yet_without_parsing_them(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=1, gpus_per_node=2, seconds=3 * 3600, dead_node=None, slow_node=None)
    columns = TelemetryColumns(tmp_path / "run" / "dashboard")
    first_loaded = columns.time_range()
    assert first_loaded is not None and first_loaded[0] > fleet.start
    first_hour = columns.hours_read()[0][0]
    assert columns.extent() == (first_hour, fleet.end)
    assert [read for _, read in columns.hours_read()] == [False, False, False, True], "only the newest hour read"
    columns.time_range(everything=True)
    assert columns.time_range() == (fleet.start, fleet.end), "once every hour is read: the first sample itself"


def test_a_panned_view_bins_its_own_past_and_keeps_the_sampling_interval(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=2, gpus_per_node=2, seconds=7200, dead_node=None, slow_node=None)
    reader = DashboardReader(tmp_path / "run" / "dashboard")
    reader.poll()
    columns = TelemetryColumns(reader)
    now = fleet.end + 10
    first, newest = columns.extent() or (None, None)
    shown = frame(TimeWindow(900.0, fleet.start + 1800), now, first, newest)
    samples = columns.gpu_samples(shown.since, shown.until)
    bins = time_bins(shown.since, shown.until, 90)
    view = compute_view(samples, columns.phase_spans(shown.since, shown.until, []), bins, now=now, frame=shown)
    assert not view.frame.live and view.span == 900.0 and view.interval == 10.0
    assert view.grid.bins.until == fleet.start + 1800 and not np.isnan(view.grid.util).any()
    waits = [b for b in view.lane_phases.bands if b[1] == "train_wait"]
    wait = view.lane_phases.bands.index(waits[0])
    assert [_shares(view.lane_phases, i)["train_wait"] for i in range(4)] == pytest.approx([0.4] * 4)
    assert (view.lane_phases.dominant == wait).sum(axis=1).tolist() == [36] * 4


def test_time_and_memory_follow_the_records_not_ranks_times_bands() -> None:
    # 3000 ranks and 3000 phase names, one span each: a dense ranks × bands × bins table would be 8 GB.
    records: list[StreamRecord] = [
        _phase(f"p{i}", T0 + i % 60, T0 + i % 60 + 5, "n0", (i % 8,), i) for i in range(3000)
    ]
    spans = phase_spans(records)
    bins = time_bins(T0, T0 + 60, 60)
    time = phase_time(spans, bins, now=T0 + 60)
    assert time.seconds.shape == (3000, 60)
    phases = lane_phases(spans, [("n0", g) for g in range(8)], bins, T0 + 60, time)
    assert phases.dominant.shape == (8, 60) and len(phases.share) == 3000
    lane_seconds = sum(min(5, 60 - i % 60) for i in range(0, 3000, 8))  # 375 ranks on GPU 0, a span each
    assert sum(share for _, share in phases.shares(0)) == pytest.approx(lane_seconds / 60 / 375)
    assert len(phase_bands(spans, bins, T0 + 60, time)) == 3000


@settings(max_examples=100, deadline=None)
@given(
    lanes=st.integers(1, 120),
    bands=st.integers(1, 120),
    picks=st.lists(st.tuples(st.integers(0, 119), st.integers(0, 119)), min_size=1, max_size=60, unique=True),
    seed=st.integers(0, 99),
)
def test_the_top_band_per_lane_is_the_same_from_a_table_or_from_runs_of_rows(
    lanes: int, bands: int, picks: list[tuple[int, int]], seed: int
) -> None:
    keys = sorted({(lane % lanes, band % bands) for lane, band in picks})
    lane_of = np.array([k[0] for k in keys], dtype=np.int64)
    band_of = np.array([k[1] for k in keys], dtype=np.int64)
    cover = np.random.default_rng(seed).integers(0, 4, size=(len(keys), 5)).astype(np.float64)  # ties
    table = np.zeros((lanes, bands, 5))
    table[lane_of, band_of] = cover
    on, top, best, total = _per_lane(cover, lane_of, band_of, lanes, bands)  # sparse when lanes × bands is big
    assert on.tolist() == (sorted(set(lane_of.tolist())) if len(on) < lanes else list(range(lanes)))
    np.testing.assert_array_equal(top, table.max(axis=1)[on])
    np.testing.assert_array_equal(total, table.sum(axis=1)[on])
    some = top > 0  # where no band has time the lane shows none, whichever band "won"
    np.testing.assert_array_equal(best[some], table.argmax(axis=1)[on][some])  # ties: the lowest band id
