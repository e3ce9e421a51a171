"""Reward against response length for one step: the points, a dot grid for drawing, a cursor walk.

Contract: pure functions of a :class:`StepSummary`; nothing here reads a file or draws. A sample
without a scalar reward is not a point (it is counted in :attr:`Scatter.without_reward`).
:func:`within_lengths` keeps the points of a length window (a zoom: the axes fit what is kept,
and the points left out are counted). Points are placed on a grid of ``2 × cols`` by ``4 × rows``
dots (a braille cell holds 2 × 4), row 0 at the top (highest reward). The cursor walks points in
length order (left/right) and to the nearest point above or below (up/down), so every point is
reachable from every other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from miles_tui.core.dump import StepSummary


@dataclass(frozen=True)
class ScatterPoint:
    """One sample of the step."""

    sample_index: int
    """Run-global sample id (what the sample screen opens)."""
    length: int
    """Response tokens (x)."""
    reward: float
    """Rollout-side reward (y)."""
    truncated: bool
    """Cut at the response cap: drawn with its own mark."""


@dataclass(frozen=True)
class Scatter:
    """A step's points and their extent."""

    points: tuple[ScatterPoint, ...]
    """Sorted by (length, reward, sample id): the left/right walk order."""
    without_reward: int
    """Samples with no scalar reward (not drawn)."""
    length_range: tuple[int, int]
    """Smallest and largest length (0, 0 when there is no point)."""
    reward_range: tuple[float, float]
    """Smallest and largest reward (0.0, 0.0 when there is no point)."""
    outside: int = 0
    """Points of the step left out by a length window (:func:`within_lengths`)."""


def step_scatter(summary: StepSummary) -> Scatter:
    """The points of a step."""
    points = sorted(
        (
            ScatterPoint(row.sample_index, row.response_length, row.reward, row.truncated)
            for row in summary.rows
            if row.reward is not None
        ),
        key=lambda p: (p.length, p.reward, p.sample_index),
    )
    if not points:
        return Scatter((), len(summary.rows), (0, 0), (0.0, 0.0))
    lengths = [p.length for p in points]
    rewards = [p.reward for p in points]
    return Scatter(
        tuple(points),
        len(summary.rows) - len(points),
        (min(lengths), max(lengths)),
        (min(rewards), max(rewards)),
    )


def within_lengths(scatter: Scatter, window: tuple[float, float] | None) -> Scatter:
    """The points whose length is in ``window`` (both ends kept; None: all), the length axis spanning the window
    and the reward axis fitting the points kept."""
    if window is None:
        return scatter
    lo, hi = window
    kept = tuple(p for p in scatter.points if lo <= p.length <= hi)
    rewards = [p.reward for p in kept]
    return Scatter(
        kept,
        scatter.without_reward,
        (math.floor(lo), math.ceil(hi)),
        (min(rewards), max(rewards)) if rewards else (0.0, 0.0),
        scatter.outside + len(scatter.points) - len(kept),
    )


def _scale(value: float, low: float, high: float, steps: int) -> int:
    """``value`` in [low, high] to a dot in [0, steps - 1]; a flat range sits in the middle."""
    if high <= low:
        return (steps - 1) // 2
    return min(steps - 1, max(0, round((value - low) / (high - low) * (steps - 1))))


def dot_of(scatter: Scatter, point: ScatterPoint, cols: int, rows: int) -> tuple[int, int]:
    """The (x, y) dot of a point on a ``2·cols × 4·rows`` grid; y = 0 is the top (highest reward)."""
    x = _scale(point.length, *scatter.length_range, 2 * cols)
    y = 4 * rows - 1 - _scale(point.reward, *scatter.reward_range, 4 * rows)
    return x, y


def step_cursor(scatter: Scatter, index: int, direction: str) -> int:
    """The point the cursor moves to from point ``index``: ``left``/``right`` in length order,
    ``up``/``down`` to the nearest point with a higher/lower reward (or the same point at an edge)."""
    points = scatter.points
    if not points:
        return 0
    index = min(max(index, 0), len(points) - 1)
    if direction == "left":
        return max(0, index - 1)
    if direction == "right":
        return min(len(points) - 1, index + 1)
    here = points[index]
    above = direction == "up"
    (x0, x1), (y0, y1) = scatter.length_range, scatter.reward_range
    width, height = max(x1 - x0, 1), max(y1 - y0, 1e-12)
    best, best_distance = index, float("inf")
    for other, point in enumerate(points):
        rise = point.reward - here.reward
        if (rise <= 0) if above else (rise >= 0):
            continue
        distance = ((point.length - here.length) / width) ** 2 + (rise / height) ** 2
        if distance < best_distance:
            best, best_distance = other, distance
    return best
