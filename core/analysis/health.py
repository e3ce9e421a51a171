"""A run's health in one look: the one place that says what ``report`` and the monitor's header show.

Contract: :func:`dump_advisories` applies the rules of the dump side (the
newest train step's rules with the run's arguments, and the steps that cannot
be read, many of them as one advisory); :func:`run_health` joins them with the
telemetry advisories, the visible steps, the run name (meta.json's
``run_name``, else the folder name), and the run's clock and state
(:mod:`.run_state`: the newest record timestamp where the streams have one,
else the newest write seen in step files and streams; live, quiet, ended or
not a dump). The data age is ``now`` minus that clock. Both are pure:
``report`` calls them once, the monitor on every poll of either side, so the
two cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from miles_tui.core.analysis.advisories import (
    Advisory,
    Level,
    UnreadableStep,
    ordered,
    step_advisories,
    step_errors,
    worst_level,
)
from miles_tui.core.analysis.format_drift import schema_label
from miles_tui.core.analysis.run_state import QUIET_DEFAULT_S, RunClock, RunState, run_clock
from miles_tui.core.dump import StepSummary
from miles_tui.core.telemetry import RunMeta


@dataclass(frozen=True)
class RunHealth:
    """Which step the run is on, how fresh its data is and what needs attention."""

    run_name: str
    """meta.json's ``run_name``, else the run folder's name."""
    train: tuple[int, ...]
    """Visible train steps, ascending."""
    evaluation: tuple[int, ...]
    """Visible eval steps, ascending."""
    data_age: float | None
    """Seconds since the newest data on the run's clock (None before any; negative under clock skew)."""
    advisories: tuple[Advisory, ...]
    """Alarms first (critical, warning, info), stable within a level."""
    clock: RunClock
    """The run's state (live, quiet, ended, not a dump) and the clock it is judged on."""

    @property
    def state(self) -> RunState:
        """Live, quiet, ended, waiting or not a dump."""
        return self.clock.state

    @property
    def latest(self) -> int | None:
        """The newest visible train step."""
        return self.train[-1] if self.train else None

    @property
    def worst(self) -> Level | None:
        """The worst advisory level (None: no advisory)."""
        return worst_level(self.advisories)


def run_name(meta: RunMeta | None, run_dir: Path) -> str:
    """The name a run goes by: meta.json's ``run_name`` when it has one, else the folder's name."""
    name = meta.run_name if meta is not None else None
    return str(name) if name else run_dir.name


def dump_advisories(
    latest: StepSummary | None, meta: RunMeta | None, unreadable: Iterable[UnreadableStep] = ()
) -> tuple[Advisory, ...]:
    """The dump side's advisories: the newest train step's rules and the steps that cannot be read."""
    advisories: list[Advisory] = []
    if latest is not None:
        advisories += step_advisories(latest, meta.args if meta is not None else None, schema_label(meta))
    advisories += step_errors(unreadable)
    return tuple(ordered(advisories))


def run_health(
    run_dir: Path,
    meta: RunMeta | None,
    train: Iterable[int],
    evaluation: Iterable[int],
    *,
    dump: Iterable[Advisory],
    streams: Iterable[Advisory],
    newest_writes: Iterable[float | None],
    now: float,
    record_time: float | None = None,
    quiet_seconds: float = QUIET_DEFAULT_S,
    is_dump: bool = True,
) -> RunHealth:
    """Join both sides: ``dump`` from :func:`dump_advisories`, ``streams`` the telemetry rules' advisories,
    ``newest_writes`` the newest modification time each side saw (None: nothing yet), ``record_time`` the
    newest timestamp a stream record carries (the run's clock wherever there is one), ``quiet_seconds`` the
    run's cadence (:func:`.run_state.quiet_after`), ``is_dump``: the folder looks like a dump."""
    writes = [w for w in newest_writes if w is not None]
    streams = tuple(streams)
    clock = run_clock(
        is_dump=is_dump,
        record_time=record_time,
        file_time=max(writes) if writes else None,
        quiet_seconds=quiet_seconds,
        args=meta.args if meta is not None else None,
        has_ended=any(a.code == "run_ended" for a in streams),
        now=now,
    )
    return RunHealth(
        run_name=run_name(meta, run_dir),
        train=tuple(sorted(train)),
        evaluation=tuple(sorted(evaluation)),
        data_age=clock.age(now),
        advisories=tuple(ordered([*dump, *streams])),
        clock=clock,
    )
