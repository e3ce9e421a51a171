"""The compute view's math: binning, gaps, ages, fleet percentiles, phase shares, lane picking, window reads."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.analysis import LaneSelection, Liveness, sampling_interval, select_lanes
from miles_tui.core.analysis.compute_view import bin_lanes, compute_view, fleet_summary, lane_health
from miles_tui.core.telemetry import (
    DashboardReader,
    GpuSamples,
    Phase,
    StreamRecord,
    TelemetryColumns,
    bin_count,
    natural_key,
    window_bounds,
)
from miles_tui.core.telemetry.gpu_samples import gpu_samples
from miles_tui.core.telemetry.phase_bands import lanes_of_rank, phase_bands, phase_spans
from miles_tui.core.telemetry.stream_records import GpuUtil
from miles_tui.core.telemetry.time_bins import time_bins
from tests.conftest import GOLDEN
from tests.core.fleet_writer import write_fleet

T0 = 1_787_223_000.0


def _samples(rows: Sequence[tuple[str, int, float, Any, Any]]) -> GpuSamples:
    return gpu_samples([GpuUtil(ts, node, gpu, util, mem, 500) for node, gpu, ts, util, mem in rows])


# -- binning ---------------------------------------------------------------------------------------------------


def test_bins_hold_the_mean_of_their_samples_and_the_window_end_falls_in_the_last_bin() -> None:
    samples = _samples([
        ("a", 0, T0 + 0, 10, 100), ("a", 0, T0 + 5, 30, 300),  # bin 0: mean 20, mem 200
        ("a", 0, T0 + 10, 50, 500),  # bin 1
        ("a", 0, T0 + 30, 90, 900),  # exactly at until: last bin
        ("a", 0, T0 - 1, 99, 999), ("a", 0, T0 + 31, 99, 999),  # outside the window
    ])  # fmt: skip
    grid = bin_lanes(samples, time_bins(T0, T0 + 30, 3))
    np.testing.assert_allclose(grid.util[0], [20, 50, 90])
    np.testing.assert_allclose(grid.mem_mb[0], [200, 500, 900])
    assert grid.samples[0].tolist() == [2, 1, 1]
    assert grid.mean_util[0] == pytest.approx((10 + 30 + 50 + 90) / 4)


def test_a_bin_without_samples_is_nan_never_zero() -> None:
    samples = _samples([("a", 0, T0 + 1, 0, 10), ("a", 0, T0 + 25, 40, 10), ("b", 0, T0 + 1, 70, 10)])
    grid = bin_lanes(samples, time_bins(T0, T0 + 30, 3))
    assert grid.util[0, 0] == 0.0, "an idle GPU is 0"
    assert math.isnan(grid.util[0, 1]), "no sample is a gap"
    assert grid.util[0, 2] == 40.0
    assert np.isnan(grid.util[1, 1:]).all()


def test_non_numeric_util_is_no_value_not_zero() -> None:
    samples = _samples([("a", 0, T0 + 1, None, None), ("a", 0, T0 + 2, 60, 600), ("a", 0, T0 + 12, "n/a", 5)])
    grid = bin_lanes(samples, time_bins(T0, T0 + 20, 2))
    assert grid.util[0, 0] == 60.0 and grid.mem_mb[0, 0] == 600.0
    assert math.isnan(grid.util[0, 1]) and grid.mem_mb[0, 1] == 5.0
    assert grid.samples[0].tolist() == [2, 1]


def test_every_known_lane_gets_a_row_in_natural_order() -> None:
    samples = _samples([
        ("10.0.0.10", 0, T0 + 1, 1, 1), ("10.0.0.9", 10, T0 + 1, 1, 1), ("10.0.0.9", 2, T0 + 1, 1, 1),
        ("10.0.0.9", 2, T0 - 500, 1, 1),  # outside the window: still a lane
        ("10.0.0.11", 0, T0 - 500, 1, 1),
    ])  # fmt: skip
    grid = bin_lanes(samples, time_bins(T0, T0 + 10, 1))
    assert grid.lanes == (("10.0.0.9", 2), ("10.0.0.9", 10), ("10.0.0.10", 0), ("10.0.0.11", 0))
    assert math.isnan(grid.util[3, 0])
    assert natural_key("gpu-2") < natural_key("gpu-10")


def test_natural_order_takes_any_name_a_run_writes() -> None:
    """A node named "²" (str.isdigit() says yes, int() says no) made the sort raise; other scripts' digits
    are text, so "٣" is not node 3."""
    names = ["\u00b2", "node\u00b2", "\u0663", "3", "gpu\uff11", "gpu1", "", "10.0.0.9", "10.0.0.10"]
    ordered = sorted(names, key=natural_key)
    assert ordered.index("10.0.0.9") < ordered.index("10.0.0.10")
    assert natural_key("\u0663") == ((1, "\u0663"),) and natural_key("\u00b2") == ((1, "\u00b2"),)


def test_bin_count_never_makes_bins_narrower_than_the_sampling_interval() -> None:
    assert bin_count(900, 10, 120) == 90
    assert bin_count(3600, 10, 120) == 120
    assert bin_count(900, None, 77) == 77
    assert bin_count(5, 10, 50) == 1


def test_window_ends_at_now_while_live_and_at_the_data_once_it_stopped() -> None:
    assert window_bounds(900, T0 + 1000, T0, T0 + 995) == (T0 + 100, T0 + 1000, False)
    since, until, anchored = window_bounds(900, T0 + 9000, T0, T0 + 995)
    assert (since, until, anchored) == (T0 + 95, T0 + 995, True)
    assert window_bounds(None, T0 + 1000, T0, T0 + 995) == (T0, T0 + 1000, False)
    assert window_bounds(900, T0, None, None) == (T0 - 900, T0, False)


# -- health ----------------------------------------------------------------------------------------------------


def _regular(lanes: dict[tuple[str, int], float], start: float = T0, period: float = 10.0) -> GpuSamples:
    """Each lane sampled every ``period`` from ``start`` until its stop time."""
    rows = []
    for (node, gpu), stop in lanes.items():
        t = start
        while t <= stop:
            rows.append((node, gpu, t, 50, 1000))
            t += period
    return _samples(rows)


def test_a_lane_that_stopped_while_others_go_on_is_dead_and_its_age_says_since_when() -> None:
    samples = _regular({("a", 0): T0 + 600, ("a", 1): T0 + 600, ("b", 0): T0 + 300})
    assert sampling_interval(samples) == 10.0
    health = lane_health(samples, [("a", 0), ("b", 0)], T0 + 605, 10.0)
    assert [h.liveness for h in health] == [Liveness.LIVE, Liveness.DEAD]
    assert health[1].age == 305.0 and health[1].lag == 300.0 and health[1].last_seen == T0 + 300


def test_a_fleet_gone_quiet_together_is_stale_not_dead() -> None:
    samples = _regular({("a", 0): T0 + 600, ("b", 0): T0 + 600})
    health = lane_health(samples, [("a", 0), ("b", 0)], T0 + 4000, 10.0)
    assert {h.liveness for h in health} == {Liveness.STALE}
    assert health[0].age == 3400.0 and health[0].lag == 0.0


def test_a_short_hiccup_is_not_death() -> None:
    samples = _regular({("a", 0): T0 + 600, ("b", 0): T0 + 570})  # three samples late: < 60 s
    health = lane_health(samples, [("b", 0)], T0 + 600, 10.0)
    assert health[0].liveness is Liveness.LIVE


# -- fleet -----------------------------------------------------------------------------------------------------


def test_fleet_percentiles_over_512_lanes_match_numpy_and_skip_silent_lanes() -> None:
    rng = np.random.default_rng(5)
    lanes, bins = 512, 60
    util = rng.uniform(0, 100, size=(lanes, bins))
    util[100:108, 40:] = np.nan  # a dead node's lanes in the last 20 bins
    rows = []
    for lane in range(lanes):
        node, gpu = divmod(lane, 8)
        for b in range(bins):
            if not math.isnan(util[lane, b]):
                rows.append((f"n{node:02d}", gpu, T0 + 10 * b + 5, float(util[lane, b]), 1000))
    samples = _samples(rows)
    grid = bin_lanes(samples, time_bins(T0, T0 + 10 * bins, bins))
    fleet = fleet_summary(grid)
    expected = np.nanpercentile(util, [10, 50, 90], axis=0)
    np.testing.assert_allclose(fleet.p10, expected[0])
    np.testing.assert_allclose(fleet.median, expected[1])
    np.testing.assert_allclose(fleet.p90, expected[2])
    assert fleet.reporting[:40].tolist() == [512] * 40 and fleet.reporting[40:].tolist() == [504] * 20
    assert fleet.lanes == 512
    assert fleet.silent.tolist() == [0] * 40 + [8] * 20 and fleet.silent_now == 8


def test_silent_counts_lanes_that_went_quiet_not_those_not_started_nor_bins_not_written_yet() -> None:
    rows = [("old", 0, T0 - 100, 50, 1)]  # quiet since before the window
    rows += [("a", 0, T0 + t, 50, 1) for t in range(0, 60, 10)]  # reports in bins 0..5
    rows += [("late", 0, T0 + t, 50, 1) for t in range(30, 60, 10)]  # starts in bin 3
    rows += [("gone", 0, T0 + t, 50, 1) for t in range(0, 20, 10)]  # stops after bin 1
    samples = _samples(rows)
    grid = bin_lanes(samples, time_bins(T0, T0 + 100, 10))  # bins 6..9: nothing written yet
    fleet = fleet_summary(grid, samples.newest)
    assert fleet.silent.tolist() == [1, 1, 2, 2, 2, 2, 0, 0, 0, 0]
    assert fleet.silent_now == 2 and fleet.reporting.tolist() == [2, 2, 1, 2, 2, 2, 0, 0, 0, 0]


def test_fleet_bin_with_no_lane_is_a_gap() -> None:
    samples = _samples([("a", 0, T0 + 1, 50, 1), ("b", 0, T0 + 2, 70, 1)])
    fleet = fleet_summary(bin_lanes(samples, time_bins(T0, T0 + 20, 2)))
    assert fleet.median[0] == 60.0 and math.isnan(fleet.median[1]) and fleet.reporting.tolist() == [2, 0]


# -- phases ----------------------------------------------------------------------------------------------------


def _phase(name: str, t0: float, t1: float, rank: int, node: str = "n0", role: str = "train") -> Phase:
    return Phase(name, t0, t1, node, (rank,), rank, role)


def test_phase_share_is_the_fraction_of_each_bin_averaged_over_the_ranks() -> None:
    records: list[StreamRecord] = [
        _phase("actor_train", T0 + 0, T0 + 10, 0),  # rank 0: all of bin 0
        _phase("actor_train", T0 + 5, T0 + 15, 1),  # rank 1: half of bin 0, half of bin 1
        _phase("rollout", T0 + 0, T0 + 20, -1, "n9", "rollout_manager"),
    ]
    bands = phase_bands(phase_spans(records), time_bins(T0, T0 + 20, 2), now=T0 + 20)
    assert [(b.role, b.name) for b in bands] == [("train", "actor_train"), ("rollout_manager", "rollout")]
    np.testing.assert_allclose(bands[0].share, [0.75, 0.25])
    np.testing.assert_allclose(bands[1].share, [1.0, 1.0])
    assert bands[0].ranks == (0, 1) and bands[0].nodes == ("n0",) and bands[1].nodes == ("n9",)


def test_an_open_phase_counts_until_now_and_a_closed_marker_does_not_count_twice() -> None:
    records: list[StreamRecord] = [
        _phase("actor_train", T0 + 0, -1, 0),
        _phase("actor_train", T0 + 0, T0 + 4, 0),  # closes the marker above
        _phase("update_weights", T0 + 4, -1, 0),  # still open
        _phase("update_weights", T0 - 900, -1, 1),  # left open by an attempt that died
    ]
    spans = phase_spans(records, attempt_start=T0 - 100)
    assert len(spans.t0) == 2
    bands = phase_bands(spans, time_bins(T0, T0 + 20, 2), now=T0 + 15)
    train, update = bands
    np.testing.assert_allclose(train.share, [0.4, 0.0])
    np.testing.assert_allclose(update.share, [0.6, 0.5])  # open until now (T0 + 15), not until the window end
    assert update.open == 1 and train.open == 0


def test_phase_shares_of_many_short_phases_far_from_the_epoch_are_exact() -> None:
    # 512 ranks × 72 steps: summing epoch seconds would leave rounding crumbs in empty bins.
    records: list[StreamRecord] = [
        _phase("actor_train", T0 + 50 * s + 20, T0 + 50 * s + 45, r) for s in range(72) for r in range(512)
    ]
    bands = phase_bands(phase_spans(records), time_bins(T0, T0 + 3600, 360), now=T0 + 3600)
    share = bands[0].share
    assert share.min() == 0.0 and share.max() == pytest.approx(1.0)
    assert share[0] == 0.0 and share[2] == pytest.approx(1.0) and share[4] == pytest.approx(0.5)
    assert share.sum() == pytest.approx(72 * 2.5)


def test_lanes_of_a_rank_come_from_its_phases() -> None:
    spans = phase_spans([Phase("actor_train", T0, T0 + 1, "n1", (2, 3), 7, "train")])
    assert lanes_of_rank(spans, 7) == (("n1", 2), ("n1", 3))
    assert lanes_of_rank(spans, 8) == ()


# -- picking lanes ---------------------------------------------------------------------------------------------


def test_worst_lanes_put_the_dead_first_then_the_least_busy() -> None:
    rows = []
    for node, gpu, util, stop in (("a", 0, 90, 600), ("a", 1, 10, 600), ("b", 0, 95, 200), ("b", 1, 50, 600)):
        rows += [(node, gpu, T0 + t, util, 1) for t in range(0, stop + 1, 10)]
    samples = _samples(rows)
    grid = bin_lanes(samples, time_bins(T0, T0 + 600, 60))
    health = lane_health(samples, grid.lanes, T0 + 600, 10.0)
    worst = select_lanes(grid, health, LaneSelection("worst", count=3))
    assert [grid.lanes[i] for i in worst] == [("b", 0), ("a", 1), ("b", 1)]
    on_b = select_lanes(grid, health, LaneSelection("node", node="b"))
    assert [grid.lanes[i] for i in on_b] == [("b", 0), ("b", 1)]
    assert len(select_lanes(grid, health, LaneSelection("all"))) == 4


# -- against the golden telemetry and a fleet on disk ---------------------------------------------------------


def test_golden_lanes_match_the_truth() -> None:
    root = GOLDEN / "live_streams"
    truth = json.loads((GOLDEN / "live_streams.truth.json").read_text())["dashboard"]["lanes"]
    reader = DashboardReader(root / "dashboard")
    reader.poll()
    samples = gpu_samples(reader.records("gpu_util"))
    first, newest = samples.ts.min(), samples.ts.max()
    bins = time_bins(float(first), float(newest), 50)
    view = compute_view(samples, phase_spans(reader.records("phases")), bins, now=float(newest))
    expected = [(lane["node"], lane["gpu"]) for lane in sorted(truth, key=lambda lane: lane["index"])]
    assert list(view.grid.lanes) == expected
    assert view.interval == 10.0 and not view.dead
    assert {b.name for b in view.bands} >= {"actor_train", "rollout"}


def test_columns_parse_only_the_hours_the_window_touches(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=2, seconds=4 * 3600 - 60, dead_node=None, slow_node=None)
    columns = TelemetryColumns(tmp_path / "run" / "dashboard")
    assert columns.extent() is not None
    assert [read for _, read in columns.hours_read()] == [False, False, False, False, True]
    hour = columns.hours_read()[1][0]
    assert hour is not None
    samples = columns.gpu_samples(hour + 600, hour + 1200)  # inside the second hour
    assert [read for _, read in columns.hours_read()] == [False, True, False, False, True]
    window = (samples.ts >= hour + 600) & (samples.ts <= hour + 1200)
    assert window.sum() == 61 * 16
    assert samples.ts.min() >= hour, "only the partitions overlapping the window are handed out"
    assert len(samples.lanes) == fleet.lanes and not np.isnan(samples.last_seen).any()


def test_columns_read_only_what_is_new_and_redo_a_rewritten_file(tmp_path: Path) -> None:
    write_fleet(tmp_path / "run", nodes=1, gpus_per_node=2, seconds=300, dead_node=None, slow_node=None)
    dash = tmp_path / "run" / "dashboard"
    columns = TelemetryColumns(dash)
    first = columns.gpu_samples(None, None)
    assert len(first.ts) == 31 * 2
    assert columns.has_news(), "the phases were not handed out yet"
    columns.phase_spans(None, None, [])
    assert not columns.has_news()
    path = sorted((dash / "gpu_util").iterdir())[-1]
    with path.open("a") as handle:
        handle.write(json.dumps({"ts": T0 + 310, "node": "10.1.0.1", "gpu": 0, "util": 7, "mem_mb": 1}) + "\n")
    assert columns.has_news()
    grown = columns.gpu_samples(None, None)
    assert len(grown.ts) == 63 and grown.util[-1] == 7.0
    path.write_text(json.dumps({"ts": T0 + 320, "node": "10.1.0.1", "gpu": 1, "util": 8, "mem_mb": 1}) + "\n")
    rewritten = columns.gpu_samples(None, None)
    assert len(rewritten.ts) == 1 and rewritten.util.tolist() == [8.0], "a rewritten file replaces its rows"
    path.write_text(json.dumps({"ts": T0 + 330, "node": "10.1.0.1", "gpu": 1, "util": 9, "mem_mb": 1}) + "\n")
    again = columns.gpu_samples(None, None)
    assert again.util.tolist() == [9.0], "rewritten to as many records: still replaced, not kept"


def test_cells_give_a_zoomed_out_view_the_means_of_the_samples(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=2, gpus_per_node=2, seconds=3 * 3600, dead_node=None, slow_node=None)
    columns = TelemetryColumns(tmp_path / "run" / "dashboard")
    first, _ = columns.time_range(everything=True) or (0.0, 0.0)
    start = math.floor(first / 600) * 600
    bins = time_bins(start, start + 18 * 600, 18)  # whole 10-minute buckets
    raw = bin_lanes(columns.gpu_samples(None, None), bins)
    cells = bin_lanes(columns.gpu_cells(None, None, 600.0), bins)
    assert cells.lanes == raw.lanes and len(raw.lanes) == fleet.lanes
    assert np.allclose(cells.util, raw.util, equal_nan=True) and np.allclose(cells.mem_mb, raw.mem_mb, equal_nan=True)
    assert (cells.samples == raw.samples).all()
    assert np.allclose(cells.mean_util, raw.mean_util)


def test_columns_phase_spans_add_the_open_phases_given(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=2, gpus_per_node=2, seconds=300, dead_node=None, slow_node=None)
    reader = DashboardReader(tmp_path / "run" / "dashboard")
    reader.poll()
    records = reader.records("phases")
    still = [r for r in records if isinstance(r, Phase) and r.is_open]
    assert len(still) == fleet.lanes
    spans = TelemetryColumns(reader).phase_spans(None, None, still)
    assert int(np.isnan(spans.t1).sum()) == fleet.lanes
    assert len(spans.t0) == len(phase_spans(records).t0)


@pytest.mark.parametrize("cell", [60.0, 600.0])
def test_a_zoomed_out_view_from_hourly_summaries_equals_one_from_every_record(tmp_path: Path, cell: float) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=2, gpus_per_node=2, seconds=3 * 3600, dead_node=None, slow_node=None)
    dash = tmp_path / "run" / "dashboard"
    reader = DashboardReader(dash)
    reader.poll()
    still = [r for r in reader.records("phases") if isinstance(r, Phase) and r.is_open]
    columns = TelemetryColumns(dash)
    first, newest = columns.time_range(everything=True) or (0.0, 0.0)
    start = math.floor(first / cell) * cell
    count = math.ceil((newest - start) / (3 * cell))
    bins = time_bins(start, start + count * 3 * cell, count)  # bins of three whole buckets
    now = newest + 5
    raw = compute_view(columns.gpu_samples(None, None), columns.phase_spans(None, None, still), bins, now=now)
    spans, time = columns.phase_cells(bins, cell, still, now)
    cells = compute_view(columns.gpu_cells(None, None, cell), spans, bins, now=now, time=time)
    assert cells.resolution == cell and raw.resolution is None
    assert np.allclose(cells.grid.util, raw.grid.util, equal_nan=True)
    assert [(b.role, b.name, b.ranks, b.open) for b in cells.bands] == [
        (b.role, b.name, b.ranks, b.open) for b in raw.bands
    ]
    assert all(np.allclose(a.share, b.share) for a, b in zip(cells.bands, raw.bands, strict=True))
    assert np.array_equal(cells.lane_phases.dominant, raw.lane_phases.dominant)
    assert np.allclose(cells.lane_phases.share, raw.lane_phases.share)
    assert len(cells.grid.lanes) == fleet.lanes
