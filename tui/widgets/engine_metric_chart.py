"""The engines view's metric chart: one metric of every engine (or every DP rank of one) on one plot.

Contract: the screen sets :attr:`EngineMetricChart.data` (an
:class:`EngineMetricData`: a core :class:`~miles_tui.core.analysis.engine_metrics.MetricChart`,
the window's bins, which lines are hidden, what the window ends at and how many
engines the run has). The widget draws, at its own size, a title row, a legend
row (each line's mark, name and newest value; hidden lines named so) and a
braille figure with the time before the window's end on x. Each line has its
colour and its mark at its last point; without colour its points are drawn
as its mark, so lines read apart. A NaN bin is a gap, never a low value. It
reads no files and computes nothing; plotext keeps one global figure, so
drawing happens only on the UI thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import plotext
from rich.segment import Segment
from rich.style import Style
from textual.reactive import reactive
from textual.strip import Strip

from miles_tui.core.analysis.engine_metrics import MetricChart
from miles_tui.core.telemetry import FloatArray, TimeBins
from miles_tui.tui.renderers import plot
from miles_tui.tui.views.engine_metric_rows import LINE_COLORS, chart_title, legend, mark
from miles_tui.tui.views.engine_rows import FRACTIONS
from miles_tui.tui.widgets.drawn_lines import DrawnLines
from miles_tui.tui.widgets.engine_chart import value_span, window_axes

NO_COLOR_MARKS = 24
"""Without colour, a line is drawn as at most about this many of its marks, evenly over its points."""


@dataclass(frozen=True, eq=False)
class EngineMetricData:
    """What the chart draws."""

    chart: MetricChart
    """The metric's lines."""
    bins: TimeBins
    """The window."""
    hidden: frozenset[int]
    """Places of the lines not drawn."""
    engines: int
    """Engines in the view (the title says how many the lines are of)."""
    end_label: str = "now"
    """The right end of the axis: ``now``, or ``end`` when the window ends at the last scrape."""


def _note(message: str, width: int, base: Style) -> list[Strip]:
    return [Strip([Segment(message[:width], base + Style(dim=True))])]


def _draw_marks(figure: Any, xs: FloatArray, ys: FloatArray, index: int, color: bool) -> None:
    finite = np.flatnonzero(np.isfinite(ys))
    if not len(finite):
        return
    keep = finite[-1:] if color else finite[:: max(1, len(finite) // NO_COLOR_MARKS)]
    foreground = LINE_COLORS[index % len(LINE_COLORS)] if color else None
    symbol = plotext.marker(mark(index), plotext.pixel(foreground=foreground))
    figure.draw(figure.signal(xs[keep].tolist(), ys[keep].tolist(), marker=symbol))


def metric_body(data: EngineMetricData, width: int, height: int, color: bool, base: Style) -> list[Strip]:
    """The figure (no title or legend), one strip per row."""
    if width < 16 or height < 4:
        return _note("(too small for a chart)", width, base)
    shown = [(i, line) for i, line in enumerate(data.chart.lines) if i not in data.hidden]
    if not data.chart.lines:
        return _note("no engine exports this metric in this window", width, base)
    if not shown:
        return _note("every line is hidden: press its digit, or a to show all", width, base)
    finite = np.concatenate([line.value[np.isfinite(line.value)] for _, line in shown])
    if not len(finite):
        return _note("no point in this window (a counter needs two scrapes, a mean a completion)", width, base)
    fraction = data.chart.metric.kind == "gauge" and data.chart.metric.name in FRACTIONS
    lo, hi = value_span(finite, fraction)
    bins = data.bins
    edges = bins.edges()
    xs = (edges[:-1] + edges[1:]) / 2 - bins.until
    figure = plot.start(width, height, color)
    for index, line in shown:
        ys = np.clip(line.value, lo, hi)
        if color:
            plot.draw_line(figure, xs, ys, LINE_COLORS[index % len(LINE_COLORS)], solid=True)
        _draw_marks(figure, xs, ys, index, color)
    window_axes(figure, bins, data.end_label, (lo, hi), fraction, (width, height))
    return plot.to_strips(figure, color, base)


class EngineMetricChart(DrawnLines):
    """One engine metric of every engine (or DP rank) over the window."""

    DEFAULT_CSS = """
    EngineMetricChart {
        height: 1fr;
        min-height: 6;
    }
    """

    data: reactive[EngineMetricData | None] = reactive(None, always_update=True)
    """What to draw (set a new object to redraw)."""

    def source(self) -> object:
        return self.data

    def draw(self, width: int, height: int, color: bool, base: Style) -> list[Strip]:
        data = self.data
        if data is None:
            return _note("choose a metric: l lists them", width, base)
        console = self.app.console
        title = chart_title(data.chart, data.engines)
        title.truncate(width, overflow="ellipsis")
        head = [
            Strip(title.render(console)).apply_style(base),
            Strip(legend(data.chart, data.hidden, width).render(console)).apply_style(base),
        ]
        return [*head, *metric_body(data, width, height - 2, color, base)]
