"""A baseline's series drawn on a metric chart beside the run's, and the chart's legend row.

Contract: an :class:`~miles_tui.tui.views.overlay.Overlay` is one baseline's series of the chart's key
(against the same x key; None when the baseline never logged it). It is drawn
under the run's line, dimmed, in its own colour, its mark letter at its last
point; with NO_COLOR its points are drawn as its letter (lines of one colour
would not read apart). The legend row names the run and each baseline by
mark and name, with each one's value at the step shown (the cursor, else the
run's last step) and the baseline's Δ (run − baseline) there. Steps are
matched exactly (core's :func:`~miles_tui.core.analysis.baseline.point_delta`):
a baseline without that step says so, never a 0. Names come from the runs and
are made inert.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from rich.text import Text

from miles_tui.core.analysis import PlotData
from miles_tui.core.analysis.baseline import value_exactly_at
from miles_tui.core.base.inert_text import inert
from miles_tui.core.telemetry import MetricSeries
from miles_tui.tui.formatting import MISSING
from miles_tui.tui.renderers import plot
from miles_tui.tui.views.overlay import OVERLAY_COLORS, RICH_COLORS, Overlay

NO_COLOR_LETTERS = 24
"""Without colour, a baseline is drawn as at most about this many of its letters, evenly over its points."""


def overlay_color(index: int) -> int:
    return OVERLAY_COLORS[index % len(OVERLAY_COLORS)]


def draw_overlay(figure: Any, data: PlotData, overlay: Overlay, lo: float, hi: float, color: bool) -> None:
    """One baseline's drawn points on ``figure`` (under the run's line: draw it first)."""
    xs, ys = data.x, np.clip(data.raw, lo, hi)
    if len(data.smooth):
        xs, ys = data.smooth_x, np.clip(data.smooth, lo, hi)
    finite = np.flatnonzero(np.isfinite(ys))
    if not len(finite):
        return
    if color:
        plot.draw_line(figure, xs, ys, overlay_color(overlay.index), solid=False)
        last = finite[-1]
        figure.draw(figure.signal([float(xs[last])], [float(ys[last])], marker=overlay.mark))
        return
    keep = finite[:: max(1, len(finite) // NO_COLOR_LETTERS)]
    figure.draw(figure.signal(xs[keep].tolist(), ys[keep].tolist(), marker=overlay.mark))


def shown_step(run: MetricSeries, cursor: float | None) -> float | None:
    """The step the legend reads: the cursor, else the run's last step (None: the run has no point)."""
    if cursor is not None:
        return cursor
    finite = run.step[np.isfinite(run.step)]
    return float(finite.max()) if len(finite) else None


def legend_line(
    run: MetricSeries,
    overlays: Sequence[Overlay],
    cursor: float | None,
    width: int,
    value_text: Callable[[float], str],
    step_text: Callable[[float], str],
) -> Text:
    """``━ run 0.41 @12 │ a ┈ base 0.39 Δ+0.02 │ b ┈ other: no step 12``, cut to ``width`` cells."""
    text = Text(no_wrap=True, overflow="ellipsis")
    step = shown_step(run, cursor)
    text.append("━ run", style="bold")
    mine = None if step is None else value_exactly_at(run, step)
    if step is not None:
        text.append(f" @{step_text(step)} ", style="dim")
        text.append(MISSING if mine is None else value_text(mine))
    for overlay in overlays:
        text.append(" │ ", style="dim")
        text.append(f"{overlay.mark} ┈ ", style=f"bold {RICH_COLORS[overlay.index % len(RICH_COLORS)]}")
        text.append(inert(overlay.name), style="dim")
        if overlay.series is None:
            text.append(": not logged", style="dim italic")
            continue
        if step is None:
            continue
        theirs = overlay.value_at(step)
        if theirs is None:
            text.append(f": no step {step_text(step)}", style="dim italic")
            continue
        text.append(" " + value_text(theirs))
        delta = None if mine is None else mine - theirs
        if delta is not None and math.isfinite(delta):
            text.append(f" Δ{'+' if delta >= 0 else '-'}{value_text(abs(delta))}", style="bold")
    text.truncate(width, overflow="ellipsis")
    return text


def baselines_note(baselines: Iterable[Any]) -> Text:
    """`` · baselines: a ┈ name, b ┈ other`` for a status line (empty without baselines)."""
    text = Text()
    for index, baseline in enumerate(baselines):
        text.append(" · baselines: " if not index else ", ", style="dim" if index else "")
        text.append(f"{baseline.mark} ┈ ", style=f"bold {RICH_COLORS[index % len(RICH_COLORS)]}")
        text.append(inert(baseline.name))
    return text
