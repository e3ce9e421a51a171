"""Draw a per-token series as block-character bars, with gaps, bands and a cursor column.

Contract:
- Input is one float per token position (NaN = no value: a loss-masked or
  prompt position) and one :class:`Band` per position. Output is one
  :class:`~textual.strip.Strip` per row, top row first, exactly ``width``
  cells wide.
- A NaN draws nothing (a blank cell on its band's background); every finite
  value, zero included, draws at least ``▁``: a gap never looks like a low
  value. Heights scale linearly from the window's smallest finite value
  (``▁``) to its largest (full height); a constant series draws at half
  height; ±inf clamp to the top and bottom.
- More tokens than columns: each column is a bucket of ``tokens_per_column``
  consecutive tokens summarized by the signed value of largest magnitude
  (``absmax``, spikes survive) or by the mean; a bucket whose values are all
  NaN stays a gap. Fewer tokens than columns: each token is widened to
  ``columns_per_token`` columns. A bucket's band is the most data-bearing
  band it contains (trained > masked > prompt).
- Computing a :class:`SparkFrame` (numpy, once per window) is separate from
  drawing it (:class:`SparkPicture`, once per frame and height) and from
  styling it with a cursor (:meth:`SparkPicture.strips`, once per key press),
  so moving a cursor costs a handful of segments per row.
This module holds no widget state, reads nothing and computes no statistics
beyond the scale of what it draws.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

FloatArray = npt.NDArray[np.float64]
BandArray = npt.NDArray[np.int8]
Summary = Literal["absmax", "mean"]

BARS = "▁▂▃▄▅▆▇█"
"""Eighths of a cell, lowest first."""
_CELLS = np.array([" ", *BARS])
_EIGHTHS = len(BARS)


class Band(enum.IntEnum):
    """What a token position is, for the background behind its bar (lower = more data)."""

    TRAINED = 0
    """A response token the loss counts: values drawn on the plain background."""
    MASKED = 1
    """A response token with loss_mask 0: no value, masked background."""
    PROMPT = 2
    """A prompt token: no per-token values exist, prompt background."""


@dataclass(frozen=True)
class SparkStyles:
    """The styles a picture is drawn with (widgets take them from their CSS)."""

    bar: Style = field(default_factory=Style)
    """Foreground of the bars (and base of every cell)."""
    masked: Style = field(default_factory=lambda: Style(bgcolor="grey23"))
    """Background band of loss-masked positions."""
    prompt: Style = field(default_factory=lambda: Style(bgcolor="grey15"))
    """Background band of prompt positions."""
    cursor: Style = field(default_factory=lambda: Style(bgcolor="dark_orange3"))
    """Background of the cursor column."""

    def band(self, band: Band) -> Style:
        """The style of a cell of a band."""
        if band is Band.PROMPT:
            return self.bar + self.prompt
        if band is Band.MASKED:
            return self.bar + self.masked
        return self.bar


@dataclass(frozen=True, eq=False)
class SparkFrame:
    """One window ``[start, stop)`` of one series, bucketed to columns."""

    start: int
    """First token position of the window."""
    stop: int
    """End token position (exclusive)."""
    tokens_per_column: int
    """Tokens summarized by one column (1 when tokens are widened)."""
    columns_per_token: int
    """Columns one token is widened to (1 when tokens are bucketed)."""
    values: FloatArray
    """One value per drawn column (NaN: gap)."""
    bands: BandArray
    """One :class:`Band` per drawn column."""
    lo: float | None
    """Smallest finite value of the window (None: nothing to draw)."""
    hi: float | None
    """Largest finite value of the window."""

    @property
    def columns(self) -> int:
        """Columns drawn (at most the width the frame was made for)."""
        return len(self.values)

    def columns_of(self, position: int) -> tuple[int, int] | None:
        """The columns ``[first, end)`` that draw a token position, or None outside the window."""
        if not self.start <= position < self.stop:
            return None
        bucket = (position - self.start) // self.tokens_per_column
        first = bucket * self.columns_per_token
        return first, first + self.columns_per_token

    def position_at(self, column: int) -> int | None:
        """The first token position a column draws, or None past the drawn columns."""
        if not 0 <= column < self.columns:
            return None
        return self.start + (column // self.columns_per_token) * self.tokens_per_column


def bucket_values(values: FloatArray, size: int, how: Summary = "absmax") -> FloatArray:
    """Summarize consecutive runs of ``size`` values; an all-NaN run gives NaN."""
    if size <= 1 or len(values) == 0:
        return values.astype(np.float64, copy=True)
    count = math.ceil(len(values) / size)
    padded = np.full(count * size, np.nan)
    padded[: len(values)] = values
    grid = padded.reshape(count, size)
    present = ~np.isnan(grid)
    any_present = present.any(axis=1)
    if how == "mean":
        totals = np.where(present, grid, 0.0).sum(axis=1)
        counts = present.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = totals / counts
        return np.where(any_present, means, np.nan)
    magnitude = np.where(present, np.abs(grid), -1.0)
    picked = grid[np.arange(count), magnitude.argmax(axis=1)]
    return np.where(any_present, picked, np.nan)


def bucket_bands(bands: BandArray, size: int) -> BandArray:
    """The most data-bearing band of each run of ``size`` bands."""
    if size <= 1 or len(bands) == 0:
        return bands.astype(np.int8, copy=True)
    count = math.ceil(len(bands) / size)
    padded = np.full(count * size, int(Band.PROMPT), dtype=np.int8)
    padded[: len(bands)] = bands
    smallest: BandArray = padded.reshape(count, size).min(axis=1).astype(np.int8)
    return smallest


def spark_frame(
    values: FloatArray,
    bands: BandArray | None,
    width: int,
    start: int = 0,
    stop: int | None = None,
    how: Summary = "absmax",
) -> SparkFrame:
    """Bucket ``values[start:stop]`` (with their bands) to at most ``width`` columns."""
    stop = len(values) if stop is None else min(stop, len(values))
    start = max(0, min(start, stop))
    window = values[start:stop]
    band_window = (
        np.full(len(window), int(Band.TRAINED), dtype=np.int8) if bands is None else bands[start:stop].astype(np.int8)
    )
    count = len(window)
    finite = window[np.isfinite(window)]
    lo = float(finite.min()) if len(finite) else None
    hi = float(finite.max()) if len(finite) else None
    if width <= 0 or count == 0:
        empty = np.zeros(0, dtype=np.float64)
        return SparkFrame(start, stop, 1, 1, empty, np.zeros(0, dtype=np.int8), lo, hi)
    if count <= width:
        per_token = width // count
        return SparkFrame(
            start, stop, 1, per_token, np.repeat(window, per_token), np.repeat(band_window, per_token), lo, hi
        )
    size = math.ceil(count / width)
    return SparkFrame(start, stop, size, 1, bucket_values(window, size, how), bucket_bands(band_window, size), lo, hi)


def levels(frame: SparkFrame, height: int) -> npt.NDArray[np.int64]:
    """Bar height of each column in eighths of a cell: 0 for a gap, else 1..8*height."""
    values = frame.values
    top = _EIGHTHS * max(height, 1)
    gap = np.isnan(values)
    if frame.lo is None or frame.hi is None:
        return np.zeros(len(values), dtype=np.int64)
    span = frame.hi - frame.lo
    if span <= 0:
        level = np.full(len(values), max(1, top // 2), dtype=np.int64)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            fraction = np.clip((values - frame.lo) / span, 0.0, 1.0)
        level = 1 + np.rint(np.nan_to_num(fraction) * (top - 1)).astype(np.int64)
    return np.where(gap, 0, level)


def _band_runs(bands: BandArray) -> tuple[tuple[int, int, Band], ...]:
    if len(bands) == 0:
        return ()
    cuts = np.flatnonzero(np.diff(bands)) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(bands)]
    return tuple((a, b, Band(int(bands[a]))) for a, b in zip(starts, ends, strict=True))


@dataclass(frozen=True, eq=False)
class SparkPicture:
    """A frame drawn at a height: its characters and band runs, ready to be styled."""

    frame: SparkFrame
    """What is drawn."""
    rows: tuple[str, ...]
    """One string per row, top first, one character per drawn column."""
    runs: tuple[tuple[int, int, Band], ...]
    """Column ranges ``[first, end)`` of equal band."""

    @classmethod
    def draw(cls, frame: SparkFrame, height: int) -> SparkPicture:
        """Turn a frame into rows of block characters."""
        height = max(height, 1)
        level = levels(frame, height)
        rows = []
        for row in range(height):
            floor = _EIGHTHS * (height - 1 - row)
            cells = np.clip(level - floor, 0, _EIGHTHS)
            cells = np.where(level == 0, 0, cells)
            rows.append("".join(_CELLS[cells].tolist()))
        return cls(frame, tuple(rows), _band_runs(frame.bands))

    @classmethod
    def axis(cls, frame: SparkFrame, height: int = 1) -> SparkPicture:
        """The frame's token-position ruler (first row) on the frame's bands."""
        blank = " " * frame.columns
        rows = (ruler(frame, frame.columns), *([blank] * (max(height, 1) - 1)))
        return cls(frame, rows, _band_runs(frame.bands))

    def strips(
        self, styles: SparkStyles, width: int, cursor: int | None = None, base: Style | None = None
    ) -> list[Strip]:
        """Styled rows exactly ``width`` cells wide, the cursor's columns highlighted."""
        base = base or Style()
        marked = self.frame.columns_of(cursor) if cursor is not None else None
        band_styles = {band: base + styles.band(band) for band in Band}
        cursor_styles = {band: band_styles[band] + styles.cursor for band in Band}
        out = []
        for text in self.rows:
            segments: list[Segment] = []
            for first, end, band in self.runs:
                if marked is None or marked[1] <= first or end <= marked[0]:
                    segments.append(Segment(text[first:end], band_styles[band]))
                    continue
                lo, hi = max(first, marked[0]), min(end, marked[1])
                if lo > first:
                    segments.append(Segment(text[first:lo], band_styles[band]))
                segments.append(Segment(text[lo:hi], cursor_styles[band]))
                if hi < end:
                    segments.append(Segment(text[hi:end], band_styles[band]))
            drawn = min(len(text), width)
            strip = Strip(segments, len(text))
            if drawn < len(text):
                strip = strip.crop(0, width)
            out.append(strip.extend_cell_length(width, base) if drawn < width else strip)
        return out


