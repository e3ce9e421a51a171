"""Messages the watcher posts to the app (and the app forwards to its screens).

None of them bubble: the app forwards each to the screens, and a forwarded
message bubbling back up to the app would be handled twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from miles_tui.core.dump import StepKey, StepSummary


@dataclass
class StepsChanged(Message, bubble=False):
    """The visible steps changed (new ones appeared)."""

    train: tuple[int, ...]
    evaluation: tuple[int, ...]
    new_train: tuple[int, ...]
    new_evaluation: tuple[int, ...]
    looks_like_a_run: bool = True


@dataclass(frozen=True)
class StepFailure:
    """A step that could not be read."""

    rollout_id: int
    evaluation: bool
    message: str
    """One line that names the file."""
    still_writing: bool
    """Young: read again shortly (else: read again only when its files change)."""

    @property
    def key(self) -> StepKey:
        return StepKey(self.rollout_id, self.evaluation)


@dataclass
class StepsSummarized(Message, bubble=False):
    """One poll's new or changed step summaries and failures: applied as one update, not one per step."""

    summaries: tuple[StepSummary, ...]
    failures: tuple[StepFailure, ...] = ()

    def summary_of(self, key: StepKey) -> StepSummary | None:
        """This batch's summary of a step, if it has one."""
        return next((s for s in self.summaries if (s.rollout_id, s.evaluation) == key), None)

    def failure_of(self, key: StepKey) -> StepFailure | None:
        """This batch's failure of a step, if it has one."""
        return next((f for f in self.failures if f.key == key), None)

    @property
    def keys(self) -> set[StepKey]:
        """Every step this batch is about."""
        return {StepKey(s.rollout_id, s.evaluation) for s in self.summaries} | {f.key for f in self.failures}


@dataclass
class FollowToggled(Message, bubble=False):
    """The user turned follow-latest on or off."""

    following: bool


@dataclass
class TelemetryAppended(Message, bubble=False):
    """New metric points or telemetry records arrived (read them from the watcher's follower)."""

    metric_keys: tuple[str, ...]
    streams: tuple[str, ...]
