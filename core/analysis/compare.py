"""Two steps side by side, group by group, and one group slot followed across steps.

Contract: pure functions over step summaries (nothing is read, nothing is
formatted). Every delta is ``B − A`` and is None when either side lacks the
value (a group present in one step only, a step without rewards): never 0.

GRPO group numbering restarts in every step: ``group_index`` 3 of step 10 and
``group_index`` 3 of step 11 are usually different prompts. Comparing a group
"across steps" therefore compares the same *slot* of the batch (same position
in the prompt order), which is what the rollout's own numbering offers; it
says nothing about the same prompt unless the data source replays prompts in
a fixed order.

Group figures are the step's own :class:`~miles_tui.core.dump.step_summary.GroupRow` values
(rewards: ``raw_reward`` on train steps, ``reward`` on eval steps) plus the
group's average staleness, the mean over its samples that have one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from statistics import fmean

from miles_tui.core.dump import GroupRow, SampleRow, StepAggregate, StepSummary

GROUP_FIGURES: tuple[str, ...] = (
    "n",
    "reward_mean",
    "reward_std",
    "response_length_mean",
    "truncated_frac",
    "avg_staleness",
)
"""The numeric figures of a group that are compared, in display order."""

AGGREGATE_FIGURES: tuple[str, ...] = (
    "n_samples",
    "reward_mean",
    "reward_std",
    "response_length_mean",
    "truncated_frac",
    "zero_std_group_frac",
    "avg_staleness",
    "mean_abs_lp_diff",
    "mean_entropy",
    "mixed_version_frac",
    "alignment_failed",
)
"""The step-level figures that are compared, in display order."""


@dataclass(frozen=True)
class GroupFigures:
    """One group of one step."""

    rollout_id: int
    """The step."""
    group_index: int | None
    """The group slot (numbering restarts per step)."""
    n: int
    """Samples in the group."""
    reward_mean: float | None
    """Mean reward."""
    reward_std: float | None
    """Sample standard deviation of the rewards."""
    zero_std: bool
    """Degenerate: reward data with std <= 1e-12."""
    response_length_mean: float
    """Mean response length."""
    truncated_frac: float
    """Fraction of truncated samples."""
    avg_staleness: float | None
    """Mean staleness over the group's samples that have one."""


@dataclass(frozen=True)
class Delta:
    """One figure in A and in B, and B − A."""

    name: str
    """The figure (a GROUP_FIGURES or AGGREGATE_FIGURES name)."""
    a: float | None
    """Its value in step A (None: not there)."""
    b: float | None
    """Its value in step B (None: not there)."""
    delta: float | None
    """B − A; None when either side is None."""


@dataclass(frozen=True)
class GroupComparison:
    """One group slot in both steps."""

    group_index: int | None
    """The group slot."""
    a: GroupFigures | None
    """The group in step A (None: step A has no such group)."""
    b: GroupFigures | None
    """The group in step B (None: step B has no such group)."""
    deltas: tuple[Delta, ...]
    """One per GROUP_FIGURES name, in that order."""

    def delta(self, name: str) -> Delta:
        """The delta of one figure."""
        return self.deltas[GROUP_FIGURES.index(name)]


@dataclass(frozen=True)
class StepComparison:
    """Two steps: the step-level deltas and every group slot of either."""

    a: StepAggregate
    """Step A's headline figures."""
    b: StepAggregate
    """Step B's headline figures."""
    aggregate: tuple[Delta, ...]
    """One per AGGREGATE_FIGURES name, in that order."""
    groups: tuple[GroupComparison, ...]
    """Every group_index of either step, ascending (a sample without a group last)."""

    def figure(self, name: str) -> Delta:
        """The step-level delta of one figure."""
        return self.aggregate[AGGREGATE_FIGURES.index(name)]


@dataclass(frozen=True)
class GroupInStep:
    """One group slot in one step: its figures and its samples."""

    figures: GroupFigures
    """The group's figures."""
    rows: tuple[SampleRow, ...]
    """Its samples, in rollout order."""


def _delta(name: str, a: float | None, b: float | None) -> Delta:
    return Delta(name, a, b, None if a is None or b is None else b - a)


def _number(value: float | int | bool | None) -> float | None:
    return None if value is None else float(value)


def _figures(rollout_id: int, group: GroupRow, members: list[SampleRow]) -> GroupFigures:
    stale = [float(r.staleness) for r in members if r.staleness is not None]
    return GroupFigures(
        rollout_id=rollout_id,
        group_index=group.group_index,
        n=group.n,
        reward_mean=group.reward_mean,
        reward_std=group.reward_std,
        zero_std=group.zero_std,
        response_length_mean=group.response_length_mean,
        truncated_frac=group.truncated_frac,
        avg_staleness=fmean(stale) if stale else None,
    )


def _members(summary: StepSummary) -> dict[int | None, list[SampleRow]]:
    members: dict[int | None, list[SampleRow]] = {}
    for row in summary.rows:
        members.setdefault(row.group_index, []).append(row)
    return members


def group_figures(summary: StepSummary) -> dict[int | None, GroupFigures]:
    """Every group of a step by group_index."""
    members = _members(summary)
    return {g.group_index: _figures(summary.rollout_id, g, members.get(g.group_index, [])) for g in summary.groups}


def _group_order(group_index: int | None) -> tuple[bool, int]:
    return (group_index is None, group_index or 0)


def compare_steps(a: StepSummary, b: StepSummary) -> StepComparison:
    """Step B against step A: step-level deltas and one comparison per group slot of either step."""
    groups_a, groups_b = group_figures(a), group_figures(b)
    comparisons = []
    for group_index in sorted(set(groups_a) | set(groups_b), key=_group_order):
        fa, fb = groups_a.get(group_index), groups_b.get(group_index)
        deltas = tuple(
            _delta(
                name,
                None if fa is None else _number(getattr(fa, name)),
                None if fb is None else _number(getattr(fb, name)),
            )
            for name in GROUP_FIGURES
        )
        comparisons.append(GroupComparison(group_index, fa, fb, deltas))
    aggregate = tuple(
        _delta(name, _number(getattr(a.aggregate, name)), _number(getattr(b.aggregate, name)))
        for name in AGGREGATE_FIGURES
    )
    return StepComparison(a.aggregate, b.aggregate, aggregate, tuple(comparisons))


def group_of(summary: StepSummary, sample_index: int) -> int | None:
    """The group_index of a sample in a step (None: no such sample, or it has no group)."""
    return next((row.group_index for row in summary.rows if row.sample_index == sample_index), None)


def group_across_steps(summaries: Iterable[StepSummary], group_index: int | None) -> tuple[GroupInStep, ...]:
    """A group slot in every given step that has it, by ascending step (slots, not prompts: see the module doc)."""
    found = []
    for summary in sorted(summaries, key=lambda s: (s.rollout_id, s.evaluation)):
        members = _members(summary)
        group = next((g for g in summary.groups if g.group_index == group_index), None)
        if group is not None:
            rows = members.get(group_index, [])
            found.append(GroupInStep(_figures(summary.rollout_id, group, rows), tuple(rows)))
    return tuple(found)


def sample_group_across_steps(
    step: StepSummary, sample_index: int, summaries: Iterable[StepSummary]
) -> tuple[GroupInStep, ...]:
    """The group slot of a sample of ``step``, in every given step that has it (empty: the sample has no group)."""
    group_index = group_of(step, sample_index)
    if group_index is None:
        return ()
    return group_across_steps(summaries, group_index)
