"""A plotext line chart of one metric against its own step key: smoothing, log-y and a step cursor.

Contract: the screen sets :attr:`MetricChart.series` (a core
:class:`~miles_tui.core.telemetry.metrics.metric_store.MetricSeries`), :attr:`MetricChart.view` (smoothing,
log-y) and :attr:`MetricChart.cursor` (a step). At its own size the widget
asks core for :func:`~miles_tui.core.analysis.metric_view.plot_data` (step order, EMA, log
safety, min/max downsampling to the plot's width) and draws it
with :mod:`miles_tui.tui.renderers.plot`: one title row (key, x key, the value at the
cursor or the last value) over the plotext figure, handed to Textual as
strips (the Line API: no Rich Text to convert, which a grid redrawn on every
telemetry tick cannot afford). With smoothing on, the
raw line is drawn faint under the smoothed one; with NO_COLOR only the
smoothed line is drawn (two uncoloured lines would not read). It reads no
files and computes no statistics. A build costs a few milliseconds, so a
cursor move is drawn once the cursor has been still for
:data:`~miles_tui.tui.widgets.series_chart.SETTLE_SECONDS`; :attr:`MetricChart.builds`
counts the figures built (tests and the bench read it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from miles_tui.core.analysis import ChartSeries, PlotData, PointAt, plot_data, value_at
from miles_tui.core.base.inert_text import inert
from miles_tui.tui.formatting import MISSING, count_text, metric_value, step_label, step_range
from miles_tui.tui.renderers import plot
from miles_tui.tui.renderers.plot import int_ticks, step_tick, tick_labels, y_ticks
from miles_tui.tui.views.metric_lines import ChartView
from miles_tui.tui.views.overlay import Overlay
from miles_tui.tui.widgets.baseline_overlay import draw_overlay, legend_line
from miles_tui.tui.widgets.series_chart import SETTLE_SECONDS

TITLE_ROWS = 1
"""The title row above the figure."""

_FRAME_ROWS = 3
"""plotext's frame top, frame bottom and x tick labels."""

_Y_LABEL_COLUMNS = 8
"""Roughly what y tick labels and the frame take from the plot's width."""

POINTS_PER_COLUMN = 1
"""Points handed to plotext per plot column. Min/max buckets keep every spike at this resolution; each
point costs plotext ~30 µs, so two per column (braille's full resolution) would cost a grid of a dozen
charts ~15 ms more per redraw for a picture that looks the same."""

RAW, RAW_FAINT, SMOOTH, CURSOR = 12, 240, 12, 9
"""plotext colour numbers: the line, the raw line under a smoothed one, the smoothed line, the cursor."""


def plot_points(width: int) -> int:
    """Points a chart ``width`` cells wide plots at most (its series is downsampled to that)."""
    return max(POINTS_PER_COLUMN * (width - _Y_LABEL_COLUMNS), 4)


def _note(message: str, width: int, base: Style) -> list[Strip]:
    return [Strip([Segment(message[:width], base + Style(dim=True))])]


def _span(values: Sequence[float | None]) -> tuple[float, float]:
    known = [v for v in values if v is not None]
    return min(known), max(known)


