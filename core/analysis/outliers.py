"""The tokens and samples that stand out in a step (or the last few steps): the outlier finder.

Contract: pure functions over core values; nothing is read from disk here.

- Token level (:func:`step_outliers`) needs an open step (per-token arrays).
  Every per-token value comes from :func:`miles_tui.core.dump.token_view.token_view`, so
  ``lp_diff`` and ``imp_ratio`` are derived exactly once in the code base, and
  only trained positions (``loss_mask > 0``) are ever ranked: a loss-masked
  token was never scored by the engine and never appears. One pass over the
  step builds flat numpy arrays of every trained token and keeps the top
  ``limit`` per kind (``argpartition``), so a step of any size costs one
  linear pass and the result stays small (at most ``limit`` records per kind).
- Sample level (:func:`sample_outliers`) needs only step summaries (cheap,
  cached): it ranks samples by their per-sample statistics.
- Kinds: ``LP_DIFF`` ranks by |log_probs − rollout_log_probs|; ``IMP_RATIO`` by
  |log importance ratio| (the ratio is exp(lp diff), so this ordering is the
  lp-diff ordering shown as ratios: far above and far below 1 alike);
  ``ENTROPY`` by the token's entropy above its sample's median trained entropy
  (a spike in an otherwise confident response ranks above a uniformly
  uncertain one).
Never formats a value for display (that is tui's job).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from miles_tui.core.base.errors import CorruptFileError
from miles_tui.core.dump import OpenStep, SampleRow, StepSummary
from miles_tui.core.dump.token_view import token_view

TOP_K = 200
"""Tokens kept per kind and step (and in a merged ranking)."""

LAST_STEPS = 5
"""How many steps "the last N steps" spans by default."""


class OutlierKind(enum.Enum):
    """What an outlier ranking orders by."""

    LP_DIFF = "lp_diff"
    """|train − rollout log-prob| (a sample: its max_abs_lp_diff)."""
    IMP_RATIO = "imp_ratio"
    """|log importance ratio| (a sample: |mean_imp_ratio − 1|)."""
    ENTROPY = "entropy"
    """Entropy above the sample's median (a sample: its max_entropy)."""


KINDS: tuple[OutlierKind, ...] = tuple(OutlierKind)
"""Every kind, in display order."""


@dataclass(frozen=True)
class TokenOutlier:
    """One token of one sample that ranks high for a kind."""

    rollout_id: int
    """The step."""
    evaluation: bool
    """Whether the step is an eval step."""
    sample_index: int
    """The sample."""
    position: int
    """Response index of the token (0 = first response token)."""
    token_id: int
    """The token's id (-1 when the rollout sample lacks it)."""
    kind: OutlierKind
    """What it ranks high for."""
    value: float
    """The series at the token: lp diff (signed), importance ratio, or entropy."""
    score: float
    """What the ranking orders by: |lp diff|, |log ratio|, or entropy − baseline."""
    baseline: float | None
    """ENTROPY: the sample's median entropy over trained positions; None for the other kinds."""
    row: SampleRow
    """The sample's ROW figures."""


@dataclass(frozen=True)
class SampleOutlier:
    """One sample that ranks high for a kind, by its per-sample statistic."""

    rollout_id: int
    """The step."""
    evaluation: bool
    """Whether the step is an eval step."""
    sample_index: int
    """The sample."""
    kind: OutlierKind
    """What it ranks high for."""
    value: float
    """The statistic: max_abs_lp_diff, mean_imp_ratio or max_entropy."""
    score: float
    """What the ranking orders by: max_abs_lp_diff, |mean_imp_ratio − 1| or max_entropy."""
    row: SampleRow
    """The sample's ROW figures."""


@dataclass(frozen=True)
class StepOutliers:
    """The top tokens of one open step, per kind."""

    rollout_id: int
    """The step."""
    evaluation: bool
    """Whether the step is an eval step."""
    tokens: Mapping[OutlierKind, tuple[TokenOutlier, ...]]
    """Per kind, the top tokens, highest score first (empty: the step has no such series)."""
    ranked: Mapping[OutlierKind, int]
    """Per kind, how many trained tokens had a value (the population the top was taken from)."""


FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _one_sample_step(step: OpenStep, rollout_position: int) -> OpenStep:
    """The step narrowed to one sample: ``token_view`` finds a sample by scanning the step's rows,
    which would make a whole-step pass quadratic; over a one-sample step it is constant."""
    row = step.summary.rows[rollout_position]
    train = step.train_rows.get(row.sample_index)
    trains = {} if train is None else {row.sample_index: train}
    summary = replace(step.summary, rows=(row,), groups=(), alignment_reasons=())
    return OpenStep(summary, (step.samples[rollout_position],), trains, step.unreadable, step.rollout_path)


def _top(scores: FloatArray, limit: int) -> IntArray:
    """Indices of the ``limit`` highest scores, highest first; ties keep their order in ``scores``."""
    if scores.size > limit:
        cut = np.partition(scores, scores.size - limit)[scores.size - limit]
        keep = np.flatnonzero(scores >= cut)  # every tie at the cut, so the order below is stable
    else:
        keep = np.arange(scores.size)
    order = keep[np.argsort(-scores[keep], kind="stable")]
    return order[:limit].astype(np.int64)


def _cut(scores: FloatArray, limit: int) -> IntArray | slice:
    """Where a sample's ``limit`` highest scores are (with ties), in their order; everything when few more.

    The step's top ``limit`` is among the samples' own, so each sample keeps only
    those: memory stays bounded by samples × limit whatever the response lengths.
    """
    if scores.size <= 2 * limit:
        return slice(None)
    cut = np.partition(scores, scores.size - limit)[scores.size - limit]
    return np.flatnonzero(scores >= cut)


@dataclass
class _Ranking:
    """One kind's best tokens of a step, collected sample by sample (each sample's own best, see :func:`_cut`)."""

    kind: OutlierKind
    limit: int
    count: int = 0
    """Tokens ranked in all (before any cut)."""
    samples: list[int] = field(default_factory=list)
    positions: list[IntArray] = field(default_factory=list)
    values: list[FloatArray] = field(default_factory=list)
    scores: list[FloatArray] = field(default_factory=list)
    baselines: list[float] = field(default_factory=list)

    def add(
        self, sample: int, positions: IntArray, values: FloatArray, scores: FloatArray, baseline: float = math.nan
    ) -> None:
        """Add a sample's ranked tokens (rollout position ``sample``; response ``positions``), already cut."""
        self.samples.append(sample)
        self.positions.append(positions)
        self.values.append(values)
        self.scores.append(scores)
        self.baselines.append(baseline)

    def records(self, step: OpenStep) -> tuple[TokenOutlier, ...]:
        """The step's top ``limit`` as records, highest score first."""
        if not self.samples:
            return ()
        counts = [len(p) for p in self.positions]
        samples = np.repeat(np.asarray(self.samples, dtype=np.int64), counts)
        baselines = np.repeat(np.asarray(self.baselines, dtype=np.float64), counts)
        positions, values = np.concatenate(self.positions), np.concatenate(self.values)
        scores = np.concatenate(self.scores)
        summary = step.summary
        records = []
        for i in _top(scores, self.limit).tolist():
            row, sample = summary.rows[samples[i]], step.samples[samples[i]]
            position = int(positions[i])
            train = step.train_rows[row.sample_index]
            tokens = sample.get("tokens")
            # token_view's rule: the ids are cut to the train row's total length; the response ends them.
            shown = 0 if tokens is None else min(len(tokens), train.total_length)
            index = shown - train.response_length + position
            records.append(
                TokenOutlier(
                    rollout_id=summary.rollout_id,
                    evaluation=summary.evaluation,
                    sample_index=row.sample_index,
                    position=position,
                    token_id=int(tokens[index]) if tokens is not None and 0 <= index < shown else -1,
                    kind=self.kind,
                    value=float(values[i]),
                    score=float(scores[i]),
                    baseline=None if math.isnan(baselines[i]) else float(baselines[i]),
                    row=row,
                )
            )
        return tuple(records)


