"""The slowest-phase pick (miles' mean span of one phase per lane), power binned like utilisation, and the
processes at a moment from ``gpu_processes`` hours (nearest snapshot per lane, one hour read)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from miles_tui.core.analysis.compute_view import bin_lanes
from miles_tui.core.analysis.slowest_phase import (
    DEFAULT_PHASE,
    phase_names,
    pick_expression,
    slowest_phase,
    train_actors,
)
from miles_tui.core.telemetry import Phase, TelemetryColumns
from miles_tui.core.telemetry.phase_bands import phase_spans
from miles_tui.core.telemetry.process_hours import MAX_PROCESSES, ProcessHours
from miles_tui.core.telemetry.time_bins import time_bins

HOUR = 1787223600.0  # 2026-08-20 11:00 UTC


def _phase(name: str, t0: float, t1: float, node: str, gpus: list[int], rank: int, role: str = "train") -> Phase:
    return Phase(name, t0, t1, node, tuple(gpus), rank, role)


def test_lanes_rank_by_their_mean_span_of_the_phase() -> None:
    spans = phase_spans([
        _phase("update_weights", 0, 10, "a", [0], 0), _phase("update_weights", 20, 40, "a", [0], 0),  # mean 15
        _phase("update_weights", 0, 30, "b", [1], 1),  # 30
        _phase("update_weights", 0, 5, "a", [1, 2], 2),  # 5 on both lanes
        _phase("actor_train", 0, 99, "c", [0], 3),
        _phase("update_weights", 50, -1.0, "c", [0], 3),  # open: no duration yet
    ])  # fmt: skip
    picked = slowest_phase(spans, "update_weights")
    assert [(p.lane, p.mean, p.spans) for p in picked] == [
        (("b", 1), 30.0, 1), (("a", 0), 15.0, 2), (("a", 1), 5.0, 1), (("a", 2), 5.0, 1),
    ]  # fmt: skip
    assert [p.lane for p in slowest_phase(spans, "update_weights", top=1)] == [("b", 1)]
    assert slowest_phase(spans, "update_weights", since=35)[0].lane == ("a", 0), "only spans in the window"
    assert slowest_phase(spans, "nothing") == ()
    assert phase_names(spans) == (DEFAULT_PHASE, "actor_train")
    assert pick_expression([p.lane for p in picked[:2]]) == "gpu:b:1, gpu:a:0"
    assert sorted(actor[0] for actor in train_actors(spans)) == ["a", "a", "b", "c"]


def test_power_is_binned_as_utilisation_is(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    (dashboard / "gpu_util").mkdir(parents=True)
    lines = [{"ts": HOUR + s, "node": "n", "gpu": 0, "util": 50, "mem_mb": 1000, "power_w": p}
             for s, p in ((0, 300), (5, 500), (10, "x"), (15, 700))]  # fmt: skip
    (dashboard / "gpu_util" / "20260820_11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    columns = TelemetryColumns(dashboard)
    samples = columns.gpu_samples(HOUR, HOUR + 20)
    grid = bin_lanes(samples, time_bins(HOUR, HOUR + 20, 2))
    assert grid.power_w is not None
    assert grid.power_w[0].tolist() == [400.0, 700.0], "the string is no value, never 0"
    cells = columns.gpu_cells(HOUR, HOUR + 3600, 60.0)
    grid = bin_lanes(cells, time_bins(HOUR, HOUR + 120, 2))
    assert grid.power_w is not None and grid.power_w[0, 0] == pytest.approx(500.0)
    assert math.isnan(grid.power_w[0, 1])


def _write_processes(dashboard: Path) -> None:
    folder = dashboard / "gpu_processes"
    folder.mkdir(parents=True)
    rows = []
    for ts in (HOUR + 100, HOUR + 400):
        rows += [{"ts": ts, "node": "n", "gpu": 0, "pid": 7, "name": "ray::Train", "mem_mb": 9000 + ts - HOUR},
                 {"ts": ts, "node": "n", "gpu": 0, "pid": 4194303, "name": "sglang\x1b[31m", "mem_mb": 40000},
                 {"ts": ts, "node": "n", "gpu": 1, "pid": 9, "name": None, "mem_mb": "?"}]  # fmt: skip
    rows += [{"ts": HOUR + 500, "node": "n", "gpu": 2, "pid": p, "name": "w", "mem_mb": p} for p in range(12)]
    (folder / "20260820_11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    (folder / "20260820_13.jsonl").write_text("not json\n")


def test_processes_at_the_nearest_snapshot_largest_first(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    _write_processes(dashboard)
    hours = ProcessHours(dashboard)
    assert hours.exists()
    lane0, lane1, lane2, absent = hours.at(HOUR + 300, [("n", 0), ("n", 1), ("n", 2), ("m", 0)])
    assert lane0.ts == HOUR + 400
    assert [(p.pid, p.name, p.mem_mb) for p in lane0.processes] == [
        (4194303, "sglang\x1b[31m", 40000.0), (7, "ray::Train", 9400.0),
    ]  # fmt: skip
    assert lane1.processes[0].name is None and np.isnan(lane1.processes[0].mem_mb)
    assert len(lane2.processes) == MAX_PROCESSES and lane2.more == 12 - MAX_PROCESSES
    assert lane2.processes[0].mem_mb == 11.0
    assert absent.ts is None and absent.processes == ()
    far = hours.at(HOUR + 3599, [("n", 0)])[0]
    assert far.ts is None, "a snapshot more than 10 minutes away is not at the cursor"
    assert hours.at(HOUR + 2 * 3600 + 10, [("n", 0)])[0].ts is None, "a malformed hour reads as no snapshot"
