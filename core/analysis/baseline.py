"""A baseline run beside the run: its figures at the same step, and its metric series aligned by step.

Contract (pure: nothing is read, nothing is formatted, no clock):

- Steps are matched exactly: the baseline's figure *at the run's step*, never at
  an earlier one. A step the baseline does not have (not written yet, never
  written, unreadable) is a :class:`StepDelta` with ``present`` False and a
  ``reason``; its deltas are None, never 0.
- Every delta is ``run − baseline`` (a :class:`~miles_tui.core.analysis.compare.Delta`
  with ``a`` the baseline's value and ``b`` the run's), None when either side
  lacks the value.
- :func:`align` puts a baseline series on the run series' steps: for each run
  point the baseline's value logged at exactly that step (the last one when the
  baseline logged the step twice, as a resumed run does), NaN and ``missing``
  where it has none. A NaN the baseline logged stays NaN but is not missing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.analysis.compare import Delta
from miles_tui.core.analysis.metric_view import FloatArray, in_step_order
from miles_tui.core.dump import StepAggregate
from miles_tui.core.telemetry import MetricSeries

DELTA_FIGURES: Final = (
    "reward_mean",
    "mean_abs_lp_diff",
    "mean_entropy",
    "avg_staleness",
    "zero_std_group_frac",
    "truncated_frac",
    "response_length_mean",
)
"""The step figures compared with a baseline, in display order."""


@dataclass(frozen=True)
class StepDelta:
    """The run's step against the baseline's step of the same id."""

    step: int
    """The rollout id compared."""
    present: bool
    """Whether the baseline has a summarized train step ``step``."""
    reason: str | None
    """Why it is not present (None when it is): "no step N" or the step's read failure."""
    figures: tuple[Delta, ...]
    """One per :data:`DELTA_FIGURES`: ``a`` the baseline's value, ``b`` the run's, ``delta`` b − a."""

    def figure(self, name: str) -> Delta:
        """The delta of one figure."""
        return next(d for d in self.figures if d.name == name)


def _value(aggregate: StepAggregate | None, name: str) -> float | None:
    if aggregate is None:
        return None
    raw = getattr(aggregate, name)
    return None if raw is None or not math.isfinite(float(raw)) else float(raw)


def step_delta(
    step: int,
    run: StepAggregate | None,
    baseline: Mapping[int, StepAggregate],
    failures: Mapping[int, str] | None = None,
    baseline_steps: Iterable[int] = (),
) -> StepDelta:
    """``run`` (the run's train step ``step``, None when not summarized) against the baseline's step ``step``.

    ``baseline``: its summarized train steps by id; ``failures``: its steps that could not be read, with why;
    ``baseline_steps``: every train step it lists (a listed step not summarized yet is "not read yet").
    """
    other = baseline.get(step)
    reason = None
    if other is None:
        failure = (failures or {}).get(step)
        if failure is not None:
            reason = f"its step {step} is unreadable: {failure}"
        elif step in set(baseline_steps):
            reason = f"its step {step} is not read yet"
        else:
            reason = f"it has no step {step}{_last_step(baseline, baseline_steps)}"
    figures = tuple(_delta(name, _value(other, name), _value(run, name)) for name in DELTA_FIGURES)
    return StepDelta(step, other is not None, reason, figures)


def _last_step(baseline: Mapping[int, StepAggregate], listed: Iterable[int]) -> str:
    steps = set(baseline) | set(listed)
    return f" (its last is {max(steps)})" if steps else " (it has no train step yet)"


def _delta(name: str, baseline: float | None, run: float | None) -> Delta:
    return Delta(name, baseline, run, None if baseline is None or run is None else run - baseline)


def common_steps(run: Iterable[int], baseline: Iterable[int]) -> tuple[int, ...]:
    """The train steps both runs have, ascending."""
    return tuple(sorted(set(run) & set(baseline)))


# -- metric series -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class AlignedSeries:
    """A baseline series on the run series' steps."""

    step: FloatArray
    """The run's steps (its points in step order)."""
    run: FloatArray
    """The run's values there."""
    baseline: FloatArray
    """The baseline's value at exactly each step (NaN where it has none, or logged NaN)."""
    missing: npt.NDArray[np.bool_]
    """True where the baseline logged nothing at that step."""

    @property
    def delta(self) -> FloatArray:
        """run − baseline at each step (NaN where either is missing)."""
        return self.run - self.baseline


def last_per_step(series: MetricSeries) -> tuple[FloatArray, FloatArray]:
    """(distinct steps ascending, the value logged last at each): a resumed run's step logged twice counts once."""
    ordered = in_step_order(series)
    step, value = ordered.step, ordered.value
    if len(step) == 0:
        return step, value
    last = np.ones(len(step), dtype=bool)
    last[:-1] = step[1:] != step[:-1]
    return step[last], value[last]


def align(run: MetricSeries, baseline: MetricSeries | None) -> AlignedSeries:
    """``baseline`` at each of ``run``'s steps (see the module contract); None: every step missing."""
    ordered = in_step_order(run)
    steps = ordered.step
    values = np.full(len(steps), np.nan)
    missing = np.ones(len(steps), dtype=bool)
    if baseline is not None and len(steps):
        base_step, base_value = last_per_step(baseline)
        if len(base_step):
            where = np.searchsorted(base_step, steps)
            inside = where < len(base_step)
            hit = np.zeros(len(steps), dtype=bool)
            hit[inside] = base_step[where[inside]] == steps[inside]
            values[hit] = base_value[where[hit]]
            missing = ~hit
    return AlignedSeries(steps, ordered.value, values, missing)


@dataclass(frozen=True)
class PointDelta:
    """One metric at one step in the run and in a baseline."""

    step: float
    """The step asked for."""
    run: float | None
    """The run's value logged at exactly that step (None: none logged)."""
    baseline: float | None
    """The baseline's value logged at exactly that step (None: none logged)."""

    @property
    def delta(self) -> float | None:
        """run − baseline; None when either was not logged (NaN when either logged NaN)."""
        return None if self.run is None or self.baseline is None else self.run - self.baseline


def value_exactly_at(series: MetricSeries | None, step: float) -> float | None:
    """The value logged last at exactly ``step`` (None: nothing logged there)."""
    if series is None:
        return None
    steps, values = last_per_step(series)
    position = int(np.searchsorted(steps, step))
    if position < len(steps) and steps[position] == step:
        return float(values[position])
    return None


def point_delta(run: MetricSeries | None, baseline: MetricSeries | None, step: float) -> PointDelta:
    """Both runs' values of a metric at exactly ``step``."""
    return PointDelta(step, value_exactly_at(run, step), value_exactly_at(baseline, step))


def last_common_step(run: MetricSeries | None, baseline: MetricSeries | None) -> float | None:
    """The newest step both series logged (None: none in common)."""
    if run is None or baseline is None:
        return None
    mine, theirs = last_per_step(run)[0], last_per_step(baseline)[0]
    both = np.intersect1d(mine, theirs)
    return float(both[-1]) if len(both) else None
