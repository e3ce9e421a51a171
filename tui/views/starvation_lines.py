"""The starvation rows of the overview and the GPU view (MFU, wait per step, data-buffer depth) and the
header's MFU, as text.

Contract: :func:`starvation_rows` turns core's :class:`~miles_tui.core.analysis.starvation.Starvation`
into three rows, each a name, the values its line draws (one per rollout step, or per buffer report,
oldest first; NaN: a gap), the scale the line is drawn on, the text beside the line (its range, or the
MFU's mean and peak) and its newest value; a figure the run does not write is a row with a ``note``
saying so and no line. :func:`starvation_heat_rows` gives the GPU view's two rows over its window's
bins (the worst wait of the steps that ended in each bin, shaded against the window's worst as miles'
strip is; the deepest buffer report in it). :func:`mfu_header` gives the header's MFU texts, longest
first: the header shows the first that fits and none when none does (a number is never cut). Pure: no
widget, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.text import Text

from miles_tui.core.analysis.starvation import Starvation, binned_starvation
from miles_tui.core.analysis.stream_advisories import MfuSummary
from miles_tui.core.telemetry import TimeBins
from miles_tui.tui.formatting import MISSING, number_within, percent, percent_fine, tflops, trend_scale
from miles_tui.tui.renderers.sparkline import FloatArray
from miles_tui.tui.views.heat_row import HeatRow

NOT_RECORDED = "not recorded by this run"
"""What the buffer row says when the run wrote no data_buffer.jsonl."""


@dataclass(frozen=True, eq=False)
class StarvationRow:
    """One row: name, line (or a note instead), the text beside it and the newest value."""

    name: str
    values: FloatArray
    scale: tuple[float, float]
    """What the floor and the top of the line stand for: 0 and the largest value."""
    beside: str
    """The range (or, for MFU, the mean against the peak)."""
    newest: str
    note: str | None = None
    """Said instead of a line when the run does not write this figure."""


def _newest(values: FloatArray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if len(finite) else None


def _zero_to_top(values: FloatArray) -> tuple[float, float]:
    """Bars rise from 0 to the largest value (miles' strip shades each step against the worst one)."""
    finite = values[np.isfinite(values)]
    return 0.0, max(float(finite.max()) if len(finite) else 0.0, 0.01)


def _mfu_row(figures: Starvation) -> StarvationRow:
    summary = figures.mfu
    if summary is None:
        return StarvationRow("MFU", np.zeros(0), (0.0, 1.0), "", MISSING, "perf/actor_train_mfu not logged")
    peak = f" of {tflops(summary.peak_tflops)}" if summary.peak_tflops else ""
    beside = f"mean {percent_fine(summary.mean)}{peak}"
    return StarvationRow(
        "MFU", figures.mfu_steps, _zero_to_top(figures.mfu_steps), beside, percent_fine(summary.latest)
    )


def _wait_row(figures: Starvation) -> StarvationRow:
    ratio = figures.bubbles.wait_ratio
    finite = ratio[np.isfinite(ratio)]
    if not len(finite):
        note = "no perf/wait_time_ratio (nor step and train times) logged"
        return StarvationRow("wait", np.zeros(0), (0.0, 1.0), "", MISSING, note)
    beside = trend_scale(float(finite.min()), float(finite.max()), True)
    if figures.bubbles.derived.any():
        beside += " (1−train/step)"
    return StarvationRow("wait", ratio, _zero_to_top(ratio), beside, percent(_newest(ratio)))


def _buffer_row(figures: Starvation) -> StarvationRow:
    buffer = figures.buffer
    if buffer is None or not len(buffer.length):
        return StarvationRow("buffer", np.zeros(0), (0.0, 1.0), "", MISSING, NOT_RECORDED)
    low, high = float(buffer.length.min()), float(buffer.length.max())
    beside = f"{_count(low)}–{_count(high)} groups" if low != high else f"= {_count(low)} groups"
    newest = _newest(buffer.length)
    return StarvationRow("buffer", buffer.length, (0.0, max(high, 1.0)), beside, _count(newest))


def _count(value: float | None) -> str:
    """A group count, exact up to 8 digits (a larger one in scientific notation, never cut)."""
    return MISSING if value is None else number_within(int(value), 8)


def starvation_rows(figures: Starvation) -> tuple[StarvationRow, StarvationRow, StarvationRow]:
    """See the module docstring."""
    return _mfu_row(figures), _wait_row(figures), _buffer_row(figures)


def has_any(figures: Starvation | None) -> bool:
    """Whether the run writes any of the three figures (a run without telemetry shows no starvation rows)."""
    if figures is None:
        return False
    buffer = figures.buffer is not None and len(figures.buffer.length) > 0
    return figures.mfu is not None or bool(np.isfinite(figures.bubbles.wait_ratio).any()) or buffer


def mfu_header(summary: MfuSummary | None) -> tuple[str, ...]:
    """The header's MFU, longest form first (empty: no MFU logged)."""
    if summary is None:
        return ()
    latest, mean = percent_fine(summary.latest), percent_fine(summary.mean)
    forms = [f"MFU {latest} · mean {mean}", f"MFU {latest}"]
    if summary.peak_tflops:
        forms.insert(0, f"MFU {latest} · mean {mean} of {tflops(summary.peak_tflops)}")
    return tuple(forms)


def starvation_heat_rows(figures: Starvation | None, bins: TimeBins) -> list[HeatRow]:
    """``wait/step`` and ``buffer`` over the window (none on a run that writes neither)."""
    if figures is None or not has_any(figures):
        return []
    binned = binned_starvation(figures, bins)
    finite = binned.wait[np.isfinite(binned.wait)]
    top = max(float(finite.max()), 0.01) if len(finite) else 1.0
    if len(finite):
        wait_note = f"{percent(float(finite.max()))} worst of {binned.steps}"
        wait = HeatRow(("starve", "wait"), Text("wait/step"), binned.wait, Text(wait_note, style="dim"), top)
    else:
        wait = HeatRow(("starve", "wait"), Text("wait/step"), text=Text("no step ended in this window", style="dim"))
    if binned.buffer is None:
        return [wait, HeatRow(("starve", "buffer"), Text("buffer"), text=Text(NOT_RECORDED, style="dim"))]
    depth = binned.buffer[np.isfinite(binned.buffer)]
    if not len(depth):
        return [wait, HeatRow(("starve", "buffer"), Text("buffer"), text=Text("no report in this window", style="dim"))]
    low, high = float(depth.min()), float(depth.max())
    note = Text(f"{_count(low)}–{_count(high)} groups", style="dim")
    return [wait, HeatRow(("starve", "buffer"), Text("buffer"), binned.buffer, note, float(max(high, 1)))]
