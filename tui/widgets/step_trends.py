"""Trend sparklines across steps: one line per headline figure, oldest left, newest right.

Contract: one point per visible train step, in step order; a step without a
value (not summarized yet, unreadable, or a figure the step does not have) is
a blank gap in the line, never a bar: ``▁`` means the lowest value drawn, so a
gap must not look like one. Lines are drawn by :mod:`miles_tui.tui.renderers.sparkline` (the
same renderer as the token series); more steps than cells are averaged per cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Label

from miles_tui.core.dump import StepAggregate
from miles_tui.tui.formatting import MISSING, number, percent
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
        self._drawn: tuple[int, Strip] | None = None

    def show(self, values: FloatArray) -> None:
        """Draw these values."""
        self.values = values
        self._drawn = None
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y != 0 or width <= 0:
            return Strip.blank(width, self.rich_style)
        if self._drawn is None or self._drawn[0] != width:
            frame = spark_frame(self.values, None, width, how="mean")
            styles = SparkStyles(bar=self.rich_style)
            self._drawn = (width, SparkPicture.draw(frame, 1).strips(styles, width, base=self.rich_style)[0])
        return self._drawn[1]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._drawn = None


class StepTrends(Vertical):
    """Sparklines of step aggregates; a step without a value is a gap."""

    DEFAULT_CSS = """
    StepTrends { height: auto; }
    StepTrends > Horizontal { height: 1; }
    StepTrends Label.trend-name { width: 10; }
    StepTrends Label.trend-value { width: 9; text-align: right; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        for key, label in TRENDS:
            with Horizontal():
                yield Label(label, classes="trend-name")
                yield TrendLine(id=f"trend-{key}")
                yield Label(MISSING, id=f"trend-value-{key}", classes="trend-value")

    def show(self, aggregates: Sequence[StepAggregate | None]) -> None:
        """Redraw from one aggregate per train step in step order (None: the step has no summary yet; a
        value label only when its text changes: updating a label lays the screen out again)."""
        for key, _ in TRENDS:
            values = [None if a is None else getattr(a, key) for a in aggregates]
            points = np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
            self.query_one(f"#trend-{key}", TrendLine).show(points)
            last = next((v for v in reversed(values) if v is not None), None)
            text = percent(last) if key.endswith("_frac") else number(last, 3)
            if self._shown.get(key) != text:
                self._shown[key] = text
                self.query_one(f"#trend-value-{key}", Label).update(text)
