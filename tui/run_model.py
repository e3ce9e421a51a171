"""What the app knows about the run right now: filled by messages, read by screens.

Plain state owned by the event loop (only the app writes it); it holds core
values as they arrived (the run's health from
:func:`miles_tui.core.analysis.health.run_health`) and computes nothing. The app
publishes it on its ``run_changed`` signal after every poll and follow toggle;
headers and screens subscribe instead of each refreshing on messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from miles_tui.core.analysis import Advisory, RunClock, RunState
from miles_tui.core.analysis.advisory_log import AdvisoryLog
from miles_tui.core.analysis.starvation import Starvation
from miles_tui.core.dump import StepSummary


@dataclass
class RunModel:
    """The run as last reported by the watcher."""

    run_name: str = ""
    """From dashboard/meta.json, else the folder name."""
    train: tuple[int, ...] = ()
    """Visible train steps, ascending."""
    evaluation: tuple[int, ...] = ()
    """Visible eval steps, ascending."""
    summaries: dict[tuple[int, bool], StepSummary] = field(default_factory=dict)
    """Step summaries by (rollout id, evaluation)."""
    failures: dict[tuple[int, bool], tuple[str, bool]] = field(default_factory=dict)
    """Steps that could not be read: message, still writing."""
    advisories: tuple[Advisory, ...] = ()
    """Current advisories, alarms first."""
    step_advisories: dict[int, tuple[Advisory, ...]] = field(default_factory=dict)
    """The dump rules' advisories of every summarized train step (the log's history)."""
    live_log: AdvisoryLog = field(default_factory=AdvisoryLog)
    """What every poll found holding, folded (core's ``AdvisoryLog.observe``)."""
    advisory_log: AdvisoryLog = field(default_factory=AdvisoryLog)
    """Every advisory seen: the steps' history merged with the live polls (the sidebar and the log)."""
    data_age: float | None = None
    """Seconds since the newest data on the run's clock (core's ``run_health``)."""
    clock: RunClock | None = None
    """The run's state (live, quiet, ended, not a dump) and its clock; None before the first poll."""
    quiet_after: float = 600.0
    """Data older than this means the run has gone quiet."""
    backlog: int = 0
    """Steps still to summarize (shown while a long run back-fills)."""
    polled: bool = False
    """At least one poll has completed."""
    looks_like_a_run: bool = True
    """False when the folder has none of the directories a miles dump writes."""
    live: bool = True
    """Following the run as it writes (False: ``--no-follow``, the run is read once)."""
    following: bool = True
    """The views move to the newest step as it appears (``f`` pauses)."""
    starvation: Starvation | None = None
    """MFU, wait per step and data-buffer depth as the last telemetry poll found them (None before one)."""

    @property
    def state(self) -> RunState | None:
        """Live, quiet, ended, waiting or not a dump (None before the first poll)."""
        return None if self.clock is None else self.clock.state

    @property
    def latest(self) -> int | None:
        return self.train[-1] if self.train else None

    def steps(self) -> list[tuple[int, bool]]:
        """Every visible step, newest first (an eval step right after its train step)."""
        keys = [(rid, False) for rid in self.train] + [(rid, True) for rid in self.evaluation]
        return sorted(keys, key=lambda k: (k[0], not k[1]), reverse=True)
