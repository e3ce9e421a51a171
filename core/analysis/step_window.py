"""The metrics charts' step window: zoom in and out around a step, and keep a step in view.

Contract: a window is ``(first, last)`` steps, both shown, or None for the
whole run. :func:`zoom_steps` halves (``direction`` < 0) or doubles (> 0) the
window's span around ``center`` (the step cursor; without one the window keeps
its last step, the newest data in view), never narrower than
:data:`MIN_SPAN_STEPS` and never past the run's ``extent``; a window that
would cover the whole extent is None. :func:`window_holding` slides a window
just far enough to show a step. Pure.
"""

from __future__ import annotations

from typing import Final

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
