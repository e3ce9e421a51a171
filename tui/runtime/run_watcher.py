"""The app's side of following a run: core's blocking reads, off the event loop, one at a time.

Every read of the run goes through :class:`RunWatcher` under one asyncio lock
and runs in a daemon thread (:class:`~miles_tui.tui.runtime.daemon_threads.DaemonThreadExecutor`),
so the UI never blocks on a slow filesystem, two refreshes never interleave on
the shared ``Run`` (its LRU and the summary cache are not thread-safe), and a
read stuck in I/O never holds up quitting. What a poll does is core's
(:class:`~miles_tui.core.follow.steps.StepFollower`: visibility, signatures,
the summary queue, failures, helper processes, the same as ``report`` reads
steps with); the watcher adds the locks, the threads and the app's
garbage-collector policy around each read (:mod:`miles_tui.tui.runtime.gc_policy`).
The blocking half, :meth:`RunWatcher.poll_blocking`, is plain code that tests
can call directly.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from miles_tui.core.analysis import Advisory, UnreadableStep, dump_advisories, quiet_after
from miles_tui.core.dump import (
    OpenStep,
    Run,
    SampleContext,
    StepKey,
    StepSummary,
)
from miles_tui.core.follow import PollResult, RunFollower, StepFollower
from miles_tui.core.follow.backfill import Backfill
from miles_tui.core.follow.steps import POOL_MIN_STEPS
from miles_tui.core.telemetry import RunMeta
from miles_tui.tui.runtime import gc_policy
from miles_tui.tui.runtime.daemon_threads import DaemonThreadExecutor
from miles_tui.tui.runtime.stream_watch import StreamPoll, StreamWatch

T = TypeVar("T")


@dataclass
class StepsPoll(PollResult):
    """A step poll (core's :class:`~miles_tui.core.follow.steps.PollResult`) with what the app's rules make of it."""

    advisories: tuple[Advisory, ...] = ()
    """The dump side's advisories (:func:`~miles_tui.core.analysis.health.dump_advisories`, as ``report``'s)."""
    quiet_after: float = 600.0
    """Data older than this means the run has gone quiet (core's ``quiet_after`` over the step cadence)."""


class RunWatcher:
    """Serialized, threaded access to one run for the app."""

    def __init__(
        self,
        run: Run,
        clock: Callable[[], float] = time.time,
        *,
        workers: int | None = None,
        pool_min_steps: int = POOL_MIN_STEPS,
    ) -> None:
        self.run = run
        self.clock = clock
        self.lock = asyncio.Lock()
        self.steps = StepFollower(run, hooks=gc_policy, workers=workers, pool_min_steps=pool_min_steps)
        """The step half: what is visible, what to summarize, what failed (core's, as ``report``'s)."""
        self._judged: int | None = None
        self._judged_meta: RunMeta | None = None
        self._advisories: tuple[Advisory, ...] = ()
        self._cadence: tuple[float, ...] | None = None
        self._quiet_after = 600.0
        self.streams = StreamWatch(run.dir)
        """The telemetry half: dashboard/ and its rules, under its own lock."""

    @property
    def follower(self) -> RunFollower:
        """The telemetry follower (its own locks make it safe to read from the UI thread)."""
        return self.streams.follower

    @property
    def stream_lock(self) -> asyncio.Lock:
        return self.streams.lock

    # -- async API (event loop side) -------------------------------------------

    async def _serialized(self, lock: asyncio.Lock, function: Callable[..., T], *args: Any) -> T:
        """Run a blocking call in a daemon thread while holding ``lock`` until the thread is done.

        A worker cancelled mid-read (the user left the screen, or quit) returns at
        once, but the lock stays held until its thread is done: the next reader
        never overlaps it on the shared Run. Nothing waits for a stuck thread, so
        quitting never blocks on a read that hangs in the kernel.
        """
        await lock.acquire()
        try:
            task = asyncio.ensure_future(_in_thread(function, *args))
        except BaseException:
            lock.release()
            raise
        task.add_done_callback(lambda done: _release(lock, done))
        return await asyncio.shield(task)

    async def poll(self, summarize: bool = True) -> StepsPoll:
        return await self._serialized(self.lock, self.poll_blocking, self.clock(), summarize)

    async def poll_streams(self) -> StreamPoll:
        """Follow the dashboard/ telemetry (its own lock: a first load of a long stream takes seconds)."""
        return await self._serialized(self.streams.lock, self.streams.poll_blocking, self.clock())

    async def open(self, rollout_id: int, evaluation: bool) -> OpenStep:
        return await self._serialized(self.lock, self.steps.open_blocking, rollout_id, evaluation, self.clock())

    async def sample_context(
        self,
        rollout_id: int,
        evaluation: bool,
        sample_index: int,
        cursor: int | Callable[[OpenStep], int | None] | None = None,
    ) -> SampleContext:
        """A sample and all its view shows, read in one serialized thread call."""
        return await self._serialized(
            self.lock, self._sample_context_blocking, rollout_id, evaluation, sample_index, cursor
        )

    def _sample_context_blocking(
        self,
        rollout_id: int,
        evaluation: bool,
        sample_index: int,
        cursor: int | Callable[[OpenStep], int | None] | None,
    ) -> SampleContext:
        with gc_policy.paused():
            context = self.run.sample_context(rollout_id, evaluation, sample_index, self.clock(), cursor)
        gc_policy.after_read(context.step.summary.signature[0][1])
        return context

    async def summary(self, rollout_id: int, evaluation: bool) -> StepSummary:
        return await self._serialized(self.lock, self.steps.summary_blocking, rollout_id, evaluation, self.clock())

    def focus(self, keys: tuple[StepKey, ...]) -> None:
        """The steps on screen: summarized before the others (called from the UI thread)."""
        self.steps.focus(keys)

    @property
    def backfill(self) -> Backfill:
        """The step half's helper processes."""
        return self.steps.backfill

    def close(self) -> None:
        """Stop the helper processes (the app is quitting)."""
        self.steps.close()

    # -- blocking half (worker thread) -----------------------------------------

    def poll_blocking(self, now: float, summarize: bool = True) -> StepsPoll:
        """One step poll (:meth:`StepFollower.poll`) judged with meta.json as the last telemetry poll read it
        (the dump rules run again only when what they read changed); the telemetry follower learns the steps'
        newest write (its data age covers both)."""
        result = self.steps.poll(now, summarize)
        self.follower.note_step_write(result.newest_write)
        meta = self.follower.dashboard.meta
        if self._judged != self.steps.facts_version or meta is not self._judged_meta:
            self._judged, self._judged_meta = self.steps.facts_version, meta
            unreadable = (UnreadableStep(*failure) for failure in self.steps.failed_steps())
            self._advisories = dump_advisories(self.steps.latest_summary, meta, unreadable)
        if result.cadence != self._cadence:
            self._cadence, self._quiet_after = result.cadence, quiet_after(list(result.cadence))
        fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
        return StepsPoll(**fields, advisories=self._advisories, quiet_after=self._quiet_after)

    def poll_streams_blocking(self, now: float) -> StreamPoll:
        """One telemetry poll (see :meth:`StreamWatch.poll_blocking`)."""
        return self.streams.poll_blocking(now)


_READS = DaemonThreadExecutor()


async def _in_thread(function: Callable[..., T], *args: Any) -> T:
    """``asyncio.to_thread`` on the daemon executor (scheduled alike: submitted when the task first runs)."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_READS, functools.partial(context.run, function, *args))


def _release(lock: asyncio.Lock, done: asyncio.Future[Any]) -> None:
    """The read's thread is done: the next reader may start (its error, if nobody awaited it, is dropped)."""
    lock.release()
    if not done.cancelled():
        done.exception()
