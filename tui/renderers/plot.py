"""plotext drawing shared by the chart widgets: gap-aware braille lines, a cursor line, ticks, Rich Text out.

Contract: :func:`int_ticks`, :func:`y_ticks`, :func:`tick_labels` and
:func:`step_tick` choose and write round axis ticks; :func:`start` resets plotext's one global figure to ``width`` ×
``height`` cells (the colorless theme when ``color`` is False, so NO_COLOR
output carries no escape codes); :func:`draw_line` draws each run of
non-NaN values as its own braille line, so a gap is never bridged;
:func:`draw_vline` draws a vertical line that reads without colour too;
:func:`to_text` builds the figure into Rich Text (``Text.from_ansi``), and
:func:`to_strips` into Textual strips directly: plotext writes only simple
SGR codes, and parsing them here costs a tenth of ``Text.from_ansi`` plus
Textual's own conversion of that Text, which matters for a grid of charts.
plotext keeps one global figure: call these on the UI thread only, one
chart at a time. Nothing here reads data or computes statistics.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
import plotext
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from miles_tui.tui.formatting import fixed, significant

FloatArray = npt.NDArray[np.float64]


def finite_runs(values: FloatArray) -> list[tuple[int, int]]:
    """The ``[start, end)`` index ranges of consecutive non-NaN values: each is drawn as its own line."""
    present = np.concatenate([[0], (~np.isnan(values)).astype(np.int8), [0]])
    edges = np.flatnonzero(np.diff(present))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def int_ticks(start: int, stop: int, count: int) -> list[int]:
    """About ``count`` round integer ticks (1, 2, 5 × 10^k apart) from ``start`` to ``stop``."""
    span = max(stop - start, 1)
    raw = span / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), 10 * magnitude)
    first = -(-start // step) * step
    return list(range(int(first), stop + 1, int(step)))


def step_tick(step: int) -> str:
    """An x tick label: 950, 12k, 1.5M."""
    scale, suffix = next(((s, x) for s, x in _SI if abs(step) >= s), (1, ""))
    return f"{significant(step / scale)}{suffix}" if suffix else str(step)


_NICE = (1.0, 2.0, 2.5, 5.0)

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))

TICK_ROWS = 2.5
"""Least distance between two y ticks, in rows (plotext rounds a tick to a row: closer ones touch)."""


def y_ticks(lo: float, hi: float, rows: int, log_y: bool) -> list[float]:
    """Round tick positions (plot space) in [lo, hi], at least :data:`TICK_ROWS` rows apart on a ``rows``-row plot.

    Decades on a log axis when two fit; when no two round values fit, the ends.
    """
    if hi <= lo:
        return [lo]
    min_step = (hi - lo) * TICK_ROWS / max(rows, 1)
    if log_y:
        decades = [float(d) for d in range(math.ceil(lo), math.floor(hi) + 1)]
        if len(decades) >= 2:
            return decades[:: max(1, math.ceil(min_step))]
        linear = y_ticks(10**lo, 10**hi, rows, False)
        return [math.log10(v) for v in linear if v > 0] if len(linear) >= 2 and linear[0] > 0 else [lo, hi]
    top = math.floor(math.log10(hi - lo))
    for exponent in range(top - 3, top + 2):
        for mantissa in _NICE:
            step = mantissa * 10.0**exponent
            if step < min_step:
                continue
            first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
            return [i * step for i in range(first, last + 1)] if last > first else [lo, hi]
    return [lo, hi]


def _decimals(ticks: list[float]) -> int | None:
    """Fewest decimals that write every tick exactly (None: more than five would be needed)."""
    for decimals in range(6):
        scale = 10.0**decimals
        if all(abs(t * scale - round(t * scale)) < 1e-6 * max(1.0, abs(t * scale)) for t in ticks):
            return decimals
    return None


def _short(value: float) -> str:
    decimals = _decimals([value])
    return significant(value) if decimals is None else fixed(value, decimals)


def tick_labels(ticks: list[float], log_y: bool) -> list[str]:
    """Short tick labels: round ticks written exactly, large ones with k/M/G, the data's ends to the span's digits."""
    values = [10**t for t in ticks] if log_y else ticks
    largest = max(abs(v) for v in values)
    if largest >= 1e4:
        scale, suffix = next((s, x) for s, x in _SI if largest >= s)
        return [f"{significant(v / scale)}{suffix}" if v else "0" for v in values]
    if 0 < largest < 1e-3:
        return [significant(v) for v in values]
    if log_y:  # decades and round values: each written as short as it goes
        return [_short(v) for v in values]
    decimals = _decimals(values)
    if decimals is None:  # not round (the ends of the data): enough decimals for about 2 digits of the span
        span = max(values) - min(values)
        decimals = min(6, max(0, 1 - math.floor(math.log10(span)))) if span > 0 else 3
    return [fixed(v, decimals) for v in values]


def start(width: int, height: int, color: bool) -> Any:
    """plotext's figure, cleared and sized to ``width`` × ``height`` cells."""
    figure = plotext.figure
    plotext.terminal.limit(False, False)
    figure.clear()
    figure.theme("simple" if color else "colorless")
    figure.plot_size(width, height)
    return figure


