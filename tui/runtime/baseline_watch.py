"""The app's baseline runs: each followed read-only beside the run, polled after every telemetry poll.

Contract: :class:`BaselineWatch` holds the baselines in the order added, each
with its mark (``a``, ``b``, ...: what its legend entries, Δ lines and the
palette call it) and its own asyncio lock. Every blocking call (opening the
folder, a poll, a step summary) runs in a daemon thread under that lock, the
pattern of :class:`~miles_tui.tui.runtime.run_watcher.RunWatcher`: a cancelled reader
keeps the lock until its thread is done, so two reads of one baseline never
overlap, and a read stuck in I/O never holds up quitting. A poll that finds a
baseline busy skips it (the next tick catches up).

:class:`BaselineApp` is the app's side (a mixin of
:class:`~miles_tui.tui.app.MilesApp`): ``--baseline`` folders are opened at
start, the palette adds more, and a folder that cannot be one is said in one
error toast naming it (the monitor goes on with the run). After each poll that
changed something it posts :class:`BaselinesChanged`, which the app forwards
to every screen.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from textual import work
from textual.app import App
from textual.message import Message

from miles_tui.core.analysis.baseline import StepDelta
from miles_tui.core.analysis.baseline_run import BaselinePoll, BaselineRun, open_baseline
from miles_tui.core.base.errors import MilesTuiError
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import StepAggregate, StepSummary
from miles_tui.tui.runtime.daemon_threads import DaemonThreadExecutor
from miles_tui.tui.runtime.stream_watch import METRIC_WORKER_NICE

T = TypeVar("T")

MARKS = "abcdefgh"
"""Each baseline's mark, in the order added."""

NO_BASELINE = 'no baseline run: start with --baseline OTHER, or ctrl+p "Add baseline run…"'
"""What a key that needs a baseline says when there is none."""

MAX_BASELINES = len(MARKS)
"""Baselines one monitor follows at most."""


@dataclass(eq=False)
class Baseline:
    """One baseline run as the app follows it."""

    mark: str
    """Its letter (``a`` for the first)."""
    run: BaselineRun
    """The run, followed (only read under :attr:`lock`, in a thread)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def path(self) -> Path:
        return self.run.path

    def delta_at(self, step: int, run: StepAggregate | None) -> StepDelta:
        """The run's train step against this baseline's (read on the event loop: plain dicts it replaces whole)."""
        return self.run.delta_at(step, run)


@dataclass
class BaselinesChanged(Message, bubble=False):
    """A baseline was added, or a poll brought it new step figures or metric points."""

    mark: str
    """Which baseline."""
    steps: tuple[int, ...] = ()
    """Train steps whose figures arrived or changed."""
    metric_keys: tuple[str, ...] = ()
    """Metric names with new points."""
    added: bool = False
    """It was just added (every view that shows baselines redraws)."""


_READS = DaemonThreadExecutor()


async def _serialized(lock: asyncio.Lock, function: Callable[..., T], *args: Any) -> T:
    """Run a blocking call in a daemon thread holding ``lock`` until the thread is done (even when cancelled)."""
    await lock.acquire()
    try:
        task = asyncio.ensure_future(asyncio.get_running_loop().run_in_executor(_READS, function, *args))
    except BaseException:
        lock.release()
        raise
    task.add_done_callback(lambda done: _release(lock, done))
    return await asyncio.shield(task)


def _release(lock: asyncio.Lock, done: asyncio.Future[Any]) -> None:
    lock.release()
    if not done.cancelled():
        done.exception()


class BaselineWatch:
    """The baselines, in the order added."""

    def __init__(self, use_cache: bool = True) -> None:
        self.use_cache = use_cache
        self.baselines: list[Baseline] = []
        self._adding = asyncio.Lock()
        """Baselines are opened one at a time, in the order asked (FIFO): marks follow the command line."""

    def __iter__(self) -> Any:
        return iter(tuple(self.baselines))

    def __len__(self) -> int:
        return len(self.baselines)

    def by_mark(self, mark: str) -> Baseline | None:
        return next((b for b in self.baselines if b.mark == mark), None)

    async def add(self, path: Path | str) -> Baseline:
        """Open ``path`` as the next baseline (in a thread, after any opening before it); raises
        :class:`MilesTuiError` naming it."""
        async with self._adding:
            if len(self.baselines) >= MAX_BASELINES:
                raise MilesTuiError(f"at most {MAX_BASELINES} baselines at once", Path(path))
            resolved = Path(path).expanduser().absolute()
            if any(b.path == resolved for b in self.baselines):
                raise MilesTuiError("already a baseline", resolved)
            run = await _serialized(asyncio.Lock(), self._open, resolved)
            baseline = Baseline(MARKS[len(self.baselines)], run)
            self.baselines.append(baseline)
            return baseline

    def _open(self, path: Path) -> BaselineRun:
        return open_baseline(path, use_cache=self.use_cache, parse_workers=os.cpu_count() or 1, nice=METRIC_WORKER_NICE)

    async def poll(self, baseline: Baseline, now: float) -> BaselinePoll | None:
        """One poll of ``baseline`` (None: a read of it is running; the next tick catches up)."""
        if baseline.lock.locked():
            return None
        return await _serialized(baseline.lock, baseline.run.poll, now)

    async def summary(self, baseline: Baseline, rollout_id: int, evaluation: bool) -> StepSummary:
        """One of its steps' summary (raises what the reader raises: a step it lacks is StepNotFoundError)."""
        return await asyncio.shield(
            _serialized(baseline.lock, baseline.run.summary, rollout_id, evaluation, time.time())
        )


