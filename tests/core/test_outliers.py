"""The outlier finder on golden dumps: rankings match a brute force over token_view; masked tokens never rank."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from miles_tui.core.analysis import (
    KINDS,
    OutlierKind,
    merge_outliers,
    peak_position,
    recent_steps,
    sample_outliers,
    step_outliers,
)
from miles_tui.core.dump import OpenStep, Run
from miles_tui.core.dump.token_view import token_view

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _open(case: str, rollout_id: int, evaluation: bool = False) -> OpenStep:
    return Run(GOLDEN / case, use_cache=False).open(rollout_id, evaluation, time.time() + 3600)


def _every_trained(step: OpenStep, series: str) -> list[tuple[int, int, float]]:
    """(sample, position, value) of every trained position with a value, by brute force over token_view."""
    out = []
    for row in step.summary.rows:
        view = token_view(step, row.sample_index)
        values = view.series[series]
        if values is None:
            continue
        trained = view.trained()
        for position in range(view.response_length):
            if trained[position] and not math.isnan(values[position]):
                out.append((row.sample_index, position, float(values[position])))
    return out


def test_the_top_lp_diff_token_is_the_argmax_over_trained_positions() -> None:
    step = _open("tp_dup", 0)
    brute = _every_trained(step, "lp_diff")
    sample, position, value = max(brute, key=lambda t: abs(t[2]))
    top = step_outliers(step).tokens[OutlierKind.LP_DIFF][0]
    assert (top.sample_index, top.position) == (sample, position)
    assert top.value == pytest.approx(value) and top.score == pytest.approx(abs(value))
    assert top.row.sample_index == sample and top.rollout_id == 0 and not top.evaluation
    view = token_view(step, sample)
    assert top.token_id == view.token_ids[view.prompt_length + position]


def test_masked_positions_never_rank_and_every_trained_one_does() -> None:
    step = _open("tp_dup", 0)
    masked = sum(int((t.loss_mask == 0).sum()) for t in step.train_rows.values() if t.loss_mask is not None)
    assert masked > 0, "the case must have loss-masked positions for this test to mean anything"
    found = step_outliers(step, limit=100_000)
    for kind in KINDS:
        series = {OutlierKind.LP_DIFF: "lp_diff", OutlierKind.IMP_RATIO: "imp_ratio", OutlierKind.ENTROPY: "entropy"}
        brute = {(s, p) for s, p, _ in _every_trained(step, series[kind])}
        records = found.tokens[kind]
        assert {(r.sample_index, r.position) for r in records} == brute
        assert found.ranked[kind] == len(brute)
        for record in records:
            assert token_view(step, record.sample_index).trained()[record.position]


def test_a_huge_diff_at_a_masked_position_is_ignored() -> None:
    step = _open("tp_dup", 0)
    sample, train = next(
        (i, t) for i, t in step.train_rows.items() if t.loss_mask is not None and (t.loss_mask == 0).any()
    )
    assert train.loss_mask is not None
    position = int(np.flatnonzero(train.loss_mask == 0)[0])
    per_token = dict(train.per_token)
    log_probs = np.array(per_token["log_probs"], dtype=np.float64)
    log_probs[position] += 50.0
    per_token["log_probs"] = log_probs
    poisoned = OpenStep(
        step.summary, step.samples, {**step.train_rows, sample: replace(train, per_token=per_token)}, step.unreadable
    )
    for record in step_outliers(poisoned, limit=100_000).tokens[OutlierKind.LP_DIFF]:
        assert (record.sample_index, record.position) != (sample, position)
    assert step_outliers(poisoned).tokens[OutlierKind.LP_DIFF][0] == step_outliers(step).tokens[OutlierKind.LP_DIFF][0]


def test_rankings_are_ordered_capped_and_carry_token_view_values() -> None:
    step = _open("tp_dup", 1)
    found = step_outliers(step, limit=25)
    for kind in KINDS:
        records = found.tokens[kind]
        assert len(records) == 25
        scores = [r.score for r in records]
        assert scores == sorted(scores, reverse=True)
        for record in records:
            view = token_view(step, record.sample_index)
            name = {OutlierKind.LP_DIFF: "lp_diff", OutlierKind.IMP_RATIO: "imp_ratio", OutlierKind.ENTROPY: "entropy"}
            series = view.series[name[kind]]
            assert series is not None
            assert record.value == pytest.approx(float(series[record.position]))
    lp, ratio = found.tokens[OutlierKind.LP_DIFF], found.tokens[OutlierKind.IMP_RATIO]
    assert [(r.sample_index, r.position) for r in lp] == [(r.sample_index, r.position) for r in ratio]
    for a, b in zip(lp, ratio, strict=True):
        assert b.value == pytest.approx(math.exp(a.value)) and b.score == pytest.approx(abs(math.log(b.value)))


def test_entropy_ranks_by_the_excess_over_the_samples_median() -> None:
    step = _open("tp_dup", 0)
    for record in step_outliers(step, limit=20).tokens[OutlierKind.ENTROPY]:
        view = token_view(step, record.sample_index)
        entropy = view.masked("entropy")
        assert entropy is not None
        median = float(np.nanmedian(entropy))
        assert record.baseline == pytest.approx(median)
        assert record.score == pytest.approx(record.value - median)


def test_merging_steps_keeps_the_overall_top() -> None:
    steps = [step_outliers(_open("tp_dup", rid), limit=10) for rid in (0, 1, 2)]
    merged = merge_outliers(steps, OutlierKind.LP_DIFF, limit=10)
    everything = sorted((r for s in steps for r in s.tokens[OutlierKind.LP_DIFF]), key=lambda r: -r.score)
    assert [r.score for r in merged] == [r.score for r in everything[:10]]
    assert {r.rollout_id for r in merged} <= {0, 1, 2}


def test_sample_rankings_use_the_summary_statistics() -> None:
    run = Run(GOLDEN / "tp_dup", use_cache=False)
    now = time.time() + 3600
    summaries = [run.summary(rid, False, now) for rid in (0, 1, 2)]
    lp = sample_outliers(summaries, OutlierKind.LP_DIFF)
    rows = [r for s in summaries for r in s.rows if r.max_abs_lp_diff is not None]
    assert len(lp) == len(rows)
    assert lp[0].value == max(r.max_abs_lp_diff or 0.0 for r in rows)
    ratio = sample_outliers(summaries, OutlierKind.IMP_RATIO, limit=3)
    deviations = sorted((abs((r.mean_imp_ratio or 1.0) - 1.0) for r in rows), reverse=True)[:3]
    assert [o.score for o in ratio] == pytest.approx(deviations)
    entropy = sample_outliers(summaries, OutlierKind.ENTROPY, limit=1)[0]
    assert entropy.value == max(r.max_entropy or 0.0 for r in rows)


def test_the_peak_of_a_sample_and_an_eval_step_without_train_data() -> None:
    step = _open("tp_dup", 0)
    peaks = 0
    for row in step.summary.rows:
        diff = token_view(step, row.sample_index).masked("lp_diff")
        assert diff is not None
        peak = peak_position(step, row.sample_index, OutlierKind.LP_DIFF)
        if np.isnan(diff).all():  # every position loss-masked: nothing to peak at
            assert peak is None
        else:
            assert peak == int(np.nanargmax(np.abs(diff)))
            peaks += 1
    assert 0 < peaks < len(step.summary.rows)
    evaluation = _open("tp_dup", 3, evaluation=True)
    found = step_outliers(evaluation)
    assert all(found.tokens[kind] == () and found.ranked[kind] == 0 for kind in KINDS)
    assert peak_position(evaluation, evaluation.summary.rows[0].sample_index, OutlierKind.ENTROPY) is None


def test_recent_steps_end_at_the_step() -> None:
    assert recent_steps([1, 2, 3, 5, 8, 9], 8, 3) == (8, 5, 3)
    assert recent_steps([1, 2], 2, 5) == (2, 1)
    assert recent_steps([4, 6], 5, 2) == (5, 4)  # the step itself even before the list has it
