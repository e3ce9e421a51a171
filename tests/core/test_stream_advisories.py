"""Every telemetry advisory rule fires when it should and stays quiet when it should not; the
live_streams golden case reproduces miles' own MFU advisory through ``report``. The engine rules
and the alarm/tuning tiers are tested in test_engine_advisories.py."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.analysis import Level
from miles_tui.core.analysis.stall_rule import stalled_phases
from miles_tui.core.analysis.stream_advisories import (
    MfuSummary,
    low_mfu,
    mfu_summary,
    no_new_data,
    run_mfu,
    step_times,
    stream_advisories,
    stream_corruption,
)
from miles_tui.core.base.tail import StreamReset
from miles_tui.core.commands.report import build_report
from miles_tui.core.follow import RunFollower
from miles_tui.core.synth.dump_files import append_jsonl, write_json
from miles_tui.core.telemetry import MetricStore, Phase
from miles_tui.tui.cli import main
from tests.conftest import GOLDEN, stamp

T = 1_787_223_000.0
"""Start of the synthetic attempts below."""


# --- stalled_phase -----------------------------------------------------------


def _train(t0: float, t1: float, rank: int = 0, name: str = "actor_train") -> Phase:
    return Phase(name, t0, t1, "10.0.0.7", (rank,), rank, "train")


def _history(steps: int = 10) -> list[Phase]:
    """Closed actor_train phases of 20 s, one every 50 s, each preceded by its open marker."""
    out = []
    for i in range(steps):
        t0 = T + 50 * i
        out += [_train(t0, -1), _train(t0, t0 + 20)]
    return out


def test_stall_fires_on_a_phase_open_far_beyond_its_usual_duration() -> None:
    stuck = T + 500
    phases = [*_history(), _train(stuck, -1, rank=1)]
    [advisory] = stalled_phases(phases, T, at=stuck + 2 * 3600)
    assert advisory.level is Level.CRITICAL and advisory.code == "stalled_phase"
    assert "'actor_train'" in advisory.message and "10.0.0.7 rank 1" in advisory.message
    assert "open for 2h on" in advisory.message and "usual 20s" in advisory.message and "360×" in advisory.message


def test_stall_quiet_under_the_floor_for_closed_markers_and_without_a_baseline() -> None:
    stuck = T + 500
    # 25 min open: beyond 6 × 20 s, but under the 30 min floor
    assert stalled_phases([*_history(), _train(stuck, -1)], T, at=stuck + 25 * 60) == []
    # every open marker has its closing record
    assert stalled_phases(_history(), T, at=T + 10 * 3600) == []
    # two closed runs are no baseline
    assert stalled_phases([*_history(2), _train(stuck, -1)], T, at=stuck + 10 * 3600) == []


def test_stall_counts_only_the_current_attempt() -> None:
    dead = _train(T - 3 * 3600, -1)  # the previous attempt died with this phase open
    resumed = [
        Phase(p.name, p.t0 + 600, p.t1 + 600 if p.t1 != -1 else -1, p.node, p.gpus, p.rank, p.role) for p in _history()
    ]
    assert stalled_phases([*_history(), dead, *resumed], T + 600, at=T + 10 * 3600) == []
    assert len(stalled_phases([*_history(), dead, *resumed], None, at=T + 10 * 3600)) == 1  # without the attempt
    # ... nor is the dead attempt a baseline: a resumed run with one closed phase is not judged yet
    again = _train(T + 700, -1)
    assert stalled_phases([*_history(), again, *resumed[:2]], T + 600, at=T + 10 * 3600) == []


# --- low_mfu ----------------------------------------------------------------


def test_low_mfu_fires_with_the_average_steps_and_peak() -> None:
    summary = mfu_summary([0.05, 0.10, 0.11, 0.12], peak_tflops=989.0)
    assert summary == MfuSummary(latest=0.12, mean=pytest.approx(0.11), steps=3, peak_tflops=989.0)
    [advisory] = low_mfu(summary)
    assert advisory.level is Level.WARNING and advisory.code == "low_mfu"
    assert "11.0%" in advisory.message and "3 train steps" in advisory.message and "989 TFLOP/s" in advisory.message
    # percent is detected: the same series logged as percent gives the same advisory
    assert low_mfu(mfu_summary([5.0, 10.0, 11.0, 12.0], 989.0)) == [advisory]


def test_mfu_summary_skips_the_warm_up_step_and_non_finite_values_in_lists_and_arrays() -> None:
    """The run's series comes as a numpy array (a long run logs MFU every step, and this runs after every poll:
    converting a million values to a list held the GIL for 160 ms); lists and arrays give the same summary."""
    rng = np.random.default_rng(7)
    for size in (1, 2, 5, 200):
        values = rng.uniform(0.0, 0.6, size)
        values[rng.random(size) < 0.2] = np.nan
        values[rng.random(size) < 0.1] = np.inf
        steady = [float(v) for v in values[1:] if np.isfinite(v)]
        want = None if not steady else (steady[-1], sum(steady) / len(steady), len(steady))
        for given in (values, values.tolist()):
            got = mfu_summary(given, 500.0)
            assert (got and (got.latest, pytest.approx(got.mean), got.steps)) == (want and (want[0], want[1], want[2]))
    # percent: judged on every finite value, the warm-up step included
    assert mfu_summary(np.array([50.0, 0.4, np.nan]), None) == MfuSummary(0.004, 0.004, 1, None)
    assert mfu_summary(np.array([np.inf, np.nan]), None) is None


def test_low_mfu_quiet_when_healthy_short_or_absent() -> None:
    assert low_mfu(mfu_summary([0.2, 0.45, 0.5, 0.48], 989.0)) == []
    assert low_mfu(mfu_summary([0.02, 0.05, 0.05], 989.0)) == []  # 2 steps after the warm-up one
    assert low_mfu(mfu_summary([0.05], None)) == []
    assert run_mfu(MetricStore(), {}) is None
    assert low_mfu(None) == []


# --- no_new_data -------------------------------------------------------------


def test_no_new_data_warns_then_turns_critical() -> None:
    times = [T + 60 * i for i in range(20)]  # a step a minute
    newest = times[-1]
    [warning] = no_new_data(newest, times, newest + 20 * 60, "train/step")
    assert warning.level is Level.WARNING and warning.code == "no_new_data"
    assert "20min" in warning.message and "every 1min" in warning.message
    [critical] = no_new_data(newest, times, newest + 3 * 3600, "train/step")
    assert critical.level is Level.CRITICAL and "written for 3h," in critical.message


@pytest.mark.parametrize("count", [40, 41])  # an even and an odd number of intervals
def test_the_usual_interval_is_the_median_of_the_sorted_finite_intervals(count: int) -> None:
    """Times out of order, with NaN and Infinity among them: the warning starts just past 5 times the median
    interval of the sorted finite times (statistics.median's rule: the middle one, or the mean of the two)."""
    import itertools
    import statistics

    rng = np.random.default_rng(count)
    finite = T + np.cumsum(rng.uniform(600, 7200, count + 1))
    times = [*rng.permutation(finite).tolist(), float("nan"), float("inf")]
    ordered = sorted(finite.tolist())
    usual = statistics.median(b - a for a, b in itertools.pairwise(ordered))
    newest = ordered[-1]
    assert no_new_data(newest, times, newest + 5 * usual, "train/step") == []
    assert no_new_data(newest, np.array(times), newest + 5 * usual * (1 + 1e-9), "train/step") != []


def test_no_new_data_quiet_while_fresh_or_without_history() -> None:
    times = [T + 60 * i for i in range(20)]
    assert no_new_data(times[-1], times, times[-1] + 4 * 60, "train/step") == []  # under 5 × 60 s and 10 min
    assert no_new_data(T, [T, T + 60, T + 120], T + 10 * 3600, "train/step") == []  # 2 intervals: too young
    assert no_new_data(None, times, T + 10 * 3600, "train/step") == []
    slow = [T + 3600 * i for i in range(5)]  # an hour a step: 3 h of quiet is less than 5 steps
    assert no_new_data(slow[-1], slow, slow[-1] + 3 * 3600, "rollout/step") == []


# --- malformed_stream_lines / stream_reset ----------------------------------


def _dashboard(root: Path, *, start_ts: float = T) -> Path:
    dashboard = root / "dashboard"
    write_json(dashboard / "meta.json", {"run_name": "tiny", "start_ts": start_ts, "args": {}, "schema_version": 1})
    return dashboard


def test_malformed_lines_name_the_file_count_and_first_offset(tmp_path: Path) -> None:
    dashboard = _dashboard(tmp_path / "run")
    good = json.dumps({"ts": T, "step_key": "train/step", "step": 0, "metrics": {"train/loss": 1.0}}) + "\n"
    (dashboard / "metrics.jsonl").write_text(good + "{not json\n" + good + '{"ts": 1}\n')
    follower = RunFollower(tmp_path / "run")
    delta = follower.poll(T + 60)
    [advisory] = stream_corruption(delta.problems, delta.resets, follower.dashboard.malformed_counts())
    assert advisory.level is Level.WARNING and advisory.code == "malformed_stream_lines"
    assert advisory.path == dashboard / "metrics.jsonl"
    assert f"2 malformed lines skipped, the first at byte {len(good)} (not valid JSON" in advisory.message
    # a later poll reports nothing new, but the reader's totals keep the count
    [later] = stream_corruption((), (), follower.dashboard.malformed_counts())
    assert "2 malformed lines skipped;" in later.message


def test_resets_warn_and_a_clean_stream_is_quiet(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    [reset] = stream_corruption((), [StreamReset(path, 5000, 120, "shrank")])
    assert reset.level is Level.WARNING and reset.code == "stream_reset" and reset.path == path
    assert "shrank: 5000 bytes had been read, it now has 120" in reset.message
    dashboard = _dashboard(tmp_path / "run")
    append_jsonl(dashboard / "metrics.jsonl", [{"ts": T, "step_key": "train/step", "step": 0, "metrics": {}}])
    follower = RunFollower(tmp_path / "run")
    delta = follower.poll(T + 60)
    assert stream_corruption(delta.problems, delta.resets, follower.dashboard.malformed_counts()) == []


# --- gathering from a follower ---------------------------------------------


def _hung_run(root: Path, *, sampled_for: float) -> Path:
    """Ten steps (MFU 5 %), then actor_train opens at T + 500 and never closes while the GPU
    sampler keeps writing for ``sampled_for`` seconds; every file is stamped at the last sample."""
    dashboard = _dashboard(root)
    rows = []
    for step in range(10):
        rows.append({"ts": T + 50 * step, "step_key": "train/step", "step": step, "metrics": {"train/step": step}})
        mfu = {"perf/actor_train_mfu": 0.05, "perf/mfu_peak_tflops": 989.0, "rollout/step": step}
        rows.append({"ts": T + 50 * step + 1, "step_key": "rollout/step", "step": step, "metrics": mfu})
    append_jsonl(dashboard / "metrics.jsonl", rows)
    phases = [{"name": p.name, "t0": p.t0, "t1": p.t1, "node": p.node, "gpus": [0], "rank": 0} for p in _history()]
    phases.append({"name": "actor_train", "t0": T + 500, "t1": -1, "node": "10.0.0.7", "gpus": [0], "rank": 0})
    append_jsonl(dashboard / "phases" / "20260820_10.jsonl", phases)
    newest = T + 510
    for ts in np.arange(T + 510, T + 510 + sampled_for, 60.0).tolist():
        hour = time.strftime("%Y%m%d_%H", time.gmtime(ts))
        sample = {"ts": ts, "node": "10.0.0.7", "gpu": 0, "util": 0.0, "mem_mb": 1000.0, "power_w": 80.0}
        append_jsonl(dashboard / "gpu_util" / f"{hour}.jsonl", [sample])
        newest = ts
    stamp(root, newest)
    return root


def test_stream_advisories_gathers_every_rule_alarms_first(tmp_path: Path) -> None:
    # hung in actor_train: the sampler wrote for 2 h more, then everything stopped 3 h ago
    run = _hung_run(tmp_path / "run", sampled_for=2 * 3600)
    newest = T + 510 + 2 * 3600 - 60
    follower = RunFollower(run)
    delta = follower.poll(newest + 3 * 3600)
    advisories = stream_advisories(follower, newest + 3 * 3600, problems=delta.problems)
    # the stall is an alarm: the MFU tuning advice waits until it clears (issue 8 item 7)
    assert [(a.code, a.level) for a in advisories] == [
        ("stalled_phase", Level.CRITICAL),
        ("no_new_data", Level.CRITICAL),
    ]
    assert "open for 1h59m" in advisories[0].message  # newest data − phase start, not now − phase start
    assert step_times(follower.metrics)[0] == "train/step"
    # the same run, polled right after it wrote: stalled (so the low-MFU advice still waits), not stale
    fresh = RunFollower(run)
    fresh.poll(newest + 30)
    assert [a.code for a in stream_advisories(fresh, newest + 30)] == ["stalled_phase"]


def test_stall_is_judged_at_the_newest_data_not_the_wall_clock(tmp_path: Path) -> None:
    # everything stopped 20 s after actor_train opened: looked at hours (or months) later, the
    # phase was open for 20 s when the data ends; that the run stopped is no_new_data's to say
    run = _hung_run(tmp_path / "run", sampled_for=20)
    for later in (3 * 3600, 2459 * 3600):
        follower = RunFollower(run)
        follower.poll(T + 530 + later)
        codes = [a.code for a in stream_advisories(follower, T + 530 + later)]
        assert "stalled_phase" not in codes and codes[0] == "no_new_data", codes


# --- the golden live_streams case ------------------------------------------


def _live_streams(tmp_path: Path, mtime: float) -> Path:
    root = tmp_path / "live_streams"
    shutil.copytree(GOLDEN / "live_streams", root)
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    stamp(root, mtime)
    return root


def _truth() -> dict[str, Any]:
    path = GOLDEN / "live_streams.truth.json"
    truth: dict[str, Any] = json.loads(path.read_text())
    return truth


def _figures(message: str) -> tuple[float, int, float]:
    """(average MFU %, train steps, peak TFLOP/s) as a message states them."""
    mean = re.search(r"(\d+\.\d)%", message)
    steps = re.search(r"(\d+) train steps", message)
    peak = re.search(r"(\d+(?:\.\d+)?) TFLOP/s", message)
    assert mean and steps and peak, message
    return float(mean.group(1)), int(steps.group(1)), float(peak.group(1))


def test_live_streams_report_reproduces_miles_mfu_advisory(tmp_path: Path) -> None:
    truth = _truth()
    [expected] = truth["advisories"]
    written = T + 3600
    root = _live_streams(tmp_path, written)
    report = build_report(root, written + 3600)  # the truth was computed with files an hour old
    [mfu] = [a for a in report.advisories if a.code == "low_mfu"]
    assert mfu.level.label == expected["level"] == "warning"
    assert _figures(mfu.message) == _figures(expected["message"]) == (11.0, 59, 989.0)
    follower = RunFollower(root)
    follower.poll(written + 3600)
    summary = run_mfu(follower.metrics, {})
    want = truth["dashboard"]["mfu_summary"]
    assert summary is not None and summary.steps == want["steps"] and summary.peak_tflops == want["peak"]
    assert summary.mean == pytest.approx(want["mean"], abs=1e-5)
    assert summary.latest == pytest.approx(want["latest"], abs=1e-5)
    # nothing is stalled (every open marker closed), no line is malformed, and there are no engine series
    assert {a.code for a in report.advisories} <= {"low_mfu", "no_new_data"}
    assert report.exit_status == 1


def test_live_streams_report_cli_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _live_streams(tmp_path, time.time() - 3600)
    # its records are months old and no num_rollout says it ended: quiet (critical) unless --quiet-ok
    assert main(["report", str(root), "--json"]) == 2
    capsys.readouterr()
    assert main(["report", str(root), "--json", "--quiet-ok"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["exit_status"] == 1
    [mfu] = [a for a in document["advisories"] if a["code"] == "low_mfu"]
    assert mfu["level"] == "warning" and _figures(mfu["message"]) == (11.0, 59, 989.0)
    assert all(a["level"] != "critical" for a in document["advisories"] if a["code"] != "no_new_data")
