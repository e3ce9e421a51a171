"""A window of time cut into equal bins, and which window to show.

Contract: :class:`TimeBins` maps times to bins (a time exactly at the window's
end falls in the last bin; outside is -1); :func:`bin_count` never makes bins
narrower than the sampling interval, so a bin is never empty only because it
is too thin; :func:`window_bounds` ends a window at ``now`` while the data is
recent and at the newest sample once it stopped. Pure; takes ``now``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np

from miles_tui.core.telemetry.gpu_samples import FloatArray, IntArray

WINDOWS: Final[tuple[float | None, ...]] = (900.0, 3600.0, 6 * 3600.0, None)
"""The time windows the compute view offers, in seconds (None: the whole run)."""


@dataclass(frozen=True)
class TimeBins:
    """``count`` equal bins over ``[since, until]``."""

    since: float
    """Window start."""
    until: float
    """Window end (a sample exactly at it falls in the last bin)."""
    count: int
    """Number of bins."""

    @property
    def width(self) -> float:
        """Seconds per bin."""
        return (self.until - self.since) / self.count

    def edges(self) -> FloatArray:
        """The ``count + 1`` bin edges."""
        return np.linspace(self.since, self.until, self.count + 1)

    def index(self, ts: FloatArray) -> IntArray:
        """Bin of each time, -1 outside the window."""
        with np.errstate(invalid="ignore"):
            raw = np.floor((ts - self.since) / self.width)
        inside = (ts >= self.since) & (ts <= self.until)
        return np.where(inside, np.minimum(raw, self.count - 1), -1).astype(np.int64)


def time_bins(since: float, until: float, count: int) -> TimeBins:
    """Bins over a window; an empty window is widened to one second, and there is always one bin."""
    return TimeBins(since, max(until, since + 1.0), max(1, count))


def bin_count(span: float, interval: float | None, width: int) -> int:
    """Bins for a window drawn ``width`` cells wide: one per cell, never narrower than the sampling interval."""
    if interval is None or interval <= 0:
        return max(1, width)
    return max(1, min(width, math.floor(span / interval)))


def window_bounds(
    span: float | None, now: float, first: float | None, newest: float | None
) -> tuple[float, float, bool]:
    """(since, until, anchored_to_data) of the window ``span`` seconds long (None: everything).

    The window ends at ``now`` while the data is recent enough to show in it (a dead lane
    shows as a gap at the right); once the newest sample is more than half a window old
    (the run stopped) it ends at the newest sample instead, so the window shows the end
    of the data rather than nothing.
    """
    if newest is None or first is None:
        return now - (span or 3600.0), now, False
    length = span if span is not None else max(newest - first, 1.0)
    anchored = now - newest > length / 2
    until = newest if anchored else max(now, newest)
    since = until - span if span is not None else min(first, until - 60.0)
    return since, until, anchored
