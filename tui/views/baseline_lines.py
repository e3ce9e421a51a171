"""The Δ-against-baseline lines of the overview and the step header, from core's step deltas.

Pure formatters (values in, Rich Text out). Each line names the baseline by mark
and run name, then every figure's change ``run − baseline`` as compare writes it
(an arrow and its size, readable without colour: ``reward ↑0.125``, ``=`` when
equal). A step the baseline lacks is said with core's reason, never shown as 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

from miles_tui.core.analysis.baseline import StepDelta
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import StepAggregate
from miles_tui.tui.runtime.baseline_watch import Baseline
from miles_tui.tui.views.compare_rows import delta_text
from miles_tui.tui.views.overlay import RICH_COLORS

LABELS = {
    "reward_mean": "reward",
    "mean_abs_lp_diff": "|lpΔ|",
    "mean_entropy": "entropy",
    "avg_staleness": "stale",
    "zero_std_group_frac": "zero-std",
    "truncated_frac": "trunc",
    "response_length_mean": "resp len",
}
"""How each compared figure is called on screen."""


def delta_line(index: int, mark: str, name: str, delta: StepDelta) -> Text:
    """``Δ vs a ┈ name @ step 4: reward ↑0.125 · |lpΔ| ↓0.002 …`` (or why the baseline has no such step)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("Δ vs ", style="dim")
    text.append(f"{mark} ┈ ", style=f"bold {RICH_COLORS[index % len(RICH_COLORS)]}")
    text.append(inert(name))
    text.append(f" @ step {delta.step}", style="dim")
    if not delta.present:
        text.append(f": {inert(delta.reason or 'no such step')}", style="yellow")
        return text
    text.append(": ")
    for position, figure in enumerate(delta.figures):
        if position:
            text.append(" · ", style="dim")
        text.append(f"{LABELS.get(figure.name, figure.name)} ", style="dim")
        text.append_text(delta_text(figure))
    return text


def delta_lines(baselines: Iterable[Baseline], step: int, run: StepAggregate | None) -> Text:
    """One :func:`delta_line` per baseline for the run's train step ``step`` (``run``: its figures, if read)."""
    lines = [
        delta_line(index, baseline.mark, baseline.name, baseline.delta_at(step, run))
        for index, baseline in enumerate(baselines)
    ]
    return Text("\n").join(lines)
