"""Another run directory followed read-only as a baseline: its steps' figures and its metric store.

Contract:

- :func:`open_baseline` opens a folder with the machinery the run itself uses
  (a :class:`~miles_tui.core.follow.StepFollower` for its step files, a
  :class:`~miles_tui.core.follow.RunFollower` for ``dashboard/metrics.jsonl``
  only, each with its own cache entries, keyed by the baseline's own paths).
  A folder that cannot be one raises :class:`RunDirError` naming it: missing,
  not a directory, unreadable, or not a ``--dump-details`` folder.
  Nothing is ever written into it.
- :meth:`BaselineRun.poll` follows it like the run: new and changed train
  steps are summarized newest first within a time budget (the rest at the next
  poll), so a long baseline fills in over several polls. A step that fails to
  read is kept with its message (retried when its files change).
- Not thread-safe: one caller at a time (the app holds a lock per baseline).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from miles_tui.core.analysis.baseline import StepDelta, step_delta
from miles_tui.core.analysis.health import run_name
from miles_tui.core.base.errors import RunDirError
from miles_tui.core.dump import Run, StepAggregate, StepSummary
from miles_tui.core.follow import RunFollower, StepFollower
from miles_tui.core.telemetry import MetricStore

POLL_BUDGET_SECONDS = 0.5
"""How long one poll may spend summarizing the baseline's steps."""


@dataclass(frozen=True)
class BaselinePoll:
    """What one poll of a baseline changed."""

    steps: tuple[int, ...]
    """Train steps whose figures arrived or changed (summarized, or failed)."""
    metric_keys: tuple[str, ...]
    """Metric names with new points."""
    pending: int
    """Train steps still to summarize (poll again)."""

    @property
    def changed(self) -> bool:
        return bool(self.steps or self.metric_keys)


class BaselineRun:
    """One baseline run directory, followed."""

    def __init__(self, path: Path | str, *, use_cache: bool = True, parse_workers: int = 0, nice: int = 0) -> None:
        try:
            self.run = Run(path, use_cache=use_cache)
            self.run.dir.require_dump_folder()
        except RunDirError as err:
            raise RunDirError(f"not usable as a baseline: {err.message}", err.path) from err
        self.follower = RunFollower(self.run.dir, streams=(), parse_workers=parse_workers, worker_nice=nice)
        """Its metrics.jsonl (no other stream is read)."""
        self.steps = StepFollower(self.run, workers=0, budget=POLL_BUDGET_SECONDS, open_latest=False, ahead=False)
        """Its step files, summarized as the run's are (no helper processes)."""
        self._train: tuple[int, ...] = ()
        self.aggregates: dict[int, StepAggregate] = {}
        """Summarized train steps' figures, by rollout id."""
        self.failures: dict[int, str] = {}
        """Train steps that could not be read, with why."""

    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def name(self) -> str:
        """meta.json's run name, else the folder's name."""
        return run_name(self.follower.dashboard.meta, self.run.path)

    @property
    def metrics(self) -> MetricStore:
        """Its metrics.jsonl, columnar (thread-safe on its own)."""
        return self.follower.metrics

    def train_steps(self) -> tuple[int, ...]:
        """Its visible train steps as of the last poll, ascending."""
        return self._train

    def poll(self, now: float, budget: float = POLL_BUDGET_SECONDS) -> BaselinePoll:
        """Follow its files; summarize new and changed train steps for at most ``budget`` seconds, newest first."""
        delta = self.follower.poll(now)
        self.steps.budget = budget
        result = self.steps.poll(now)
        self._train = result.train
        done: set[int] = set()
        for summary in result.summaries:
            if not summary.evaluation:
                self.aggregates[summary.rollout_id] = summary.aggregate
                self.failures.pop(summary.rollout_id, None)
                done.add(summary.rollout_id)
        for rid, evaluation, message, _still in result.failures:
            if not evaluation:
                self.failures[rid] = message
                self.aggregates.pop(rid, None)
                done.add(rid)
        visible = set(self._train)
        for gone in [rid for rid in self.aggregates if rid not in visible]:
            del self.aggregates[gone]
        pending = sum(rid not in self.aggregates and rid not in self.failures for rid in self._train)
        return BaselinePoll(tuple(sorted(done)), delta.metric_keys, pending)

    def summary(self, rollout_id: int, evaluation: bool, now: float) -> StepSummary:
        """One step's summary (the run's reader: from its cache when the files did not change); raises what that
        reader raises (:class:`StepNotFoundError` for a step it does not have)."""
        return self.run.summary(rollout_id, evaluation, now)

    def delta_at(self, step: int, run: StepAggregate | None) -> StepDelta:
        """The run's train step ``step`` against this baseline's (see :func:`step_delta`)."""
        return step_delta(step, run, self.aggregates, self.failures, self.train_steps())


def open_baseline(path: Path | str, *, use_cache: bool = True, parse_workers: int = 0, nice: int = 0) -> BaselineRun:
    """A :class:`BaselineRun` on ``path``; :class:`RunDirError` naming the folder when it cannot be one."""
    return BaselineRun(path, use_cache=use_cache, parse_workers=parse_workers, nice=nice)
