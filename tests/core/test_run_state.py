"""RunFollower.poll(now): newly visible and changed steps, new stream data, data age, the current
attempt and its open phases, problems; and a poll that finds nothing reads nothing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from miles_tui.core.base.tail import MalformedLineError
from miles_tui.core.dump import Run
from miles_tui.core.follow import RunFollower, StepFollower
from miles_tui.core.telemetry.stream_records import GpuUtil

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
T = 1_787_223_000.0


def _touch(path: Path, mtime: float, data: bytes = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


def _append(path: Path, *records: dict[str, Any], mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in records))
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def _phase(name: str, t0: float, t1: float, rank: int = 0) -> dict[str, Any]:
    return {"name": name, "t0": t0, "t1": t1, "node": "n1", "gpus": [rank], "rank": rank, "role": "train"}


def test_steps_appear_by_the_visibility_rule_and_changes_are_summarized_again(tmp_path: Path) -> None:
    """The step follower (core's one, the monitor's and report's) and the run follower's data age over both."""
    run = tmp_path / "run"
    _touch(run / "rollout_data" / "0.pt", T)
    _touch(run / "rollout_data" / "eval_0.pt", T)
    _touch(run / "rollout_data" / "1.pt", T + 55)
    _touch(run / "train_data" / "1_3.pt", T + 58)  # any rank's train file shows a fresh step
    _touch(run / "rollout_data" / "2.pt", T + 59)
    steps, follower = StepFollower(Run(run), workers=1), RunFollower(run)
    first = steps.poll(T + 60)
    assert (first.new_train, first.new_evaluation, first.train) == ((0, 1), (0,), (0, 1))
    assert first.newest_write == T + 58  # the visible steps' files (2.pt is 1 s old: not visible yet)
    follower.note_step_write(first.newest_write)
    assert follower.poll(T + 60).data_age == pytest.approx(2.0)
    again = steps.poll(T + 60)
    assert (again.new_train, again.new_evaluation, again.summaries, again.failures) == ((), (), [], [])
    _touch(run / "train_data" / "1_1.pt", T + 61)  # another shard of a visible step
    second = steps.poll(T + 70)  # and step 2 is now 11 s old
    assert second.new_train == (2,) and second.train == (0, 1, 2)
    assert {(rid, ev) for rid, ev, *_ in second.failures} >= {(1, False), (2, False)}  # read again: changed, new
    follower.note_step_write(second.newest_write)
    assert follower.poll(T + 70).data_age == pytest.approx(9.0)


def test_metrics_and_telemetry_arrive_in_deltas(tmp_path: Path) -> None:
    run = tmp_path / "run"
    dash = run / "dashboard"
    _append(dash / "metrics.jsonl", {"ts": T, "step_key": "train/step", "step": 0, "metrics": {"train/loss": 0.5}})
    _append(dash / "gpu_util" / "20260820_10.jsonl", {"ts": T, "node": "n1", "gpu": 0, "util": 90})
    follower = RunFollower(run)
    first = follower.poll(T + 5)
    assert first.metric_records == range(1) and first.metric_keys == ("train/loss",)
    assert first.records["gpu_util"] == (GpuUtil(T, "n1", 0, 90, None, None),)
    _append(dash / "metrics.jsonl", {"ts": T + 1, "step_key": "train/step", "step": 1, "metrics": {"x": 1}})
    second = follower.poll(T + 6)
    assert second.metric_records == range(1, 2) and second.metric_keys == ("x",) and not second.records
    series = follower.metrics.series("x", start=second.metric_records.start)
    assert series is not None and series.value.tolist() == [1.0]
    assert follower.state().record_counts["metrics"] == 2


def test_a_poll_that_finds_nothing_reads_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    dash = run / "dashboard"
    _append(dash / "metrics.jsonl", {"ts": T, "step_key": "s", "step": 0, "metrics": {"m": 1.0}})
    for hour in ("20260820_10", "20260820_11", "20260820_12"):
        _append(dash / "phases" / f"{hour}.jsonl", _phase("rollout", T, T + 1))
    (dash / "meta.json").write_text(json.dumps({"run_name": "r", "start_ts": T}))
    opened: list[Path] = []
    follower = RunFollower(run, read_hook=lambda path, _offset: opened.append(path))
    follower.poll(T)
    assert len(opened) == 4
    for _ in range(20):
        assert follower.poll(T + 1).is_empty
    assert len(opened) == 4


def test_the_current_attempt_and_its_open_phases(tmp_path: Path) -> None:
    run = tmp_path / "run"
    dash = run / "dashboard"
    meta = dash / "meta.json"
    dash.mkdir(parents=True)
    meta.write_text(json.dumps({"run_name": "r", "start_ts": T}))
    phases = dash / "phases" / "20260820_10.jsonl"
    _append(phases, _phase("actor_train", T + 10, -1), _phase("actor_train", T + 10, -1, rank=1))
    follower = RunFollower(run)
    first = follower.poll(T + 20)
    assert first.attempt_start == T and not first.attempt_changed
    assert [(p.name, p.rank) for p in first.open_phases] == [("actor_train", 0), ("actor_train", 1)]

    _append(phases, _phase("actor_train", T + 10, T + 30))  # rank 0 closes
    assert [p.rank for p in follower.poll(T + 31).open_phases] == [1]

    # The run died with rank 1's phase open, and was resumed: meta.json is rewritten.
    meta.write_text(json.dumps({"run_name": "r", "start_ts": T + 100}))
    _append(phases, _phase("actor_train", T + 110, -1, rank=0))
    resumed = follower.poll(T + 120)
    assert resumed.attempt_changed and resumed.attempt_start == T + 100
    assert [(p.rank, p.t0) for p in resumed.open_phases] == [(0, T + 110)]  # the dead attempt's phase is not open
    assert follower.state().open_phases == resumed.open_phases
    assert not follower.poll(T + 121).attempt_changed


def test_stream_problems_are_reported_and_following_goes_on(tmp_path: Path) -> None:
    run = tmp_path / "run"
    path = run / "dashboard" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    good = '{"ts": 1, "step_key": "s", "step": 0, "metrics": {}}\n'
    path.write_text(good + '{"ts": \n')
    follower = RunFollower(run)
    delta = follower.poll(T)
    assert [(type(p), p.offset) for p in delta.problems] == [(MalformedLineError, len(good))]
    assert follower.state().malformed_lines == 1
    path.write_text('{"ts": 2, "step_key": "s", "step": 0, "metrics": {}}\n')
    reset = follower.poll(T)
    assert reset.reset_streams == ("metrics",) and reset.resets[0].previous_offset == len(good) + 8
    assert reset.metric_records == range(1) and not reset.is_empty


def test_golden_live_streams_followed(tmp_path: Path) -> None:
    truth = json.loads((GOLDEN / "live_streams.truth.json").read_text())["dashboard"]
    shutil.copytree(GOLDEN / "live_streams", tmp_path / "run")
    follower = RunFollower(tmp_path / "run")
    delta = follower.poll(truth["time_range"][1])
    state = follower.state()
    assert dict(state.record_counts) == truth["record_counts"]
    assert state.time_range == pytest.approx(tuple(truth["time_range"]), abs=1e-5)
    assert delta.attempt_start == truth["meta"]["start_ts"]
    assert delta.open_phases == ()  # every actor_train marker has its closing record
    assert {k: len(v) for k, v in delta.records.items()} == {"phases": 540, "gpu_util": 604}
    assert not delta.problems
