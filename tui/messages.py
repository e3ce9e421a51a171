"""Messages the watcher posts to the app (and the app forwards to its screens).

None of them bubble: the app forwards each to the screens, and a forwarded
message bubbling back up to the app would be handled twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from miles_tui.core.analysis.advisories import Advisory
from miles_tui.core.dump.step import StepSummary


@dataclass
class StepsChanged(Message, bubble=False):
    """The visible steps changed (new ones appeared)."""

    train: tuple[int, ...]
    evaluation: tuple[int, ...]
    new_train: tuple[int, ...]
    new_evaluation: tuple[int, ...]
    looks_like_a_run: bool = True


@dataclass
class StepSummarized(Message, bubble=False):
    """A step's summary is ready (first time, or because its files changed)."""

    summary: StepSummary


@dataclass
class StepFailed(Message, bubble=False):
    """A step could not be read (still writing, or corrupt)."""

    rollout_id: int
    evaluation: bool
    message: str
    still_writing: bool


@dataclass
class AdvisoriesChanged(Message, bubble=False):
    """The advisory list was recomputed."""

    advisories: tuple[Advisory, ...]

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, AdvisoriesChanged)


@dataclass
class RunStatusChanged(Message, bubble=False):
    """Data age / latest step / run name changed."""

    run_name: str
    latest: int | None
    data_age: float | None
    quiet_after: float

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RunStatusChanged)


@dataclass
class FollowToggled(Message, bubble=False):
    """The user turned follow-latest on or off."""

    following: bool


@dataclass
class TelemetryAppended(Message, bubble=False):
    """New metric points or telemetry records arrived (read them from the watcher's follower)."""

    metric_keys: tuple[str, ...]
    streams: tuple[str, ...]
