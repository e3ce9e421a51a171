"""Draw a row of values as a heat strip: one cell per bin, coloured by value, with a character ramp too.

Contract:

- :func:`heat_strip` turns values on a 0..``scale`` scale (NaN = no data) into
  one :class:`~textual.strip.Strip` exactly ``width`` cells wide. A value's level
  (1..8) picks both its character from :data:`RAMP` (``▁`` .. ``█``, so the strip
  reads without colour, under NO_COLOR) and its colour; a NaN is a blank cell, and
  every finite value, 0 included, draws at least ``▁``: a gap never looks like
  an idle GPU. Values outside the scale clamp to its ends.
- Fewer values than cells: each value is widened over neighbouring cells (the
  remainder spread evenly); more: consecutive values are averaged per cell.
- :func:`band_strip` draws a category per bin instead (a phase per bin): the
  category's own character and style, so categories read without colour; -1 is
  a blank cell. Fewer bins than cells widen; more pick the bin at each cell's start.
- :func:`time_axis` writes tick labels (``-15m`` … ``now``) under the cells that
  draw those times, counted back from the window's end or from another reference
  time (``now``, for a window panned into the past).
This module holds no state, reads nothing and computes nothing beyond what it draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

import numpy as np
import numpy.typing as npt
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from miles_tui.tui.formatting import duration
from miles_tui.tui.renderers.sparkline import bucket_values

FloatArray = npt.NDArray[np.float64]

RAMP: Final = "▁▂▃▄▅▆▇█"
"""Level 1..8 of a cell, lowest first."""

HEAT: Final = ("#6b4c9a", "#4f62b0", "#3a7fb8", "#2b9a9e", "#35b27a", "#72c653", "#b9d63c", "#f7e04b")
"""Colour of each level: cold (idle) to hot (busy)."""

_CHARS = np.array([" ", *RAMP])


@lru_cache(maxsize=64)
def heat_styles(colors: tuple[str, ...] = HEAT, base: Style | None = None) -> tuple[Style, ...]:
    """One style per level from colour names (the first for level 1), on ``base``."""
    base = base or Style()
    return tuple(base + Style(color=c) for c in colors)


def stretch(values: FloatArray, width: int) -> FloatArray:
    """``values`` resampled to ``width`` cells: widened (nearest) or averaged per cell (NaN kept as gaps)."""
    count = len(values)
    if width <= 0 or count == 0:
        return np.full(max(width, 0), np.nan)
    if count > width:
        values = bucket_values(values, math.ceil(count / width), "mean")
        count = len(values)
    cells = (np.arange(width) * count) // width
    return values[cells]


def levels(values: FloatArray, scale: float = 100.0) -> npt.NDArray[np.int64]:
    """0 for a gap, else 1..8 by value on ``[0, scale]``."""
    gap = np.isnan(values)
    fraction = np.clip(np.where(gap, 0.0, values) / scale, 0.0, 1.0)  # ±inf clamp to the ends
    level = 1 + np.minimum((fraction * len(RAMP)).astype(np.int64), len(RAMP) - 1)
    level[gap] = 0
    return level


def heat_strip(
    values: FloatArray,
    width: int,
    *,
    scale: float = 100.0,
    styles: Sequence[Style] | None = None,
    gap: Style | None = None,
) -> Strip:
    """One row of ``width`` cells; ``styles`` holds a style per level (one style: every level alike)."""
    if width <= 0:
        return Strip.blank(0)
    styles = tuple(styles) if styles else heat_styles()
    gap = gap or Style()
    level = levels(stretch(values, width), scale)
    chars = "".join(_CHARS[level].tolist())
    by_level = (gap, *(styles[min(lv, len(styles)) - 1] for lv in range(1, len(RAMP) + 1)))
    starts = [0, *(np.flatnonzero(np.diff(level)) + 1).tolist()]
    first = level[starts].tolist()
    ends = [*starts[1:], width]
    segments = [Segment(chars[a:b], by_level[lv]) for a, b, lv in zip(starts, ends, first, strict=True)]
    return Strip(segments, width)


def band_strip(
    kinds: npt.NDArray[np.int64], width: int, marks: Sequence[str], styles: Sequence[Style], gap: Style | None = None
) -> Strip:
    """One row of ``width`` cells: ``marks[k]`` in ``styles[k]`` for a bin of category ``k``, blank for -1."""
    if width <= 0:
        return Strip.blank(0)
    gap = gap or Style()
    count = len(kinds)
    cells = kinds[(np.arange(width) * count) // width] if count else np.full(width, -1, dtype=np.int64)
    cells = np.where((cells >= 0) & (cells < len(marks)), cells, -1)
    starts = [0, *(np.flatnonzero(np.diff(cells)) + 1).tolist()]
    ends = [*starts[1:], width]
    segments = []
    for a, b, kind in zip(starts, ends, cells[starts].tolist(), strict=True):
        if kind < 0:
            segments.append(Segment(" " * (b - a), gap))
        else:
            segments.append(Segment(marks[kind] * (b - a), styles[kind] if kind < len(styles) else gap))
    return Strip(segments, width)


_STEPS: Final = (10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)


def time_axis(since: float, until: float, width: int, end_label: str = "now", ref: float | None = None) -> str:
    """Tick labels at round offsets before ``ref`` (default: ``until``) that fall in the window (``-5m``),
    ``end_label`` at the right end."""
    cells = [" "] * max(width, 0)
    span = until - since
    if width <= 0 or span <= 0:
        return "".join(cells)
    ref = until if ref is None else ref
    end = f"{end_label}╵"
    step = _STEPS[-1]
    for candidate in _STEPS:
        if candidate / span * width >= 9:
            step = candidate
            break
    free_until = width - len(end) - 1
    offset = (math.floor(max(ref - until, 0.0) / step) + 1) * step  # the first round offset inside the window
    while ref - offset > since:
        column = round((ref - offset - since) / span * (width - 1))
        label = f"╵-{duration(offset, minutes=step % 60 == 0)}"  # 30 s apart: -1m30s -2m, never -2m -2m
        if column + len(label) <= free_until:
            cells[column : column + len(label)] = label
            free_until = column - 1
        offset += step
    if len(end) <= width:
        cells[width - len(end) :] = end
    return "".join(cells)
