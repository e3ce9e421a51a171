"""A plotext line chart of one per-token series against token position, gaps kept as gaps.

Contract: the screen sets :attr:`SeriesChart.series` (data down): a
:class:`ChartSeries` holding a window of values over consecutive token
positions, NaN where a position has no value (prompt, loss-masked), and
:attr:`SeriesChart.cursor`. The widget draws it at its own size with plotext: each
run of finite values is a separate line so a gap is never bridged, more
points than the plot can resolve are bucketed with the sparkline renderer's
``absmax`` (spikes survive), and the cursor is a vertical line. Output is
plotext's ANSI text turned into Rich Text (``Text.from_ansi``); with
NO_COLOR the colorless theme is used and the cursor still reads as a line.
It reads no files and computes no statistics. plotext keeps one global
figure, so drawing happens only on the UI thread. A plotext build costs
tens of milliseconds, so changes are drawn once they have been still for
:data:`SETTLE_SECONDS`: holding an arrow key never waits for the chart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from rich.text import Text
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget

from miles_tui.tui.formatting import number
from miles_tui.tui.renderers import plot
from miles_tui.tui.renderers.plot import finite_runs, int_ticks
from miles_tui.tui.renderers.sparkline import bucket_values

__all__ = ["SETTLE_SECONDS", "ChartSeries", "SeriesChart", "chart_text", "finite_runs"]

FloatArray = npt.NDArray[np.float64]

_POINTS_PER_CELL = 2
"""Braille resolves two points per column: more would only slow the build."""

SETTLE_SECONDS = 0.15
"""A change waits this long for the next one before the chart is redrawn."""


@dataclass(frozen=True, eq=False)
class ChartSeries:
    """What the chart draws."""

    title: str
    """Series name, shown as the chart title."""
    start: int
    """Token position of ``values[0]``."""
    values: FloatArray
    """One value per token position from ``start`` (NaN: no value, drawn as a gap)."""


def chart_text(series: ChartSeries, width: int, height: int, cursor: int | None = None, color: bool = True) -> Text:
    """Draw ``series`` (and a vertical line at token position ``cursor``) as ``width`` × ``height`` cells."""
    if width < 10 or height < 4:
        return Text("(too small for a chart)")
    values = series.values
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return Text(f"{series.title}: no values in this window")
    lo, hi = float(finite.min()), float(finite.max())
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    size = max(1, math.ceil(len(values) / (width * _POINTS_PER_CELL)))
    points = np.clip(bucket_values(values, size, "absmax"), lo, hi)  # ±inf drawn at the edges; NaN stays NaN
    xs = series.start + np.arange(len(points)) * size
    figure = plot.start(width, height, color)
    plot.draw_line(figure, xs.astype(np.float64), points, 12 if color else None)
    if cursor is not None and series.start <= cursor < series.start + len(values):
        plot.draw_vline(figure, cursor, lo, hi, 9 if color else None)
    stop = series.start + len(values) - 1
    figure.ruler("x").ticks(int_ticks(series.start, stop, max(width // 12, 2)))
    figure.ruler("y").lim(lo, hi)
    rows = max(height - 4, 2)  # title, frame and x labels take four rows
    y_ticks = np.linspace(lo, hi, max(2, min(5, rows // 2 + 1))).tolist()
    figure.ruler("y").ticks(y_ticks, [number(tick, 2) for tick in y_ticks])
    figure.title(series.title)
    return plot.to_text(figure, color)


class SeriesChart(Widget):
    """A chart of the selected per-token series over the visible window."""

    DEFAULT_CSS = """
    SeriesChart {
        height: 1fr;
        min-height: 6;
    }
    """

    series: reactive[ChartSeries | None] = reactive(None, repaint=False)
    """The window to draw (None: nothing selected)."""
    cursor: reactive[int | None] = reactive(None, repaint=False)
    """Token position of the cursor line."""

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._drawn: tuple[object, ...] | None = None
        self._text = Text()
        self._settle: Timer | None = None

    def _changed(self) -> None:
        if self._settle is not None:
            self._settle.stop()
        if self._drawn is None:
            self.refresh()  # nothing on screen yet: draw now
        else:
            self._settle = self.set_timer(SETTLE_SECONDS, self.refresh, name="chart-settle")

    def watch_series(self) -> None:
        self._changed()

    def watch_cursor(self) -> None:
        self._changed()

    def render(self) -> Text:
        series = self.series
        if series is None:
            return Text("no series selected")
        width, height = self.content_size
        key = (series, self.cursor, width, height, self.app.no_color)
        if key != self._drawn:
            self._text = chart_text(series, width, height, self.cursor, color=not self.app.no_color)
            self._drawn = key
        return self._text