def chart_body(
    data: PlotData,
    width: int,
    height: int,
    cursor: float | None = None,
    color: bool = True,
    base: Style | None = None,
    overlays: Sequence[tuple[PlotData, Overlay]] = (),
) -> list[Strip]:
    """The figure of ``data`` (no title), one strip per row, ``width`` × ``height`` cells; a line at step ``cursor``;
    each overlay (a baseline's points) under the run's line, the axes spanning both."""
    base = base or Style()
    if width < 16 or height < 4:
        return _note("(too small for a chart)", width, base)
    if data.lo is None or data.hi is None or data.x_lo is None or data.x_hi is None:
        why = "no positive values to draw on a log axis" if data.log_y and data.points else "no numeric values yet"
        if data.window is not None and data.points and not data.hidden:
            why = f"no value in steps {step_range(*data.window)}"
        return _note(why, width, base)
    drawn = [(d, o) for d, o in overlays if d.lo is not None and d.hi is not None]
    lo, hi = _span([data.lo, *(d.lo for d, _ in drawn)])[0], _span([data.hi, *(d.hi for d, _ in drawn)])[1]
    if hi <= lo:
        pad = 0.5 if data.log_y else max(abs(lo) * 0.05, 1e-9) if lo else 0.5
        lo, hi = lo - pad, hi + pad
    x_lo = _span([data.x_lo, *(d.x_lo for d, _ in drawn)])[0]
    x_hi = _span([data.x_hi, *(d.x_hi for d, _ in drawn)])[1]
    if x_hi <= x_lo:
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    figure = plot.start(width, height, color)
    for overlay_data, overlay in drawn:
        draw_overlay(figure, overlay_data, overlay, lo, hi, color)
    smoothed = len(data.smooth) > 0
    if not smoothed or color:
        raw = np.clip(data.raw, lo, hi)  # ±inf drawn at the edges; NaN stays a gap
        plot.draw_line(figure, data.x, raw, (RAW_FAINT if smoothed else RAW) if color else None, solid=True)
    if smoothed:
        plot.draw_line(figure, data.smooth_x, np.clip(data.smooth, lo, hi), SMOOTH if color else None, solid=True)
    if cursor is not None and x_lo <= cursor <= x_hi:
        plot.draw_vline(figure, cursor, lo, hi, CURSOR if color else None)
    figure.ruler("x").lim(x_lo, x_hi)
    x_ticks = int_ticks(math.ceil(x_lo), math.floor(x_hi), max(width // 10, 2))
    figure.ruler("x").ticks(x_ticks, [step_tick(tick) for tick in x_ticks])
    figure.ruler("y").lim(lo, hi)
    ticks = y_ticks(lo, hi, max(height - _FRAME_ROWS, 2), data.log_y)
    figure.ruler("y").ticks(ticks, tick_labels(ticks, data.log_y))
    return plot.to_strips(figure, color, base)


def chart_title(key: str, x_key: str, point: PointAt | None, cursor: float | None, width: int, hidden: int = 0) -> Text:
    """``key  x: x_key`` and, right-aligned, ``@step value``: the point at the cursor, or the last one; on a log
    axis, ``N ≤0 not drawn`` after the key when points are left out.

    When ``width`` is short the x key is cut first, then the key.
    """
    if point is None:
        value = Text(f"@{step_label(cursor)} {MISSING}" if cursor is not None else "", style="dim")
    else:
        value = Text.assemble((f"@{step_label(point.step)} ", "dim"), (metric_value(point.value), "bold"))
    text = Text(inert(key), style="bold", no_wrap=True, overflow="ellipsis")
    if hidden:
        text.append(f"  {count_text(hidden)} ≤0 not drawn", style="yellow")
    room = width - text.cell_len - value.cell_len - 2
    if room > 6:
        x_text = Text(f"  x: {inert(x_key)}", style="dim")
        x_text.truncate(room, overflow="ellipsis")
        text.append_text(x_text)
    if value.cell_len and width - text.cell_len >= value.cell_len + 1:
        text.append(" " * (width - text.cell_len - value.cell_len))
        text.append_text(value)
    text.truncate(width, overflow="ellipsis")
    return text


class MetricChart(Widget, can_focus=True):
    """One metric's chart: title row and plotext figure, drawn line by line; focusable (the selected chart)."""

    DEFAULT_CSS = """
    MetricChart {
        height: 10;
        min-height: 5;
    }
    """

    series: reactive[ChartSeries | None] = reactive(None, repaint=False, always_update=True)
    """The points to draw (set a new object to redraw; arrays are never compared)."""
    view: reactive[ChartView] = reactive(ChartView(), repaint=False)
    """Smoothing and y scale."""
    cursor: reactive[float | None] = reactive(None, repaint=False)
    """Step of the cursor line (None: no cursor)."""
    overlays: reactive[tuple[Overlay, ...]] = reactive((), repaint=False, always_update=True)
    """Baselines' series of the same key, drawn dimmed beside the run's and named in a legend row."""

    def __init__(
        self,
        series: ChartSeries | None = None,
        view: ChartView | None = None,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.set_reactive(MetricChart.series, series)
        if view is not None:
            self.set_reactive(MetricChart.view, view)
        self.builds = 0
        """Figures built so far."""
        self._drawn: tuple[object, ...] | None = None
        self._drawn_series: ChartSeries | None = None
        self._data: tuple[ChartSeries, ChartView, int, PlotData] | None = None
        self._drawn_overlays: tuple[Overlay, ...] = ()
        self._lines: list[Strip] = []
        self._settle: Timer | None = None

    @property
    def key(self) -> str | None:
        """The metric drawn."""
        return None if self.series is None else self.series.series.key

    def watch_series(self) -> None:
        self.refresh()

    def watch_view(self) -> None:
        self.refresh()

    def watch_overlays(self) -> None:
        self.refresh()

    def _overlay_data(self, width: int) -> list[tuple[PlotData, Overlay]]:
        points = plot_points(width)
        return [
            (plot_data(o.series, points, self.view.smoothing, self.view.log_y, self._window()), o)
            for o in self.overlays
            if o.series is not None
        ]

    def _window(self) -> tuple[float, float] | None:
        """The steps shown of this chart's step key (None: all); a baseline's overlay shares it."""
        return None if self.series is None else self.view.window(self.series.series.x_key)

    def watch_cursor(self) -> None:
        if self._settle is not None:
            self._settle.stop()
        if self._drawn is None:
            self.refresh()
        else:
            self._settle = self.set_timer(SETTLE_SECONDS, self.refresh, name="chart-settle")

    def plot_data(self, width: int) -> PlotData | None:
        """What is drawn at ``width`` cells (core computes it; cached until series, view or width change)."""
        series = self.series
        if series is None:
            return None
        points = plot_points(width)
        cached = self._data
        if cached is not None and cached[0] is series and cached[1] == self.view and cached[2] == points:
            return cached[3]
        data = plot_data(series, points, self.view.smoothing, self.view.log_y, self._window())
        self._data = (series, self.view, points, data)
        return data

    def lines(self) -> list[Strip]:
        """The rows as drawn now (built when series, view, cursor, size or colours changed)."""
        series = self.series
        width, height = self.content_size
        base = self.rich_style
        if series is None:
            self._lines = [Strip([Segment("no series", base + Style(dim=True))])]
            return self._lines
        color = not self.app.no_color
        key = (self.view, self.cursor, width, height, color, base)
        overlays = self.overlays
        if key != self._drawn or series is not self._drawn_series or overlays is not self._drawn_overlays:
            data = self.plot_data(width)
            assert data is not None
            kept = series.series
            point = value_at(kept, math.inf if self.cursor is None else self.cursor)
            title = chart_title(kept.key, kept.x_key, point, self.cursor, width, data.hidden)
            rows = [Strip(title.render(self.app.console)).apply_style(base)]
            if overlays:
                legend = legend_line(kept, overlays, self.cursor, width, metric_value, step_label)
                rows.append(Strip(legend.render(self.app.console)).apply_style(base))
            body = chart_body(
                data, width, height - len(rows), self.cursor, color, base, self._overlay_data(width) if overlays else ()
            )
            self._lines = [*rows, *body]
            self._drawn, self._drawn_series, self._drawn_overlays = key, series, overlays
            self.builds += 1
        return self._lines

    def drawn_text(self) -> str:
        """The characters of every row (what tests and screenshots read)."""
        return "\n".join(strip.text for strip in self.lines())

    def render_lines(self, crop: Region) -> list[Strip]:
        self.lines()  # once per pass: render_line only indexes
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(self.content_size.width)
