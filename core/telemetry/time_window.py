"""Which stretch of a run a time view shows: a live window that follows new data, or one panned into the past.

Contract:

- A :class:`TimeWindow` is what the user chose: a length (``span``; None: the
  whole run) and either no end (*live*: the window ends at ``now`` and follows
  new data) or a fixed end time (*panned*).
- :func:`frame` resolves a window against the clock and the run's time range
  (``first``: the earliest time the run may hold data, ``newest``: its newest
  sample) into the :class:`Frame` to draw: ``since``/``until`` and whether it is
  live. A live window ends as :func:`~miles_tui.core.telemetry.time_bins.window_bounds`
  says (at ``now`` while the data is recent, at the newest sample once the run
  stopped). A panned window is clamped to the run: it never ends later than the
  live window of the same length would, nor starts before ``first``.
- :func:`zoom`, :func:`pan`, :func:`go_live` and :func:`go_start` turn a window
  and the frame it was drawn in into the next window. Zooming keeps a live window
  live (the right edge stays at ``now``) and zooms a panned one around its
  centre; a window as long as the run is the whole run; panning up to the live
  end becomes live again. No window is shorter than :data:`MIN_SPAN`.
- Pure; takes ``now``; never reads files, never formats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from miles_tui.core.telemetry.time_bins import WINDOWS, window_bounds

MIN_SPAN: Final = 60.0
"""The shortest window zooming in reaches, in seconds."""

ZOOM_FACTOR: Final = 2.0
"""One zoom step halves (in) or doubles (out) the window."""

PAN_FRACTION: Final = 0.5
"""One pan step moves the window by this much of its length."""


@dataclass(frozen=True)
class TimeWindow:
    """A window as the user chose it."""

    span: float | None = WINDOWS[0]
    """Length in seconds (None: the whole run)."""
    end: float | None = None
    """End time of a panned window; None: live (ends now, follows new data)."""

    @property
    def live(self) -> bool:
        """Whether it follows new data."""
        return self.end is None


def preset(index: int) -> TimeWindow:
    """The live window of :data:`~miles_tui.core.telemetry.time_bins.WINDOWS` ``[index]`` (clamped to the list)."""
    return TimeWindow(WINDOWS[max(0, min(len(WINDOWS) - 1, index))], None)


@dataclass(frozen=True)
class Frame:
    """A window resolved against the clock and the run: the times to draw."""

    window: TimeWindow
    """The window it resolves (normalised: a panned window at the live end is live)."""
    since: float
    """Start."""
    until: float
    """End."""
    anchored_to_data: bool
    """Live, but the data stopped: the window ends at the newest sample rather than at ``now``."""
    first: float | None
    """Earliest time the run may hold data (None: no data)."""
    newest: float | None
    """The run's newest sample (None: no data)."""
    last: float
    """Where a live window of this length ends: the latest end any window may have."""
    now: float
    """The clock it was resolved at."""

    @property
    def live(self) -> bool:
        """Whether it follows new data."""
        return self.window.live

    @property
    def length(self) -> float:
        """``until - since``."""
        return self.until - self.since


def frame(window: TimeWindow, now: float, first: float | None, newest: float | None) -> Frame:
    """The window's frame at ``now`` over a run holding data from ``first`` to ``newest``."""
    since, until, anchored = window_bounds(window.span, now, first, newest)
    live = Frame(TimeWindow(window.span, None), since, until, anchored, first, newest, until, now)
    if window.live or window.span is None or first is None or window.end is None:
        return live
    span = window.span
    if span >= until - first:
        return live  # the run is shorter than the window: there is nowhere to pan
    end = max(min(window.end, until), first + span)
    if end >= until:
        return live
    return Frame(TimeWindow(span, end), end - span, end, False, first, newest, until, now)


def again(current: Frame, window: TimeWindow) -> Frame:
    """``window`` resolved over the same clock and run as ``current`` (a key pressed before the next view)."""
    return frame(window, current.now, current.first, current.newest)


def _fits(span: float, current: Frame) -> TimeWindow | None:
    """The whole run when ``span`` covers all of it, else None."""
    if current.first is not None and span >= current.last - current.first:
        return TimeWindow(None, None)
    return None


def zoom(current: Frame, factor: float) -> TimeWindow:
    """The window ``factor`` times as long (< 1: in, > 1: out); live stays live, panned zooms around its centre."""
    span = max(MIN_SPAN, current.length * factor)
    whole = _fits(span, current) if factor > 1 else None
    if whole is not None:
        return whole
    if current.live:
        return TimeWindow(span, None)
    centre = (current.since + current.until) / 2
    return _clamped(span, centre + span / 2, current)


def pan(current: Frame, fraction: float) -> TimeWindow:
    """The window moved by ``fraction`` of its length (negative: earlier); the whole run does not move."""
    window = current.window
    if window.span is None:
        return window
    return _clamped(window.span, current.until + fraction * current.length, current)


def go_live(current: Frame) -> TimeWindow:
    """The live window of the same length."""
    return TimeWindow(current.window.span, None)


def go_start(current: Frame) -> TimeWindow:
    """The window of the same length that starts where the run does."""
    window = current.window
    if window.span is None or current.first is None:
        return window
    return _clamped(window.span, current.first + window.span, current)


def _clamped(span: float, end: float, current: Frame) -> TimeWindow:
    """A window of ``span`` ending at ``end``, inside the run; live once it reaches the live end."""
    if end >= current.last:
        return TimeWindow(span, None)
    if current.first is not None:
        end = max(end, current.first + span)
    return TimeWindow(span, end) if end < current.last else TimeWindow(span, None)
