"""Samples in flight over time, for the GPU view's trajectory rows (miles' lifecycle carpet, summed per bin).

For each bin of a window: how many samples were generating, in a tool call, and queued (inside an attempt
but neither), on average over the bin (time-weighted: a sample generating for half a bin counts 0.5). A span
with no end runs to ``now`` (an open attempt is still running), one with no start is left out (its start
was not read). The sum of each state is exact: the count of samples in the state is a step function of time,
its integral is piecewise linear, and each bin's mean is the integral's difference over its edges. Work is
O(spans log spans + bins), memory O(spans + bins).

Lanes are built from the events of [since - :data:`LEAD_SECONDS`, until] (a sample that began generating
before the window still counts in it); a window reaching more than :data:`MAX_EVENTS` events has no rows
(building them would hold the GIL for seconds at every redraw).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry import DashboardReader, TimeBins
from miles_tui.core.telemetry.trajectory_lanes import GEN, TOOL, SampleLane, trajectory_lanes

STREAM: Final = "trajectories"
MAX_EVENTS: Final = 400_000
"""Events a window's rows are built from at most (about a second of work); a window holding more has none."""
LEAD_SECONDS: Final = 3600.0
"""Events this long before a window are read too, for the spans that began before it."""

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class InFlight:
    """Mean samples per state in each bin of a window."""

    bins: TimeBins
    """The window's bins."""
    generating: FloatArray
    """Samples generating."""
    tools: FloatArray
    """Samples in a tool call."""
    queued: FloatArray
    """Samples inside an attempt, neither generating nor in a tool."""
    samples: int
    """Samples with any event read."""

    @property
    def peak(self) -> float:
        """The most samples in any state in any bin (0 when none)."""
        values = [float(a.max()) for a in (self.generating, self.tools, self.queued) if len(a)]
        return max(values, default=0.0)


def _spans(lanes: Sequence[SampleLane], kind: str | None, now: float) -> list[tuple[float, float]]:
    """[t0, t1) of every span of ``kind`` (None: the attempts) with a start; an open one ends at ``now``."""
    out: list[tuple[float, float]] = []
    for lane in lanes:
        items: Iterable[Any] = lane.attempts if kind is None else (s for s in lane.segments if s.kind == kind)
        for item in items:
            if item.t0 is None:
                continue
            end = now if item.t1 is None else item.t1
            if end > item.t0:
                out.append((float(item.t0), float(end)))
    return out


def mean_count(spans: Sequence[tuple[float, float]], bins: TimeBins) -> FloatArray:
    """How many spans cover each bin, on average over the bin (exact for any spans)."""
    edges = bins.edges()
    if not spans or bins.count <= 0 or not bins.width > 0:
        return np.zeros(max(bins.count, 0))
    starts = np.array([s for s, _ in spans])
    ends = np.array([e for _, e in spans])
    times = np.concatenate([starts, ends])
    steps = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    order = np.argsort(times, kind="stable")
    times, steps = times[order], steps[order]
    counts = np.cumsum(steps)  # spans open on [times[k], times[k+1])
    integral = np.concatenate([[0.0], np.cumsum(counts[:-1] * np.diff(times))])  # at times[k]
    covered: FloatArray = np.interp(edges, times, integral, left=0.0, right=float(integral[-1]))
    means: FloatArray = np.diff(covered) / bins.width
    return means


def in_flight(events: Iterable[Any], bins: TimeBins, now: float) -> InFlight:
    """Samples in flight per bin of ``bins`` from the run's trajectory events."""
    lanes = trajectory_lanes(events, None, bins.since - LEAD_SECONDS, bins.until).lanes
    generating = mean_count(_spans(lanes, GEN, now), bins)
    tools = mean_count(_spans(lanes, TOOL, now), bins)
    attempts = mean_count(_spans(lanes, None, now), bins)
    queued = np.maximum(attempts - generating - tools, 0.0)
    return InFlight(bins, generating, tools, queued, len(lanes))


def samples_in_flight(reader: DashboardReader, bins: TimeBins, now: float) -> InFlight | None:
    """The window's samples in flight from the reader's trajectory events; None when the run recorded none
    in its reach (or the stream is not followed), or more than :data:`MAX_EVENTS` (zoom in)."""
    if STREAM not in reader.streams:
        return None
    events = reader.records(STREAM, bins.since - LEAD_SECONDS, bins.until)
    if not events or len(events) > MAX_EVENTS:
        return None
    return in_flight(events, bins, now)