def _rankings(step: OpenStep, rollout_positions: Iterable[int], limit: int) -> dict[OutlierKind, _Ranking]:
    """Every kind's ranking over the trained tokens of the given samples (those with a train row)."""
    rankings = {kind: _Ranking(kind, limit) for kind in KINDS}
    for rollout_position in rollout_positions:
        sample_index = step.summary.rows[rollout_position].sample_index
        if sample_index not in step.train_rows:
            continue
        try:
            view = token_view(_one_sample_step(step, rollout_position), sample_index)
        except CorruptFileError:
            continue  # its token ids are unreadable: the step's problems say so; nothing to rank
        diff = view.masked("lp_diff")  # NaN at loss-masked positions: those are never ranked
        ratio = view.masked("imp_ratio")
        if diff is not None and ratio is not None:
            keep = np.flatnonzero(~np.isnan(diff))
            # The ratio is exp(lp diff), so |log ratio| is |lp diff|: taken from the diff, a ratio
            # that overflowed to inf still ranks (first) instead of dropping out.
            magnitude = np.abs(diff[keep])
            for kind in (OutlierKind.LP_DIFF, OutlierKind.IMP_RATIO):
                rankings[kind].count += int(keep.size)
            best = _cut(magnitude, limit)
            keep, magnitude = keep[best], magnitude[best]
            rankings[OutlierKind.LP_DIFF].add(rollout_position, keep, diff[keep], magnitude)
            rankings[OutlierKind.IMP_RATIO].add(rollout_position, keep, ratio[keep], magnitude)
        entropy = view.masked("entropy")
        if entropy is not None:
            keep = np.flatnonzero(np.isfinite(entropy))
            if keep.size:
                values = entropy[keep]
                median = float(np.median(values))
                rankings[OutlierKind.ENTROPY].count += int(keep.size)
                best = _cut(values, limit)  # the highest entropies are the highest above the median
                rankings[OutlierKind.ENTROPY].add(
                    rollout_position, keep[best], values[best], values[best] - median, median
                )
    return rankings


def step_outliers(step: OpenStep, limit: int = TOP_K) -> StepOutliers:
    """The top ``limit`` trained tokens of an open step for every kind (samples without a train row have none)."""
    rankings = _rankings(step, range(len(step.summary.rows)), limit)
    return StepOutliers(
        step.summary.rollout_id,
        step.summary.evaluation,
        {kind: ranking.records(step) for kind, ranking in rankings.items()},
        {kind: ranking.count for kind, ranking in rankings.items()},
    )


def merge_outliers(steps: Iterable[StepOutliers], kind: OutlierKind, limit: int = TOP_K) -> tuple[TokenOutlier, ...]:
    """One ranking of a kind across several steps: highest score first, then newer step, then step order."""
    ordered = sorted(
        (
            (-record.score, -record.rollout_id, order, record)
            for step in steps
            for order, record in enumerate(step.tokens.get(kind, ()))
        ),
        key=lambda item: item[:3],
    )
    return tuple(item[3] for item in ordered[:limit])


def _sample_statistic(row: SampleRow, kind: OutlierKind) -> tuple[float, float] | None:
    """(value, score) of a sample for a kind; None when the sample has no such statistic."""
    if kind is OutlierKind.LP_DIFF:
        return None if row.max_abs_lp_diff is None else (row.max_abs_lp_diff, row.max_abs_lp_diff)
    if kind is OutlierKind.IMP_RATIO:
        return None if row.mean_imp_ratio is None else (row.mean_imp_ratio, abs(row.mean_imp_ratio - 1.0))
    return None if row.max_entropy is None else (row.max_entropy, row.max_entropy)


def sample_outliers(
    summaries: Iterable[StepSummary], kind: OutlierKind, limit: int = TOP_K
) -> tuple[SampleOutlier, ...]:
    """Samples ranked by their per-sample statistic for a kind, across the given steps (highest first)."""
    candidates: list[tuple[float, int, int, SampleOutlier]] = []
    for summary in summaries:
        for order, row in enumerate(summary.rows):
            statistic = _sample_statistic(row, kind)
            if statistic is None:
                continue
            value, score = statistic
            record = SampleOutlier(summary.rollout_id, summary.evaluation, row.sample_index, kind, value, score, row)
            candidates.append((-score, -summary.rollout_id, order, record))
    candidates.sort(key=lambda item: item[:3])
    return tuple(item[3] for item in candidates[:limit])


def peak_position(step: OpenStep, sample_index: int, kind: OutlierKind) -> int | None:
    """The response position of a sample's highest-scoring trained token for a kind (None: no such series)."""
    records = _rankings(step, [step.position_of(sample_index)], 1)[kind].records(step)
    return records[0].position if records else None


def recent_steps(visible: Sequence[int], rollout_id: int, count: int = LAST_STEPS) -> tuple[int, ...]:
    """The ``count`` visible steps ending at ``rollout_id`` (it and the ones before it), newest first."""
    earlier = sorted((rid for rid in set(visible) if rid <= rollout_id), reverse=True)
    if rollout_id not in earlier:
        earlier = sorted([rollout_id, *earlier], reverse=True)
    return tuple(earlier[:count])
