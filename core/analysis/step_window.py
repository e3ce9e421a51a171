"""The metrics charts' step window: zoom in and out around a step, and keep a step in view.

Contract: a window is ``(first, last)`` steps, both shown, or None for the
whole run. :func:`zoom_steps` halves (``direction`` < 0) or doubles (> 0) the
window's span around ``center`` (the step cursor; without one the window keeps
its last step, the newest data in view), never narrower than
:data:`MIN_SPAN_STEPS` and never past the run's ``extent``; a window that
would cover the whole extent is None. :func:`window_holding` slides a window
just far enough to show a step. :func:`step_extents` gives each step key's
extent among some series (what a zoom spans). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

import numpy as np

from miles_tui.core.telemetry import MetricSeries

MIN_SPAN_STEPS: Final = 8.0
"""The narrowest window (steps between its ends)."""

StepWindow = tuple[float, float]


def zoom_steps(
    window: StepWindow | None, extent: StepWindow | None, direction: int, center: float | None = None
) -> StepWindow | None:
    """See the module docstring."""
    if extent is None or extent[1] <= extent[0]:
        return None
    first, last = extent
    lo, hi = window if window is not None else extent
    span = hi - lo
    wanted = max(span / 2, MIN_SPAN_STEPS) if direction < 0 else span * 2
    if wanted >= last - first:
        return None
    if center is not None and lo <= center <= hi:
        share = (center - lo) / span if span > 0 else 1.0  # the center stays where it is on screen
        new_lo = center - share * wanted
    else:
        new_lo = hi - wanted
    new_lo = min(max(new_lo, first), last - wanted)
    return (new_lo, new_lo + wanted)


def window_holding(window: StepWindow | None, step: float) -> StepWindow | None:
    """``window`` slid just far enough that ``step`` is in it (None stays None: the whole run shows every step)."""
    if window is None:
        return None
    lo, hi = window
    if step < lo:
        return (step, step + hi - lo)
    if step > hi:
        return (step - (hi - lo), step)
    return window


def step_extents(series: Iterable[MetricSeries]) -> dict[str, tuple[float, float]]:
    """Each step key among the series: the first and last numeric step logged against it (what a zoom spans)."""
    extents: dict[str, tuple[float, float]] = {}
    for one in series:
        steps = one.step[np.isfinite(one.step)]
        if len(steps):
            lo, hi = extents.get(one.x_key, (math.inf, -math.inf))
            extents[one.x_key] = (min(lo, float(steps.min())), max(hi, float(steps.max())))
    return extents


KeyedWindows = tuple[tuple[str, float, float], ...]
"""(step key, first, last) per zoomed step key; empty: every step of every key."""


def zoom_keyed(
    windows: KeyedWindows, extents: dict[str, StepWindow], direction: int, cursor: float | None
) -> KeyedWindows:
    """:func:`zoom_steps` of each step key on its own (a train step is not a rollout step), around ``cursor``
    where it falls among that key's steps, else keeping the key's newest step."""
    known = {key: (lo, hi) for key, lo, hi in windows}
    out = []
    for key, extent in extents.items():
        center = cursor if cursor is not None and extent[0] <= cursor <= extent[1] else None
        window = zoom_steps(known.get(key), extent, direction, center)
        if window is not None:
            out.append((key, *window))
    return tuple(out)


def keyed_holding(windows: KeyedWindows, extents: dict[str, StepWindow], step: float) -> KeyedWindows:
    """Each key's window slid to show ``step`` where ``step`` is among that key's steps (others kept)."""
    out = []
    for key, lo, hi in windows:
        extent = extents.get(key)
        inside = extent is not None and extent[0] <= step <= extent[1]
        out.append((key, *(window_holding((lo, hi), step) or (lo, hi))) if inside else (key, lo, hi))
    return tuple(out)
