"""Baseline runs, headless: alignment by step, deltas at the same step, missing steps said, unusable folders,
and ``report --baseline`` on golden runs and on a demo run against a copy of itself."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis.baseline import (
    DELTA_FIGURES,
    align,
    common_steps,
    last_common_step,
    point_delta,
    step_delta,
    value_exactly_at,
)
from miles_tui.core.analysis.baseline_run import open_baseline
from miles_tui.core.base.errors import RunDirError
from miles_tui.core.dump import StepAggregate
from miles_tui.core.telemetry import MetricSeries
from miles_tui.tui.cli import main
from tests.conftest import EPOCH, stamp, write_demo_run

NAN = math.nan


def _series(steps: list[float], values: list[float], key: str = "train/loss") -> MetricSeries:
    count = len(steps)
    return MetricSeries(
        key, "train/step", np.arange(count), np.array(steps, float), np.array(values, float), np.zeros(count)
    )


def _aggregate(rid: int, reward: float | None = 0.5, lp: float | None = 0.02) -> StepAggregate:
    return StepAggregate(
        rollout_id=rid, evaluation=False, n_samples=8, reward_mean=reward, reward_std=0.1,
        response_length_mean=40.0, truncated_frac=0.25, zero_std_group_frac=0.5, mean_abs_lp_diff=lp,
        mean_entropy=1.0, mixed_version_frac=0.0, avg_staleness=1.0, alignment_failed=0,
    )  # fmt: skip


# -- alignment ----------------------------------------------------------------------------


def test_align_takes_the_baseline_at_exactly_each_run_step() -> None:
    run = _series([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0])
    base = _series([0, 2, 3, 5], [0.5, 2.5, NAN, 9.0])
    aligned = align(run, base)
    assert aligned.step.tolist() == [0, 1, 2, 3]
    assert aligned.missing.tolist() == [False, True, False, False]  # step 1: nothing logged, not step 0's value
    assert aligned.baseline[0] == 0.5 and aligned.baseline[2] == 2.5
    assert math.isnan(aligned.baseline[1]) and math.isnan(aligned.baseline[3])  # logged NaN: not missing
    assert aligned.delta[0] == 0.5 and math.isnan(aligned.delta[1])


def test_align_without_a_baseline_series_marks_every_step_missing() -> None:
    aligned = align(_series([3, 1], [1.0, 2.0]), None)
    assert aligned.step.tolist() == [1, 3] and aligned.missing.all()


def test_a_step_logged_twice_counts_its_last_value() -> None:
    base = _series([0, 1, 1, 2], [0.0, 1.0, 7.0, 2.0])  # a resumed run logs step 1 again
    assert value_exactly_at(base, 1) == 7.0
    assert align(_series([1], [10.0]), base).baseline.tolist() == [7.0]


def test_point_delta_is_none_where_either_run_logged_nothing() -> None:
    run, base = _series([0, 1], [1.0, 2.0]), _series([0], [0.25])
    assert point_delta(run, base, 0).delta == 0.75
    assert point_delta(run, base, 1).baseline is None and point_delta(run, base, 1).delta is None
    assert point_delta(run, None, 0).delta is None
    assert last_common_step(run, base) == 0 and last_common_step(run, _series([9], [1.0])) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=30),
    st.lists(st.integers(0, 40), max_size=30),
)
def test_align_agrees_with_a_lookup_per_step(run_steps: list[int], base_steps: list[int]) -> None:
    run = _series([float(s) for s in run_steps], [float(s) for s in run_steps])
    base = _series([float(s) for s in base_steps], [float(s) * 2 + i for i, s in enumerate(base_steps)])
    aligned = align(run, base)
    for step, value, missing in zip(aligned.step, aligned.baseline, aligned.missing, strict=True):
        expected = value_exactly_at(base, step)
        assert missing == (expected is None)
        if expected is not None:
            assert value == expected
    assert common_steps(run_steps, base_steps) == tuple(sorted(set(run_steps) & set(base_steps)))


# -- step deltas --------------------------------------------------------------------------


def test_step_delta_is_run_minus_baseline_at_the_same_step() -> None:
    delta = step_delta(3, _aggregate(3, reward=0.75), {2: _aggregate(2, 0.0), 3: _aggregate(3, reward=0.5)})
    assert delta.present and delta.reason is None
    assert [d.name for d in delta.figures] == list(DELTA_FIGURES)
    reward = delta.figure("reward_mean")
    assert (reward.a, reward.b, reward.delta) == (0.5, 0.75, 0.25)
    assert delta.figure("avg_staleness").delta == 0.0


def test_a_step_the_baseline_lacks_is_said_not_zero() -> None:
    delta = step_delta(5, _aggregate(5), {1: _aggregate(1), 2: _aggregate(2)}, baseline_steps=(1, 2))
    assert not delta.present and delta.reason == "it has no step 5 (its last is 2)"
    assert all(d.delta is None and d.a is None for d in delta.figures)
    listed = step_delta(5, _aggregate(5), {}, baseline_steps=(5,))
    assert listed.reason == "its step 5 is not read yet"
    failed = step_delta(5, _aggregate(5), {}, {5: "truncated shard"}, (5,))
    assert failed.reason == "its step 5 is unreadable: truncated shard"
    assert step_delta(0, None, {}).reason == "it has no step 0 (it has no train step yet)"


def test_a_figure_one_side_lacks_has_no_delta() -> None:
    delta = step_delta(1, _aggregate(1, lp=None), {1: _aggregate(1)})
    assert delta.present and delta.figure("mean_abs_lp_diff").delta is None
    nan = step_delta(1, _aggregate(1, reward=NAN), {1: _aggregate(1)})
    assert nan.figure("reward_mean").b is None and nan.figure("reward_mean").delta is None


# -- opening and following ------------------------------------------------------------------


def test_a_folder_that_is_not_a_dump_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    with pytest.raises(RunDirError) as refused:
        open_baseline(tmp_path / "notes")
    assert str(refused.value).startswith(f"{tmp_path / 'notes'}: not usable as a baseline: not a --dump-details")
    with pytest.raises(RunDirError, match="not usable as a baseline: no such run directory"):
        open_baseline(tmp_path / "missing")


def test_a_baseline_follows_its_steps_and_metrics_read_only(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "base", 3)
    stamp(root, EPOCH - 600)
    before = sorted((p, p.stat().st_mtime) for p in root.rglob("*"))
    baseline = open_baseline(root)
    first = baseline.poll(EPOCH, budget=0.0)  # one step per poll at least, newest first
    assert first.steps == (2,) and first.pending == 2 and "train/loss" in first.metric_keys
    baseline.poll(EPOCH)
    assert sorted(baseline.aggregates) == [0, 1, 2] and not baseline.failures
    assert baseline.metrics.series("train/loss") is not None
    write_demo_run(root, 1, start=3, end=EPOCH - 300)
    for path in [*root.glob("rollout_data/3.pt"), *root.glob("train_data/3_*.pt")]:
        os.utime(path, (EPOCH - 300, EPOCH - 300))
    later = baseline.poll(EPOCH)
    assert later.steps == (3,) and 3 in baseline.aggregates
    assert baseline.delta_at(3, baseline.aggregates[3]).figure("reward_mean").delta == 0.0
    assert baseline.delta_at(9, None).reason == "it has no step 9 (its last is 3)"
    assert all(p.parent.exists() for p, _ in before)


# -- report --baseline ------------------------------------------------------------------------


def _report(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["report", *args])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_report_baseline_on_two_golden_runs(golden_copy, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    tp_dup, pp2 = golden_copy("tp_dup"), golden_copy("pp2")
    status, out, err = _report([str(pp2), "--baseline", str(tp_dup), "--json"], capsys)
    document = json.loads(out)
    plain_status, plain, _ = _report([str(pp2), "--json"], capsys)
    without = json.loads(plain)
    assert status == plain_status and not err
    assert {k: v for k, v in document.items() if k not in ("baselines", "run")} == {
        k: v for k, v in without.items() if k not in ("baselines", "run")
    }  # the existing keys are unchanged
    assert without["baselines"] == []
    (entry,) = document["baselines"]
    assert entry["name"] == "tp_dup" and entry["step"] == 1 and entry["present"] is True
    assert entry["steps_in_common"] == 2 and entry["latest"] == 2
    reward = entry["figures"]["reward_mean"]
    assert reward["run"] == pytest.approx(0.375) and reward["baseline"] == pytest.approx(5 / 12)
    assert reward["delta"] == pytest.approx(0.375 - 5 / 12)
    # the other way round: tp_dup's newest step 2 is not in pp2: said, and no number stands in for it
    _status, text, _ = _report([str(tp_dup), "--baseline", str(pp2)], capsys)
    assert f"baseline pp2  ({pp2}): 2 train steps in common, its latest 1" in text
    assert "step 2: no delta: it has no step 2 (its last is 1)" in text


def test_report_baseline_of_a_demo_run_against_its_copy_is_zero(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(demo_run, copy)
    stamp(copy, EPOCH - 600)
    _status, out, _ = _report([str(demo_run), "--baseline", str(copy), "--json"], capsys)
    (entry,) = json.loads(out)["baselines"]
    assert entry["present"] and entry["steps_in_common"] == 4 and entry["step"] == 3
    assert all(figure["delta"] == 0 for figure in entry["figures"].values()), entry["figures"]
    _status, text, _ = _report([str(demo_run), "--baseline", str(copy)], capsys)
    assert "step 3 (run vs baseline): reward " in text and "(Δ +0.000)" in text and "(Δ +0pt)" in text


def test_report_refuses_a_baseline_that_is_not_a_run_as_a_command_line_error(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --baseline exits 2 (a command line naming an unusable path), printing no report: a script
    reading exit 0 would take a report without its deltas for one with them."""
    (tmp_path / "plain").mkdir()
    for other in (tmp_path / "plain", tmp_path / "nonexistent"):
        status, out, err = _report([str(demo_run), "--baseline", str(other), "--json"], capsys)
        assert status == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith(f"miles-tui: --baseline {other}: ")
        assert "Traceback" not in err


def test_a_baseline_run_without_train_steps_is_reported_as_such(
    demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "young" / "rollout_data").mkdir(parents=True)
    status, out, _ = _report([str(demo_run), "--baseline", str(tmp_path / "young"), "--json"], capsys)
    (entry,) = json.loads(out)["baselines"]
    assert status == _report([str(demo_run)], capsys)[0]
    assert entry["error"] is None and entry["latest"] is None and entry["steps_in_common"] == 0
