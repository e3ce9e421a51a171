"""Trend sparklines across steps: one line per headline figure, oldest left, newest right.

Contract: one point per visible train step, in step order; a step without a
value (not summarized yet, unreadable, or a figure the step does not have) is
a blank gap in the line, never a bar: ``▁`` means the lowest value drawn, so a
gap must not look like one. Lines are drawn by :mod:`miles_tui.tui.renderers.sparkline` (the
same renderer as the token series); more steps than cells are averaged into exactly as many cells as the
line has (a cell holds the mean of its steps), so the newest step is always at the right end.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Label

from miles_tui.core.dump import StepAggregate
from miles_tui.tui.formatting import MISSING, number, percent, trend_scale
from miles_tui.tui.renderers.sparkline import FloatArray, SparkPicture, SparkStyles, spark_frame

TRENDS: tuple[tuple[str, str], ...] = (
    ("reward_mean", "reward"),
    ("zero_std_group_frac", "zero-std"),
    ("truncated_frac", "truncated"),
    ("avg_staleness", "staleness"),
    ("mean_abs_lp_diff", "|lpΔ|"),
)


class TrendLine(Widget):
    """One line of bars, one value per step (NaN: a blank gap)."""

    DEFAULT_CSS = """
    TrendLine { width: 1fr; height: 1; color: $accent; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.values: FloatArray = np.zeros(0)
        """One value per step, oldest first (NaN: no value)."""
        self.scale: tuple[float, float] | None = None
        """The values the floor and the top of the cell stand for (None: the values' own min and max)."""
        self._drawn: tuple[int, Strip] | None = None

    def show(self, values: FloatArray, scale: tuple[float, float] | None = None) -> None:
        """Draw these values against ``scale`` (low, high)."""
        self.values = values
        self.scale = scale
        self._drawn = None
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y != 0 or width <= 0:
            return Strip.blank(width, self.rich_style)
        if self._drawn is None or self._drawn[0] != width:
            frame = spark_frame(binned(self.values, width), None, width, how="mean")
            if self.scale is not None and frame.lo is not None:
                low, high = self.scale
                if high <= low:  # every value is the scale's one value (a constant 0): flat at the floor
                    high = low + 1.0
                frame = dataclasses.replace(frame, lo=low, hi=high)
            styles = SparkStyles(bar=self.rich_style)
            self._drawn = (width, SparkPicture.draw(frame, 1).strips(styles, width, base=self.rich_style)[0])
        return self._drawn[1]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._drawn = None


def binned(values: FloatArray, width: int) -> FloatArray:
    """``values`` in exactly ``width`` cells when there are more (cell c: the mean of the finite values of steps
    [c·n/width, (c+1)·n/width); NaN when it has none), else as they are."""
    count = len(values)
    if count <= width or width <= 0:
        return values
    edges = (np.arange(width) * count) // width
    finite = np.isfinite(values)
    sums = np.add.reduceat(np.where(finite, values, 0.0), edges)
    counts = np.add.reduceat(finite.astype(np.int64), edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


class StepTrends(Vertical):
    """Sparklines of step aggregates; a step without a value is a gap."""

    DEFAULT_CSS = """
    StepTrends { height: auto; }
    StepTrends > Horizontal { height: 1; }
    StepTrends Label.trend-name { width: 10; }
    StepTrends Label.trend-value { width: 9; text-align: right; }
    StepTrends Label.trend-scale { width: 14; text-align: right; color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        for key, label in TRENDS:
            with Horizontal():
                yield Label(label, classes="trend-name")
                yield TrendLine(id=f"trend-{key}")
                yield Label("", id=f"trend-scale-{key}", classes="trend-scale")
                yield Label(MISSING, id=f"trend-value-{key}", classes="trend-value")

    def show(self, aggregates: Sequence[StepAggregate | None]) -> None:
        """Redraw from one aggregate per train step in step order (None: the step has no summary yet; a
        value label only when its text changes: updating a label lays the screen out again)."""
        for key, _ in TRENDS:
            values = [None if a is None else getattr(a, key) for a in aggregates]
            points = np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
            fraction = key.endswith("_frac")
            finite = points[np.isfinite(points)]
            low, high = (float(finite.min()), float(finite.max())) if len(finite) else (math.nan, math.nan)
            # bars rise from zero; a fraction is drawn on 0-100 %
            scale = (0.0, 1.0) if fraction else (min(low, 0.0), max(high, 0.0))
            self.query_one(f"#trend-{key}", TrendLine).show(points, scale if len(finite) else None)
            last = next((v for v in reversed(values) if v is not None), None)
            text = percent(last) if fraction else number(last, 3)
            shown = trend_scale(low, high, fraction) if len(finite) else ""
            if self._shown.get(key) != text:
                self._shown[key] = text
                self.query_one(f"#trend-value-{key}", Label).update(text)
            if self._shown.get(f"scale-{key}") != shown:
                self._shown[f"scale-{key}"] = shown
                self.query_one(f"#trend-scale-{key}", Label).update(shown)
