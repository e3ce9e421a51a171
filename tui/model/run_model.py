"""What the app knows about the run right now: filled by messages, read by screens.

Plain state owned by the event loop (only the app writes it); it holds core
values as they arrived (the run's health, :class:`~miles_tui.core.analysis.health.RunHealth`,
held whole) and computes nothing. The app
publishes it on its ``run_changed`` signal after every poll and follow toggle;
headers and screens subscribe instead of each refreshing on messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from miles_tui.core.analysis import Advisory, RunClock, RunHealth, RunState
from miles_tui.core.analysis.advisory_log import AdvisoryLog
from miles_tui.core.analysis.starvation import Starvation
from miles_tui.core.dump import StepKey, StepSummary


@dataclass
class RunModel:
    """The run as last reported by the watcher."""

    first_name: str = ""
    """The run's name before the first poll (meta.json as the app starts, else the folder name)."""
    health: RunHealth | None = None
    """Core's ``run_health`` as of the last poll (name, data age, clock, advisories); None before any."""
    train: tuple[int, ...] = ()
    """Visible train steps, ascending."""
    evaluation: tuple[int, ...] = ()
    """Visible eval steps, ascending."""
    summaries: dict[StepKey, StepSummary] = field(default_factory=dict)
    """Step summaries by (rollout id, evaluation)."""
    failures: dict[StepKey, tuple[str, bool]] = field(default_factory=dict)
    """Steps that could not be read: message, still writing."""
    step_advisories: dict[int, tuple[Advisory, ...]] = field(default_factory=dict)
    """The dump rules' advisories of every summarized train step (the log's history)."""
    live_log: AdvisoryLog = field(default_factory=AdvisoryLog)
    """What every poll found holding, folded (core's ``AdvisoryLog.observe``)."""
    advisory_log: AdvisoryLog = field(default_factory=AdvisoryLog)
    """Every advisory seen: the steps' history merged with the live polls (the sidebar and the log)."""
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
    def run_name(self) -> str:
        """From dashboard/meta.json, else the folder name."""
        return self.first_name if self.health is None else self.health.run_name

    @property
    def advisories(self) -> tuple[Advisory, ...]:
        """Current advisories, alarms first."""
        return () if self.health is None else self.health.advisories

    @property
    def data_age(self) -> float | None:
        """Seconds since the newest data on the run's clock."""
        return None if self.health is None else self.health.data_age

    @property
    def clock(self) -> RunClock | None:
        """The run's state (live, quiet, ended, not a dump) and its clock; None before the first poll."""
        return None if self.health is None else self.health.clock

    @property
    def state(self) -> RunState | None:
        """Live, quiet, ended, waiting or not a dump (None before the first poll)."""
        return None if self.clock is None else self.clock.state

    @property
    def latest(self) -> int | None:
        return self.train[-1] if self.train else None

    def steps(self) -> list[StepKey]:
        """Every visible step, newest first (an eval step right after its train step)."""
        keys = [StepKey(rid, False) for rid in self.train] + [StepKey(rid, True) for rid in self.evaluation]
        return sorted(keys, key=lambda k: (k[0], not k[1]), reverse=True)
