"""The ``--since`` / ``--until`` of a telemetry export: a time, or a span back from the newest record.

Contract:

- :func:`parse_time` reads one bound: Unix seconds (``1787240020``,
  ``1787240020.5``), an ISO 8601 date or date-time (``2026-08-20``,
  ``2026-08-20T15:30``, ``2026-08-20 15:30:05Z``, ``...+02:00``; without an
  offset it is UTC, as every time the run writes), or a span back from the
  newest record (``90s``, ``30m``, ``2h``, ``1d``, ``1.5h``). Anything else is
  a ``ValueError`` whose message says what is accepted.
- :meth:`TimeBound.at` turns a bound into seconds: a span needs the newest
  record's time (None when the stream has none: the bound is open).
- Pure; reads nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Final

SPAN_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
"""Seconds per unit of a span (``30m``)."""

_SPAN = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_SECONDS = re.compile(r"\d+(?:\.\d+)?")
ACCEPTED: Final = (
    "Unix seconds, an ISO date or date-time (UTC unless it says), or a span back from the newest record: 30m, 2h, 1d"
)


@dataclass(frozen=True)
class TimeBound:
    """One bound of a window: an absolute time, or seconds back from the newest record."""

    seconds: float | None = None
    """Unix seconds (None: a span)."""
    back: float | None = None
    """Seconds back from the newest record (None: absolute)."""

    def at(self, newest: float | None) -> float | None:
        """The bound in Unix seconds; a span with no newest record is open (None)."""
        if self.back is None:
            return self.seconds
        return None if newest is None else newest - self.back


def parse_time(text: str) -> TimeBound:
    """One ``--since``/``--until`` value (see the module docstring)."""
    value = text.strip()
    if _SECONDS.fullmatch(value):
        return TimeBound(seconds=float(value))
    span = _SPAN.fullmatch(value.lower())
    if span:
        return TimeBound(back=float(span.group(1)) * SPAN_UNITS[span.group(2)])
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text[:40]!r} is not a time: give {ACCEPTED}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    seconds = moment.timestamp()
    if not math.isfinite(seconds):
        raise ValueError(f"{text[:40]!r} is not a time: give {ACCEPTED}")
    return TimeBound(seconds=seconds)


def utc_text(ts: float) -> str:
    """An epoch time as the headless commands print it: ``2026-08-20 11:40:10 UTC``."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