def draw_line(figure: Any, xs: FloatArray, ys: FloatArray, foreground: int | None, *, solid: bool = False) -> None:
    """A braille line through the points, broken wherever ``ys`` is NaN (``solid``: every dot it crosses)."""
    marker = plotext.marker("braille", plotext.pixel(foreground=foreground))
    for first, end in finite_runs(ys):
        signal = figure.signal(xs[first:end].tolist(), ys[first:end].tolist(), marker=marker).lines()
        figure.draw(signal.density("full") if solid else signal)


def draw_vline(figure: Any, x: float, lo: float, hi: float, foreground: int | None) -> None:
    """A vertical line at ``x`` from ``lo`` to ``hi``."""
    line = plotext.line(1, plotext.pixel(foreground=foreground))
    figure.draw(figure.signal([x, x], [lo, hi], marker=line).lines())


def to_text(figure: Any, color: bool) -> Text:
    """The built figure as Rich Text, one line per row."""
    return Text.from_ansi(figure.build().string(colorless=not color), no_wrap=True)


_SGR = re.compile(r"\x1b\[([0-9;]*)m")


@lru_cache(maxsize=256)
def _sgr_style(codes: str) -> Style:
    """The style of one SGR sequence's codes (what plotext writes: reset, 256 colours, rgb, bold, dim...)."""
    style = Style()
    parts = [int(part) if part else 0 for part in codes.split(";")]
    i = 0
    while i < len(parts):
        code = parts[i]
        if code in (38, 48) and i + 2 < len(parts) and parts[i + 1] == 5:
            color = Color.from_ansi(parts[i + 2])
            style += Style(color=color) if code == 38 else Style(bgcolor=color)
            i += 3
            continue
        if code in (38, 48) and i + 4 < len(parts) and parts[i + 1] == 2:
            color = Color.from_rgb(*parts[i + 2 : i + 5])
            style += Style(color=color) if code == 38 else Style(bgcolor=color)
            i += 5
            continue
        if code == 0:
            style = Style()
        elif 30 <= code <= 37 or 90 <= code <= 97:
            style += Style(color=Color.from_ansi(code - 30 if code < 90 else code - 82))
        elif 40 <= code <= 47 or 100 <= code <= 107:
            style += Style(bgcolor=Color.from_ansi(code - 40 if code < 100 else code - 92))
        else:
            style += Style.parse({1: "bold", 2: "dim", 3: "italic", 4: "underline", 7: "reverse"}.get(code, "none"))
        i += 1
    return style


def ansi_strips(ansi: str, base: Style | None = None) -> list[Strip]:
    """plotext's output (text with SGR escape codes) as one strip per line, ``base`` under every segment."""
    base = base or Style()
    styles: dict[str, Style] = {}  # one Style object per code: merging compares by identity
    strips = []
    for line in ansi.removesuffix("\n").split("\n"):
        segments: list[Segment] = []
        style = base
        for index, part in enumerate(_SGR.split(line)):
            if index % 2:
                style = styles.get(part) or styles.setdefault(part, base + _sgr_style(part))
            elif part:
                if segments and segments[-1].style is style:
                    segments[-1] = Segment(segments[-1].text + part, style)
                else:
                    segments.append(Segment(part, style))
        strips.append(Strip(segments))
    return strips


def to_strips(figure: Any, color: bool, base: Style | None = None) -> list[Strip]:
    """The built figure as Textual strips, one per row (see :func:`ansi_strips`)."""
    return ansi_strips(figure.build().string(colorless=not color), base)
