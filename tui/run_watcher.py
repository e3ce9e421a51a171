"""The app's side of following a run: core's blocking reads, off the event loop, one at a time.

Every read of the run goes through :class:`RunWatcher` under one asyncio lock
and runs in a daemon thread (:class:`~miles_tui.tui.daemon_threads.DaemonThreadExecutor`),
so the UI never blocks on a slow filesystem, two refreshes never interleave on
the shared ``Run`` (its LRU and the summary cache are not thread-safe), and a
read stuck in I/O never holds up quitting. The blocking half,
:meth:`RunWatcher.poll_blocking`, is plain code that tests can call directly.

A poll costs what changed, not what exists: the step listing is incremental
(:class:`~miles_tui.core.dump.run_scan.RunScanner`), a step is summarized again only when its
files' sizes or mtimes change (a step that failed too), and a poll that finds
nothing new does no other work. Steps to summarize go newest first, the rows
on screen (:meth:`RunWatcher.focus`) before the rest; cached summaries are
read in the thread (well under a millisecond each), a long cold back-fill goes
to helper processes (:class:`~miles_tui.core.follow.backfill.Backfill`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import heapq
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from miles_tui.core.analysis import Advisory, UnreadableStep, dump_advisories, quiet_after
from miles_tui.core.base.errors import MilesTuiError, StillWritingError
from miles_tui.core.dump import (
    ColumnRows,
    OpenStep,
    Run,
    RunDir,
    RunScanner,
    SampleContext,
    StepFiles,
    StepKey,
    StepSummary,
)
from miles_tui.core.follow import RunFollower
from miles_tui.core.follow.backfill import Backfill
from miles_tui.core.follow.summary_queue import SummaryQueue
from miles_tui.core.telemetry import RunMeta
from miles_tui.tui import gc_policy
from miles_tui.tui.daemon_threads import DaemonThreadExecutor
from miles_tui.tui.stream_watch import StreamPoll, StreamWatch

T = TypeVar("T")

SUMMARY_BUDGET_SECONDS = 0.25
"""How long one poll may spend summarizing steps before reporting back (and letting a key's read in)."""

LANDING_SECONDS = 0.5
"""A step with a file written less than this ago is still landing: wait before opening it."""

POOL_MIN_STEPS = 32
"""A back-fill of at least this many steps goes to helper processes (fewer: not worth starting them)..."""

POOL_MIN_BYTES = 256 << 20
"""... or of steps whose files hold at least this many bytes (a few big steps)."""


@dataclass
class PollResult:
    """What one poll found."""

    train: tuple[int, ...]
    evaluation: tuple[int, ...]
    new_train: tuple[int, ...]
    new_evaluation: tuple[int, ...]
    summaries: list[StepSummary] = field(default_factory=list)
    """Summaries that are new or changed since the last poll."""
    failures: list[tuple[int, bool, str, bool]] = field(default_factory=list)
    """(rollout id, evaluation, message, still writing) of steps that failed, new or changed."""
    advisories: tuple[Advisory, ...] = ()
    """The dump side's advisories (:func:`~miles_tui.core.analysis.health.dump_advisories`)."""
    latest: int | None = None
    newest_write: float | None = None
    """Newest modification time among the visible steps' files (None: none yet)."""
    quiet_after: float = 600.0
    pending: int = 0
    """Steps still to summarize (some may be with the helpers, some only settling)."""
    more: bool = False
    """The poll stopped at its time budget with steps it could summarize right away: poll again soon."""
    helpers: int = 0
    """Steps with the helper processes: poll again to collect them."""
    landing: int = 0
    """Steps whose files are still landing (poll again shortly)."""
    preparable: int = 0
    """Settled files of not-yet-ready steps that could be parsed ahead."""
    looks_like_a_run: bool = True
    """Whether the folder has any directory a miles dump writes (else: wrong folder?)."""


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
        self.scanner = RunScanner(run.dir)
        self.backfill = Backfill(run.path, run.use_cache, workers)
        self.pool_min_steps = pool_min_steps
        self._steps: dict[StepKey, StepFiles] = {}
        self._visible: set[StepKey] = set()
        self._hidden: set[StepKey] = set()
        """Listed steps that are not visible yet (re-checked every poll: visibility comes with age)."""
        self._done: dict[StepKey, tuple[Any, ...]] = {}
        """The signature each step was last summarized (or failed for good) at."""
        self._todo = SummaryQueue()
        self._failures: dict[StepKey, tuple[str, bool]] = {}
        self._unsettled: dict[StepKey, StepSummary] = {}
        """Incomplete summaries already reported (not reported again until they change)."""
        self._latest: StepSummary | None = None
        self._ids: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
        self._newest: float | None = None
        self._quiet_after = 600.0
        self._advisories: tuple[Advisory, ...] | None = None
        self._focus: tuple[StepKey, ...] = ()
        self._summarized_once = False
        self._advised_meta: RunMeta | None = None
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

    async def poll(self, summarize: bool = True) -> PollResult:
        return await self._serialized(self.lock, self.poll_blocking, self.clock(), summarize)

    async def poll_streams(self) -> StreamPoll:
        """Follow the dashboard/ telemetry (its own lock: a first load of a long stream takes seconds)."""
        return await self._serialized(self.streams.lock, self.streams.poll_blocking, self.clock())

    async def open(self, rollout_id: int, evaluation: bool) -> OpenStep:
        return await self._serialized(self.lock, self._open_blocking, rollout_id, evaluation, self.clock())

    def _open_blocking(self, rollout_id: int, evaluation: bool, now: float, files: StepFiles | None = None) -> OpenStep:
        with gc_policy.paused():
            opened = self.run.open(rollout_id, evaluation, now) if files is None else self.run.open_files(files, now)
        rollout = files.rollout.size if files is not None else opened.summary.signature[0][1]  # the rollout file
        gc_policy.after_read(rollout)
        return opened

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
        return await self._serialized(self.lock, self._summary_blocking, rollout_id, evaluation, self.clock())

    def _summary_blocking(self, rollout_id: int, evaluation: bool, now: float) -> StepSummary:
        files = self._steps.get(StepKey(rollout_id, evaluation))
        if files is None or (rollout_id, evaluation) not in self._visible:
            return self.run.summary(rollout_id, evaluation, now)
        with gc_policy.paused():
            summary = self.run.summary_of(files, now)  # the last poll's listing: no listing per step
            for rows in (summary.rows, summary.groups):
                if isinstance(rows, ColumnRows):
                    rows.build_now()  # here, not in the UI thread that shows them
        gc_policy.after_read(files.rollout.size)
        return summary

    def focus(self, keys: tuple[StepKey, ...]) -> None:
        """The steps on screen: summarized before the others (called from the UI thread)."""
        self._focus = keys

    def close(self) -> None:
        """Stop the helper processes (the app is quitting)."""
        self.backfill.close()

    # -- blocking half (worker thread) -----------------------------------------

    def poll_blocking(self, now: float, summarize: bool = True) -> PollResult:
        """One poll: new steps, (re)summarized steps within a time budget, advisories, data age.

        ``summarize=False`` only lists the steps (directory entries and stats), so
        the step list can paint before any file is read.
        """
        new = self._follow(now)
        train, evaluation = self._ids
        result = PollResult(
            train=train,
            evaluation=evaluation,
            new_train=tuple(sorted(rid for rid, ev in new if not ev)),
            new_evaluation=tuple(sorted(rid for rid, ev in new if ev)),
            latest=train[-1] if train else None,
            looks_like_a_run=bool(self._steps) or self.run.dir.looks_like_a_run(),
        )
        deadline = time.monotonic() + SUMMARY_BUDGET_SECONDS
        if summarize:
            self._summarize_some(result, now, deadline)
        else:
            result.pending = len(self._todo)
        waiting = self._waiting()
        if summarize and not result.pending:
            self._prepare(waiting, now, deadline)
        result.preparable = sum(len(self.run.unprepared(self._steps[k], now, LANDING_SECONDS)) for k in waiting)
        result.newest_write = self._newest
        self.follower.note_step_write(self._newest)
        result.quiet_after = self._quiet_after
        meta = self.follower.dashboard.meta  # as the last telemetry poll read it
        if self._advisories is None or meta is not self._advised_meta:
            self._advised_meta = meta
            unreadable = (
                UnreadableStep(rid, ev, message, still) for (rid, ev), (message, still) in self._failures.items()
            )
            self._advisories = dump_advisories(self._latest, meta, unreadable)
        result.advisories = self._advisories
        return result

    def _waiting(self) -> list[StepKey]:
        """The two newest steps not ready yet (not visible, or to summarize): worth parsing ahead."""
        return heapq.nlargest(2, [*self._hidden, *self._todo.newest(2)])

    # -- following the listing ---------------------------------------------------------

    def _follow(self, now: float) -> list[StepKey]:
        """Take one scan in: what is visible, what is to summarize; returns the steps that became visible."""
        scan = self.scanner.scan(now)
        self._steps = scan.steps
        relisted = bool(scan.removed)
        for key in scan.removed:
            self._forget(key)
        if relisted:
            self._newest = max((self._steps[k].newest_mtime for k in self._visible), default=None)
        for key in scan.changed:
            if key in self._visible:
                self._schedule(key)
                newest = self._steps[key].newest_mtime
                self._newest = newest if self._newest is None else max(self._newest, newest)
            else:
                self._hidden.add(key)
        new = []
        for key in list(self._hidden):
            files = self._steps.get(key)
            if files is None:
                self._hidden.discard(key)
            elif RunDir.is_visible(files, now):
                self._hidden.discard(key)
                self._visible.add(key)
                self._schedule(key)
                self._newest = files.newest_mtime if self._newest is None else max(self._newest, files.newest_mtime)
                new.append(key)
        if new or relisted:
            self._relist_ids()
        return new

    def _forget(self, key: StepKey) -> None:
        self._visible.discard(key)
        self._hidden.discard(key)
        self._todo.discard(key)
        self._done.pop(key, None)
        self._unsettled.pop(key, None)
        if self._failures.pop(key, None) is not None:
            self._advisories = None

    def _schedule(self, key: StepKey) -> None:
        if self._done.get(key) != self._steps[key].signature:
            self._todo.add(key)

    def _relist_ids(self) -> None:
        train = tuple(sorted(rid for rid, ev in self._visible if not ev))
        evaluation = tuple(sorted(rid for rid, ev in self._visible if ev))
        self._ids = (train, evaluation)
        # the run's cadence (core's one rule): a few step intervals, not a fixed 10 minutes
        self._quiet_after = quiet_after([self._steps[StepKey(rid, False)].rollout.mtime for rid in train[-21:]])
        if self._latest is not None and (not train or self._latest.rollout_id != train[-1]):
            self._latest = None
            self._advisories = None

    # -- summarizing -----------------------------------------------------------------------

    def _order(self) -> Iterator[StepKey]:
        """What to summarize first: the newest train step, the rows on screen, then newest first."""
        latest = StepKey(self._ids[0][-1], False) if self._ids[0] else None
        return self._todo.ordered((latest, *self._focus))

    def _summarize_some(self, result: PollResult, now: float, deadline: float) -> None:
        for job in self.backfill.done():
            key = job.files.key
            if self._steps.get(key) != job.files:
                continue  # the files changed while the helper read them: the step is still to do
            if job.summary is not None:
                self._accept(key, job.summary, result)
            else:
                self._fail(key, job.failure, job.still_writing, result)
        pooled = self._worth_helpers()
        latest = None if result.latest is None else StepKey(result.latest, False)
        batch: list[StepFiles] = []
        room = self.backfill.capacity if pooled else 0
        size = self.backfill.batch_size
        for index, key in enumerate(self._order()):
            if index and time.monotonic() > deadline:
                result.more = True
                break
            if self.backfill.busy(key):
                continue
            files = self._steps[key]
            if now - files.newest_mtime < LANDING_SECONDS:
                # A step whose files are landing right now is listed but not opened yet: opening it per
                # arriving shard would repeat the whole resolution several times over.
                result.landing += 1
                continue
            known = None if key == latest else self.run.cached_summary(files, now)
            if known is not None:
                self._accept(key, known, result)
            elif pooled and key != latest:
                if len(batch) >= room:
                    break  # the helpers have enough to do: the rest waits for them, in this order
                batch.append(files)
                if len(batch) % size == 0 and not self.backfill.submit(batch[-size:], now):
                    break
            else:
                self._read(key, files, now, result)
        if batch and len(batch) % size:
            self.backfill.submit(batch[-(len(batch) % size) :], now)
        self._summarized_once = True
        result.pending = len(self._todo)
        result.helpers = self.backfill.in_flight
        if not self._todo and self.backfill.in_flight == 0:
            self.backfill.close()

    def _worth_helpers(self) -> bool:
        """Whether what is left to summarize is worth helper processes (they take a second to start).

        Never on the first summarizing poll: the newest step and what the cache holds reach the screen
        before helpers starting up compete for the CPU.
        """
        if self.backfill.workers < 2 or self.backfill.broken or not self._summarized_once:
            return False
        if self.backfill.in_flight or len(self._todo) >= self.pool_min_steps:
            return True
        size = 0
        for key in self._todo:
            files = self._steps[key]
            size += files.rollout.size + sum(f.size for f in files.train)
        return size >= POOL_MIN_BYTES

    def _read(self, key: StepKey, files: StepFiles, now: float, result: PollResult) -> None:
        """Summarize one step in this thread (the newest step is opened: the user gets to it instantly)."""
        try:
            if key == (result.latest, False):
                summary = self._open_blocking(key[0], key[1], now, files).summary
            else:
                with gc_policy.paused():
                    summary = self.run.summary_of(files, now)
                gc_policy.after_read(files.rollout.size)
        except StillWritingError as err:
            self._fail(key, str(err), True, result)
        except MilesTuiError as err:
            self._fail(key, str(err), False, result)
        except Exception as err:  # a file no rule foresaw: this step is unreadable, the monitor goes on
            self._fail(key, f"{files.rollout.path}: could not be read ({type(err).__name__}: {err})", False, result)
        else:
            self._accept(key, summary, result)

    def _accept(self, key: StepKey, summary: StepSummary, result: PollResult) -> None:
        if self._failures.pop(key, None) is not None:
            self._advisories = None
        if key == (result.latest, False) and summary is not self._latest:
            self._latest = summary
            self._advisories = None
        if summary.complete:
            self._done[key] = self._steps[key].signature
            self._todo.discard(key)
            self._unsettled.pop(key, None)
        elif self._unsettled.get(key) is summary:
            return  # reported already, unchanged
        else:
            self._unsettled[key] = summary
        result.summaries.append(summary)

    def _fail(self, key: StepKey, message: str, still_writing: bool, result: PollResult) -> None:
        """A step that could not be read; one that failed for good is read again only when its files change."""
        if not still_writing:
            self._done[key] = self._steps[key].signature
            self._todo.discard(key)
        if self._failures.get(key) != (message, still_writing):
            self._failures[key] = (message, still_writing)
            self._advisories = None
            result.failures.append((key[0], key[1], message, still_writing))

    def _prepare(self, waiting: list[StepKey], now: float, deadline: float) -> None:
        """Parse the files of the newest steps that are not ready yet, so opening them later is quick.

        A rollout file is written minutes before its train shards; parsing it (the
        seconds-long part) while training runs means the step opens as soon as
        its last shard lands.
        """
        for key in waiting:
            if time.monotonic() > deadline:
                return
            with gc_policy.paused():
                self.run.prepare(self._steps[key], now, settled_for=LANDING_SECONDS)

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
