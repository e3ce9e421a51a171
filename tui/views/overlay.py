"""One baseline's series on one metric chart, as data, and the baselines' colours.

Views build these (:mod:`miles_tui.tui.views.baseline_series`); the chart widget draws them
(:mod:`miles_tui.tui.widgets.baseline_overlay`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from miles_tui.core.analysis import ChartSeries
from miles_tui.core.analysis.baseline import AlignedSeries, value_exactly_at

OVERLAY_COLORS = (180, 108, 146, 174, 109, 144, 139, 152)
"""plotext colour numbers of the baselines in the order added: muted, unlike the run's bright line."""

RICH_COLORS = ("color(180)", "color(108)", "color(146)", "color(174)", "color(109)", "color(144)", "color(139)")
"""The same colours for the legend's marks."""


@dataclass(frozen=True, eq=False)
class Overlay:
    """One baseline's series on one chart."""

    index: int
    """The baseline's place in the order added (its colour)."""
    mark: str
    """Its letter."""
    name: str
    """Its run name (from the run: made inert where drawn)."""
    series: ChartSeries | None
    """Its points of the chart's key against the chart's x key (None: it never logged them)."""
    aligned: AlignedSeries | None = None
    """Its whole series at exactly each of the run's kept steps (the legend's lookups; None: not read)."""

    def value_at(self, step: float) -> float | None:
        """Its value logged at exactly ``step`` (None: nothing logged there)."""
        aligned = self.aligned
        if aligned is not None:
            where = int(np.searchsorted(aligned.step, step))
            if where < len(aligned.step) and aligned.step[where] == step:
                return None if aligned.missing[where] else float(aligned.baseline[where])
        return value_exactly_at(None if self.series is None else self.series.series, step)