def render_sparkline(
    values: FloatArray,
    width: int,
    height: int,
    *,
    bands: BandArray | None = None,
    cursor: int | None = None,
    styles: SparkStyles | None = None,
    how: Summary = "absmax",
) -> list[Strip]:
    """One-shot: draw a whole series at ``width`` × ``height`` (cursor = a token position)."""
    frame = spark_frame(values, bands, width, how=how)
    return SparkPicture.draw(frame, height).strips(styles or SparkStyles(), width, cursor)


def ruler(frame: SparkFrame, width: int) -> str:
    """Token-position tick labels placed under the columns that draw them, ``width`` characters."""
    cells = [" "] * max(width, 0)
    if frame.columns == 0 or width <= 0:
        return "".join(cells)
    label_width = len(str(frame.stop)) + 2
    columns_per_token = frame.columns_per_token / frame.tokens_per_column
    step = 1
    for candidate in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000):
        step = candidate
        if candidate * columns_per_token >= label_width:
            break
    first = -(-frame.start // step) * step
    free = 0
    for position in range(first, frame.stop, step):
        span = frame.columns_of(position)
        label = f"╵{position}"
        if span is None or span[0] < free:
            continue
        if span[0] + len(label) > width:
            break
        cells[span[0] : span[0] + len(label)] = label
        free = span[0] + len(label) + 1
    return "".join(cells)
