"""Comparing two steps group by group, checked by hand on golden dumps."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from pathlib import Path

import pytest

from miles_tui.core.analysis import compare_steps, group_across_steps, group_of
from miles_tui.core.analysis.compare import AGGREGATE_FIGURES, GROUP_FIGURES, sample_group_across_steps
from miles_tui.core.dump import Run, StepSummary

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _summaries(case: str, *rids: int) -> list[StepSummary]:
    run = Run(GOLDEN / case, use_cache=False)
    now = time.time() + 3600
    return [run.summary(rid, False, now) for rid in rids]


def _members(summary: StepSummary, group: int) -> list[float]:
    return [r.raw_reward for r in summary.rows if r.group_index == group and r.raw_reward is not None]


def test_group_deltas_by_hand_on_tp_dup_steps_0_and_1() -> None:
    a, b = _summaries("tp_dup", 0, 1)
    comparison = compare_steps(a, b)
    assert [g.group_index for g in comparison.groups] == [0, 1, 2]
    for group in comparison.groups:
        assert group.group_index is not None
        ra, rb = _members(a, group.group_index), _members(b, group.group_index)
        reward = group.delta("reward_mean")
        assert reward.a == pytest.approx(statistics.fmean(ra)) and reward.b == pytest.approx(statistics.fmean(rb))
        assert reward.delta == pytest.approx(statistics.fmean(rb) - statistics.fmean(ra))
        std = group.delta("reward_std")
        assert std.delta == pytest.approx(statistics.stdev(rb) - statistics.stdev(ra))
        lengths = group.delta("response_length_mean")
        la = [r.response_length for r in a.rows if r.group_index == group.group_index]
        lb = [r.response_length for r in b.rows if r.group_index == group.group_index]
        assert lengths.delta == pytest.approx(statistics.fmean(lb) - statistics.fmean(la))
        assert group.delta("n").delta == 0
        assert [d.name for d in group.deltas] == list(GROUP_FIGURES)
    # Hand-checked figures: group 2 went from all-correct to all-wrong, both degenerate.
    last = comparison.groups[2]
    assert last.delta("reward_mean").delta == pytest.approx(-1.0)
    assert last.a is not None and last.b is not None and last.a.zero_std and last.b.zero_std


def test_step_level_deltas_are_b_minus_a() -> None:
    a, b = _summaries("tp_dup", 0, 1)
    comparison = compare_steps(a, b)
    assert [d.name for d in comparison.aggregate] == list(AGGREGATE_FIGURES)
    assert comparison.figure("reward_mean").delta == pytest.approx(5 / 12 - 0.5)
    assert comparison.figure("response_length_mean").delta == pytest.approx(21.0 - 26.25)
    assert comparison.figure("n_samples").delta == 0
    expected = (b.aggregate.mean_abs_lp_diff or 0) - (a.aggregate.mean_abs_lp_diff or 0)
    assert comparison.figure("mean_abs_lp_diff").delta == pytest.approx(expected)


def test_average_staleness_of_a_group_skips_samples_without_one() -> None:
    a, b = _summaries("staleness", 9, 10)
    comparison = compare_steps(a, b)
    for group in comparison.groups:
        for summary, figures in ((a, group.a), (b, group.b)):
            assert figures is not None
            stale = [
                r.staleness for r in summary.rows if r.group_index == group.group_index and r.staleness is not None
            ]
            if stale:
                assert figures.avg_staleness == pytest.approx(statistics.fmean(stale))
            else:
                assert figures.avg_staleness is None
    assert any(r.staleness is None for r in b.rows), "the case must have samples without a numeric version"


def test_a_group_in_one_step_only_has_no_deltas() -> None:
    a, b = _summaries("tp_dup", 0, 1)
    without_2 = replace(b, rows=tuple(r for r in b.rows if r.group_index != 2), groups=b.groups[:2])
    comparison = compare_steps(a, without_2)
    only_a = comparison.groups[2]
    assert only_a.a is not None and only_a.b is None
    assert all(d.delta is None and d.b is None for d in only_a.deltas)
    assert only_a.delta("reward_mean").a == pytest.approx(1.0)


def test_the_group_of_a_sample_across_steps() -> None:
    summaries = _summaries("tp_dup", 0, 1, 2)
    first = summaries[0]
    assert group_of(first, 5) == 1
    assert group_of(first, 999) is None
    trace = sample_group_across_steps(first, 5, reversed(summaries))
    assert [t.figures.rollout_id for t in trace] == [0, 1, 2]
    for found, summary in zip(trace, summaries, strict=True):
        assert found.figures.group_index == 1
        assert found.rows == tuple(r for r in summary.rows if r.group_index == 1)
        assert found.figures.n == len(found.rows)
    assert 5 in {r.sample_index for r in trace[0].rows}
    assert group_across_steps(summaries, 42) == ()
