"""``report --baseline OTHER``: the run's newest train step against each baseline's step of the same id.

Contract: :func:`baseline_entries` opens each baseline read-only
(:func:`~miles_tui.core.analysis.baseline_run.open_baseline`), lists its steps and
summarizes only the step compared (from the cache when its files did not
change). A baseline that cannot be opened is an entry with an ``error`` (the
message names the folder), never an exception: the run's report stands. The
JSON shape (:meth:`BaselineEntry.to_dict`, under the report's ``baselines`` key)
adds keys, never renames them; :func:`baseline_lines` is the text. A step the
baseline lacks is said (``present`` false and a ``reason``), its deltas null,
never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miles_tui.core.analysis.baseline import DELTA_FIGURES, StepDelta, common_steps, step_delta
from miles_tui.core.analysis.baseline_run import open_baseline
from miles_tui.core.analysis.health import run_name
from miles_tui.core.base.errors import MilesTuiError
from miles_tui.core.dump import StepAggregate
from miles_tui.core.telemetry.streams import read_meta


@dataclass(frozen=True)
class BaselineEntry:
    """One baseline as ``report`` sees it."""

    path: Path
    """The folder given."""
    name: str | None = None
    """Its run name (None when it could not be opened)."""
    latest: int | None = None
    """Its newest visible train step."""
    steps_in_common: int = 0
    """Train steps both runs have."""
    delta: StepDelta | None = None
    """The run's newest train step against the baseline's (None: the run has no train step, or an error)."""
    error: str | None = None
    """Why it could not be used (names the folder)."""

    def to_dict(self) -> dict[str, Any]:
        delta = self.delta
        return {
            "path": str(self.path),
            "name": self.name,
            "error": self.error,
            "latest": self.latest,
            "steps_in_common": self.steps_in_common,
            "step": None if delta is None else delta.step,
            "present": None if delta is None else delta.present,
            "reason": None if delta is None else delta.reason,
            "figures": {}
            if delta is None
            else {d.name: {"run": d.b, "baseline": d.a, "delta": d.delta} for d in delta.figures},
        }


def baseline_entry(
    path: Path | str, run_steps: Sequence[int], latest: StepAggregate | None, now: float
) -> BaselineEntry:
    """One baseline against the run's train steps ``run_steps`` and its newest train step's figures ``latest``."""
    try:
        baseline = open_baseline(path)
        steps = baseline.run.step_ids(now).train
        name = run_name(read_meta(baseline.run.dir.dashboard_dir), baseline.path)
    except MilesTuiError as err:
        return BaselineEntry(Path(path), error=str(err))
    delta = None
    if latest is not None:
        aggregates: dict[int, StepAggregate] = {}
        failures: dict[int, str] = {}
        if latest.rollout_id in steps:
            try:
                aggregates[latest.rollout_id] = baseline.summary(latest.rollout_id, False, now).aggregate
            except MilesTuiError as err:
                failures[latest.rollout_id] = err.message
        delta = step_delta(latest.rollout_id, latest, aggregates, failures, steps)
    return BaselineEntry(
        baseline.path,
        name=name,
        latest=steps[-1] if steps else None,
        steps_in_common=len(common_steps(run_steps, steps)),
        delta=delta,
    )


def baseline_entries(
    paths: Sequence[Path | str], run_steps: Sequence[int], latest: StepAggregate | None, now: float
) -> tuple[BaselineEntry, ...]:
    """:func:`baseline_entry` of each path, in the order given."""
    return tuple(baseline_entry(path, run_steps, latest, now) for path in paths)


_LABELS = {
    "reward_mean": ("reward", 3),
    "mean_abs_lp_diff": ("|lpΔ|", 4),
    "mean_entropy": ("entropy", 3),
    "avg_staleness": ("staleness", 2),
    "zero_std_group_frac": ("zero-std groups", 0),
    "truncated_frac": ("truncated", 0),
    "response_length_mean": ("resp len", 1),
}


def _value(name: str, value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    digits = _LABELS[name][1]
    if name.endswith("_frac"):
        return f"{value * 100:+.0f}pt" if signed else f"{value:.0%}"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def baseline_lines(entry: BaselineEntry) -> list[str]:
    """The text of one baseline (not yet inert: the report makes every line inert)."""
    if entry.error is not None:
        return [f"baseline: {entry.error}"]
    head = f"baseline {entry.name}  ({entry.path}): {entry.steps_in_common} train steps in common"
    head += f", its latest {entry.latest}" if entry.latest is not None else ", no train step yet"
    delta = entry.delta
    if delta is None:
        return [head, "  the run has no summarized train step to compare"]
    if not delta.present:
        return [head, f"  step {delta.step}: no delta: {delta.reason}"]
    chips = []
    for name in DELTA_FIGURES:
        figure = delta.figure(name)
        label = _LABELS[name][0]
        change = _value(name, figure.delta, True)
        chips.append(f"{label} {_value(name, figure.b)} vs {_value(name, figure.a)} (Δ {change})")
    return [head, f"  step {delta.step} (run vs baseline): " + ", ".join(chips)]
