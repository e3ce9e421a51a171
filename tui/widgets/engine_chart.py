"""One chart of the engines view: a metric of one engine over the window, a line per DP rank, restarts marked.

Contract: the screen sets :attr:`EngineChart.data` (an :class:`EngineChartData`:
a core :class:`~miles_tui.core.analysis.engine_view.EnginePanel`, the window's bins, the restart
times and what the window ends at). The widget draws at its own size with
:mod:`miles_tui.tui.renderers.plot`: a title row (what is charted, each DP rank's
newest value, the engine's newest value, ``↺N`` when the engine restarted in
the window) over a braille figure whose x axis is the time before the
window's end (``-5m`` ... ``now``). A NaN bin (no scrape in it) is a gap,
never a low value. Fractions are drawn on a fixed 0..1 axis. Each restart is a
vertical line, which reads without colour, and is named in the title. It
reads no files and computes no statistics; plotext keeps one global figure,
so drawing happens only on the UI thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.strip import Strip

from miles_tui.core.analysis import EnginePanel
from miles_tui.core.telemetry import FloatArray, TimeBins
from miles_tui.tui.formatting import duration, percent
from miles_tui.tui.renderers import plot
from miles_tui.tui.renderers.plot import tick_labels, y_ticks
from miles_tui.tui.views.engine_rows import FRACTIONS, RESTART_MARK, TITLES, value_text
from miles_tui.tui.widgets.drawn_lines import DrawnLines

LINE_COLORS: Final = (12, 10, 14, 13, 6, 5, 4, 2)
"""plotext colour numbers of the lines, one per DP rank (cycled)."""
RESTART_COLOR: Final = 11
"""The restart lines."""

_FRAME_ROWS: Final = 3
"""plotext's frame top and bottom and the x tick labels."""

_STEPS: Final = (10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)
"""Round tick distances (seconds)."""


@dataclass(frozen=True, eq=False)
class EngineChartData:
    """What one chart draws."""

    panel: EnginePanel
    """The metric's lines."""
    bins: TimeBins
    """The window."""
    restarts: tuple[float, ...]
    """Restart times in the window."""
    end_label: str = "now"
    """What the right end of the axis is: ``now``, or ``end`` when the window ends at the last scrape."""


def time_ticks(span: float, width: int) -> list[float]:
    """Offsets before the window's end (negative seconds, and 0) at a round distance, about 10 cells apart."""
    step = next((s for s in _STEPS if s / max(span, 1e-9) * width >= 10), _STEPS[-1])
    ticks = [0.0]
    offset = float(step)
    while offset <= span:
        ticks.append(-offset)
        offset += step
    return sorted(ticks)


def value_span(finite: FloatArray, fraction: bool) -> tuple[float, float]:
    """The y range of a chart of ``finite`` values: from 0 (or below) to the top, a fraction at least to 1."""
    if fraction:
        return 0.0, max(1.0, float(finite.max()))
    lo, hi = min(0.0, float(finite.min())), float(finite.max())
    return lo, (hi if hi > lo else lo + 1.0)


def window_axes(
    figure: Any, bins: TimeBins, end_label: str, span: tuple[float, float], fraction: bool, size: tuple[int, int]
) -> None:
    """The x axis as offsets before the window's end (``-10m … now``) and the y axis over ``span``, on a
    figure of ``size`` (width, height) cells."""
    width, height = size
    window = bins.until - bins.since
    figure.ruler("x").lim(-window, 0.0)
    ticks = time_ticks(window, width)
    whole = all(t % 60 == 0 for t in ticks)  # ticks under a minute apart keep their seconds (never -2m -2m)
    figure.ruler("x").ticks(ticks, [end_label if t == 0 else f"-{duration(-t, minutes=whole)}" for t in ticks])
    lo, hi = span
    figure.ruler("y").lim(lo, hi)
    y = y_ticks(lo, hi, max(height - _FRAME_ROWS, 2), False)
    figure.ruler("y").ticks(y, [percent(t) for t in y] if fraction else tick_labels(y, False))


def chart_title(data: EngineChartData, width: int) -> Text:
    """``name  value  ↺1 restart  dp0 12 dp1 3``: the engine's newest value first, the restarts, then each
    DP rank's newest value in its line's colour (the part a narrow chart cuts)."""
    panel = data.panel
    text = Text(TITLES.get(panel.metric, panel.metric), style="bold", no_wrap=True, overflow="ellipsis")
    text.append(f"  {value_text(panel.metric, panel.latest)}", style="bold")
    if data.restarts:
        count = len(data.restarts)
        text.append(f"  {RESTART_MARK}{count} restart{'s' if count != 1 else ''}", style="bold yellow")
    split = [line for line in panel.lines if line.dp_rank is not None]
    for index, line in enumerate(split):
        text.append(f"  dp{line.dp_rank} ", style="dim")
        text.append(value_text(panel.metric, line.latest), style=f"color({LINE_COLORS[index % len(LINE_COLORS)]})")
    text.truncate(width, overflow="ellipsis")
    return text


def _note(message: str, width: int, base: Style) -> list[Strip]:
    return [Strip([Segment(message[:width], base + Style(dim=True))])]


def chart_body(data: EngineChartData, width: int, height: int, color: bool, base: Style) -> list[Strip]:
    """The figure (no title), one strip per row."""
    if width < 16 or height < 4:
        return _note("(too small for a chart)", width, base)
    panel, bins = data.panel, data.bins
    if not panel.lines:
        return _note("this engine exports no such metric", width, base)
    values = [line.value for line in panel.lines]
    finite = np.concatenate([v[np.isfinite(v)] for v in values])
    if not len(finite):
        return _note("no scrape in this window", width, base)
    lo, hi = value_span(finite, panel.metric in FRACTIONS)
    edges = bins.edges()
    xs = (edges[:-1] + edges[1:]) / 2 - bins.until
    figure = plot.start(width, height, color)
    for index, line in enumerate(panel.lines):
        foreground = LINE_COLORS[index % len(LINE_COLORS)] if color else None
        plot.draw_line(figure, xs, np.clip(line.value, lo, hi), foreground, solid=True)
    for when in data.restarts:
        plot.draw_vline(figure, when - bins.until, lo, hi, RESTART_COLOR if color else None)
    window_axes(figure, bins, data.end_label, (lo, hi), panel.metric in FRACTIONS, (width, height))
    return plot.to_strips(figure, color, base)


class EngineChart(DrawnLines):
    """One engine metric over the window."""

    DEFAULT_CSS = """
    EngineChart {
        height: 9;
        min-height: 5;
    }
    """

    data: reactive[EngineChartData | None] = reactive(None, always_update=True)
    """What to draw (set a new object to redraw)."""

    def source(self) -> object:
        return self.data

    def draw(self, width: int, height: int, color: bool, base: Style) -> list[Strip]:
        data = self.data
        if data is None:
            return _note("no engine data", width, base)
        title = Strip(chart_title(data, width).render(self.app.console)).apply_style(base)
        return [title, *chart_body(data, width, height - 1, color, base)]
