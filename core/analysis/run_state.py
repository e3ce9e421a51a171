"""Whether a run is live, quiet, ended or not a dump at all: judged on one clock, the data's own.

Contract:

- The run's clock is the newest timestamp its records carry (``dashboard/``
  streams: a metric's ``ts``, a phase's ``t0``/``t1``, a GPU sample's ``ts``)
  where it has any; only a run with no timestamped records falls back to the
  newest file modification time. A copied run (``cp -r`` gives every file a
  fresh mtime) is therefore as old as its data, not as its copy.
- Quiet is judged on the run's own cadence: :data:`QUIET_INTERVALS` usual step
  intervals (the median of the recent ones), never less than
  :data:`QUIET_FLOOR_S`; with too few steps to know the cadence,
  :data:`QUIET_DEFAULT_S`.
- A run has *ended* when it reached its last step (``num_rollout`` in
  meta.json's arguments; steps count from 0) with every phase of its current
  attempt closed. A run whose arguments do not say how many steps it has can
  be quiet, never ended.
- A folder that is not a ``--dump-details`` folder is never live.

Everything here is pure: ``now`` is an argument, nothing is read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

import numpy as np

from miles_tui.core.analysis.advisories import Advisory, Level
from miles_tui.core.analysis.phase_markers import open_phase_count
from miles_tui.core.telemetry import MetricStore, TableArrays
from miles_tui.core.telemetry.hours.phase_digest import PhaseDigest

QUIET_INTERVALS: Final = 3.0
"""A run is quiet once nothing new came for this many usual step intervals ..."""
QUIET_FLOOR_S: Final = 30.0
"""... and never sooner than this (a step every second is not quiet after three seconds) ..."""
QUIET_DEFAULT_S: Final = 600.0
"""... or, before the run has the :data:`QUIET_MIN_INTERVALS` intervals that make a cadence, after this."""
QUIET_MIN_INTERVALS: Final = 3
QUIET_RECENT: Final = 20
"""Intervals the cadence is taken over (the recent ones: a run may change its pace)."""
STEP_KEYS: Final = ("train/step", "rollout/step")
"""Step keys whose records mark a step (their times give the cadence; their values the step reached)."""


class RunState(Enum):
    """What the header, the views and ``report`` say the run is doing."""

    LIVE = "live"
    """New data keeps coming at the run's cadence."""
    QUIET = "quiet"
    """Nothing new for longer than a few step intervals, and the run has not said it ended."""
    ENDED = "ended"
    """The run reached its last step (``num_rollout``) with every phase closed."""
    WAITING = "waiting"
    """A dump folder with no data yet."""
    NOT_A_DUMP = "not a dump"
    """The folder has none of the directories a miles dump writes."""


@dataclass(frozen=True)
class RunClock:
    """The run's state and the one clock it is judged on."""

    state: RunState
    """Live, quiet, ended, waiting or not a dump."""
    last_data: float | None
    """The newest data time (epoch seconds) on the run's clock; None before any."""
    from_records: bool
    """True: ``last_data`` is a record's own timestamp; False: a file's modification time."""
    quiet_after: float
    """Seconds without new data after which the run is quiet (its cadence)."""
    final_step: int | None
    """The run's last step (``num_rollout`` − 1) when its arguments say it, else None."""

    def age(self, now: float) -> float | None:
        """Seconds from the newest data to ``now`` (None before any; negative under clock skew)."""
        return None if self.last_data is None else now - self.last_data


def quiet_after(step_times: Sequence[float] | np.ndarray[Any, Any]) -> float:
    """Seconds of silence that make a run quiet, from the times its steps came (any order, non-finite ignored)."""
    times = np.asarray(step_times, dtype=np.float64)
    times = np.sort(times[np.isfinite(times)])
    intervals = np.diff(times)[-QUIET_RECENT:]
    intervals = intervals[intervals > 0]
    if len(intervals) < QUIET_MIN_INTERVALS:
        return QUIET_DEFAULT_S
    return max(QUIET_INTERVALS * float(np.median(intervals)), QUIET_FLOOR_S)


def final_step(args: Mapping[str, Any] | None) -> int | None:
    """The last step the run will make, from ``num_rollout`` (miles runs steps 0 .. num_rollout − 1)."""
    value = (args or {}).get("num_rollout")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value - 1


def ended(final: int | None, last_step: int | None, open_phases: int) -> bool:
    """The run reached its last step and closed every phase."""
    return final is not None and last_step is not None and last_step >= final and open_phases == 0


def run_clock(
    *,
    is_dump: bool,
    record_time: float | None,
    file_time: float | None,
    quiet_seconds: float,
    args: Mapping[str, Any] | None,
    has_ended: bool,
    now: float,
) -> RunClock:
    """Judge the run (see the module docstring): ``record_time`` the newest record timestamp of its streams,
    ``file_time`` the newest file modification time, ``quiet_seconds`` from :func:`quiet_after`,
    ``has_ended`` what :func:`ended` said of its steps and phases."""
    from_records = record_time is not None and math.isfinite(record_time)
    last_data = record_time if from_records else file_time
    final = final_step(args)
    if not is_dump:
        state = RunState.NOT_A_DUMP
    elif has_ended:
        state = RunState.ENDED
    elif last_data is None:
        state = RunState.WAITING
    elif now - last_data > quiet_seconds:
        state = RunState.QUIET
    else:
        state = RunState.LIVE
    return RunClock(state, last_data, from_records, quiet_seconds, final)


def last_logged_step(store: MetricStore) -> int | None:
    """The newest step counter the run logged (``train/step`` or ``rollout/step``), None without one."""
    steps = [
        float(np.nanmax(series.value))
        for key in STEP_KEYS
        if (series := store.series(key, key)) is not None and len(series.value) and np.isfinite(series.value).any()
    ]
    return int(max(steps)) if steps else None


def run_has_ended(
    args: Mapping[str, Any] | None,
    metrics: MetricStore,
    phases: TableArrays | Sequence[PhaseDigest],
    attempt_start: float | None,
) -> bool:
    """The run logged its last step (``num_rollout`` − 1) and every phase of its attempt is closed.

    The phases are counted only once the last step is logged (a long run's phases are many)."""
    final = final_step(args)
    last = last_logged_step(metrics) if final is not None else None
    if final is None or last is None or last < final:
        return False
    return ended(final, last, open_phase_count(phases, attempt_start))


def run_ended(args: Mapping[str, Any] | None) -> list[Advisory]:
    """The information that replaces ``no_new_data`` once the run has ended."""
    final = final_step(args)
    total = None if final is None else final + 1
    message = f"the run ended: it logged its last step ({final}, num_rollout {total}) and closed every phase"
    return [Advisory(Level.INFO, "run_ended", message + "; no new data is expected")]