class BaselineApp(App[None]):
    """The app's baselines: opened from ``--baseline`` and the palette, polled after each telemetry poll."""

    baselines: BaselineWatch
    """Set by the app's constructor."""
    baseline_paths: Sequence[str] = ()
    """``--baseline`` folders, opened once the app runs."""

    def open_baselines(self) -> None:
        """Open the ``--baseline`` folders (each in turn; a bad one is said and skipped)."""
        for path in self.baseline_paths:
            self.add_baseline(path)

    @work(group="baselines", exit_on_error=False)
    async def add_baseline(self, path: str) -> None:
        """Follow ``path`` as a baseline; an error toast naming it when it cannot be one."""
        try:
            await self.follow_baseline(path)
        except MilesTuiError as err:
            self.notify(inert(f"baseline not added: {err}"), severity="error", timeout=12, markup=False)

    async def follow_baseline(self, path: str) -> Baseline:
        """Open ``path`` as the next baseline and start following it; raises :class:`MilesTuiError` naming it."""
        baseline = await self.baselines.add(path)
        self.notify(inert(f"baseline {baseline.mark}: {baseline.name} ({baseline.path})"), timeout=4, markup=False)
        self.post_message(BaselinesChanged(baseline.mark, added=True))
        self._poll_one(baseline)
        return baseline

    def poll_baselines(self) -> None:
        """Poll every baseline (the app calls it after each telemetry poll)."""
        for baseline in self.baselines:
            self._poll_one(baseline)

    @work(group="baselines", exit_on_error=False)
    async def _poll_one(self, baseline: Baseline) -> None:
        await self._poll_baseline(baseline)

    async def _poll_baseline(self, baseline: Baseline) -> None:
        try:
            result = await self.baselines.poll(baseline, time.time())
        except Exception as err:  # a baseline's trouble never stops the monitor
            said = inert(f"baseline {baseline.mark} poll failed: {err}")
            self.notify(said, severity="warning", timeout=6, markup=False)
            return
        if result is None:
            return
        if result.changed:
            self.post_message(BaselinesChanged(baseline.mark, result.steps, result.metric_keys))
        if result.pending:  # a long baseline fills in over several polls, not one
            self.set_timer(0.05, lambda: self._poll_one(baseline))
