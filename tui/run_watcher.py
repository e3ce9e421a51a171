"""The app's side of following a run: core's blocking reads, off the event loop, one at a time.

Every read of the run goes through :class:`RunWatcher` under one asyncio lock
and runs in a daemon thread (:class:`~miles_tui.tui.daemon_threads.DaemonThreadExecutor`),
so the UI never blocks on a slow filesystem, two refreshes never interleave on
the shared ``Run`` (its LRU and the summary cache are not thread-safe), and a
read stuck in I/O never holds up quitting. The blocking half,
:meth:`RunWatcher.poll_blocking`, is plain code that tests can call directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import gc
import itertools
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from miles_tui.core.analysis.advisories import Advisory, ordered, step_advisories, step_error
from miles_tui.core.analysis.stream_advisories import LOW_MFU, stream_advisories
from miles_tui.core.dump.run import Run, SampleContext
from miles_tui.core.dump.run_dir import RunDir, StepFiles
from miles_tui.core.dump.step import OpenStep, StepSummary
from miles_tui.core.errors import DumpLoadError, MilesTuiError, StillWritingError, StreamError
from miles_tui.core.follow import RunDelta, RunFollower
from miles_tui.core.run_files import META_MAX_BYTES, read_json
from miles_tui.core.tail import StreamReset
from miles_tui.tui.daemon_threads import DaemonThreadExecutor

T = TypeVar("T")

SUMMARY_BUDGET_SECONDS = 1.0

LANDING_SECONDS = 0.5
"""A step with a file written less than this ago is still landing: wait before opening it."""
"""How long one poll may spend summarizing steps before reporting back."""


STREAM_HOURS = 6
"""Hourly telemetry partitions parsed up front; older hours are parsed when a view asks for them."""

KEEP_PROBLEMS = 20

METRIC_WORKER_NICE = 10
"""Niceness of the processes that decode a long metrics.jsonl: keys come first."""


@dataclass(frozen=True)
class StreamPoll:
    """What one telemetry poll found."""

    delta: RunDelta
    advisories: tuple[Advisory, ...]


@dataclass
class PollResult:
    """What one poll found."""

    train: tuple[int, ...]
    evaluation: tuple[int, ...]
    new_train: tuple[int, ...]
    new_evaluation: tuple[int, ...]
    summaries: list[StepSummary] = field(default_factory=list)
    failures: list[tuple[int, bool, str, bool]] = field(default_factory=list)
    advisories: tuple[Advisory, ...] = ()
    run_name: str = ""
    latest: int | None = None
    data_age: float | None = None
    quiet_after: float = 600.0
    pending: int = 0
    landing: int = 0
    """Steps whose files are still landing (poll again shortly)."""
    preparable: int = 0
    """Settled files of not-yet-ready steps that could be parsed ahead."""
    looks_like_a_run: bool = True
    """Whether the folder has any directory a miles dump writes (else: wrong folder?)."""


class RunWatcher:
    """Serialized, threaded access to one run for the app."""

    def __init__(self, run: Run, clock: Callable[[], float] = time.time) -> None:
        self.run = run
        self.clock = clock
        self.lock = asyncio.Lock()
        self._known: set[tuple[int, bool]] = set()
        self._signatures: dict[tuple[int, bool], tuple[Any, ...]] = {}
        self._summaries: dict[tuple[int, bool], StepSummary] = {}
        self._failures: dict[tuple[int, bool], str] = {}
        self._meta_cache: tuple[float, dict[str, Any]] | None = None
        # A long metrics.jsonl is decoded by worker processes, niced: the UI's process keeps its GIL and a core.
        self.follower = RunFollower(
            run.dir, recent_hours=STREAM_HOURS, parse_workers=os.cpu_count() or 1, worker_nice=METRIC_WORKER_NICE
        )
        """The telemetry follower; its own locks make it safe to read from the UI thread."""
        self.stream_lock = asyncio.Lock()
        self._stream_problems: list[StreamError] = []
        self._stream_resets: list[StreamReset] = []
        self.low_mfu_threshold = LOW_MFU
        """``--low-mfu-threshold``: mean MFU under it is advised on (0: never)."""

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
        return await self._serialized(self.stream_lock, self.poll_streams_blocking, self.clock())

    async def open(self, rollout_id: int, evaluation: bool) -> OpenStep:
        return await self._serialized(self.lock, self._open_blocking, rollout_id, evaluation, self.clock())

    def _open_blocking(self, rollout_id: int, evaluation: bool, now: float) -> OpenStep:
        with _gc_paused():
            opened = self.run.open(rollout_id, evaluation, now)
        _exempt_from_gc()
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
        with _gc_paused():
            context = self.run.sample_context(rollout_id, evaluation, sample_index, self.clock(), cursor)
        _exempt_from_gc()
        return context

    async def summary(self, rollout_id: int, evaluation: bool) -> StepSummary:
        return await self._serialized(self.lock, self.run.summary, rollout_id, evaluation, self.clock())

    # -- blocking half (worker thread) -----------------------------------------

    def _meta(self) -> dict[str, Any]:
        """meta.json for the run name and arguments; unusable is empty (the telemetry poll says why)."""
        path = self.run.dir.dashboard_dir / "meta.json"
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return {}
        if self._meta_cache is None or self._meta_cache[0] != mtime:
            try:
                meta = read_json(path, META_MAX_BYTES, "meta.json")
            except (OSError, MilesTuiError):
                meta = {}
            self._meta_cache = (mtime, meta if isinstance(meta, dict) else {})
        return self._meta_cache[1]

    def _summarize(self, key: tuple[int, bool], files: StepFiles, now: float, result: PollResult) -> None:
        rid, evaluation = key
        try:
            if key == (result.latest, False):
                # The newest step is opened, not just summarized: the user gets to it instantly.
                summary = self._open_blocking(rid, evaluation, now).summary
            else:
                with _gc_paused():
                    summary = self.run.summary(rid, evaluation, now)
        except StillWritingError as err:
            self._failures[key] = str(err)
            result.failures.append((rid, evaluation, str(err), True))
            return
        except (DumpLoadError, MilesTuiError) as err:
            self._failures[key] = str(err)
            self._signatures[key] = files.signature
            result.failures.append((rid, evaluation, str(err), False))
            return
        self._failures.pop(key, None)
        self._summaries[key] = summary
        if summary.complete:
            self._signatures[key] = files.signature
        result.summaries.append(summary)

    def poll_blocking(self, now: float, summarize: bool = True) -> PollResult:
        """One poll: new steps, (re)summarized steps within a time budget, advisories, data age.

        ``summarize=False`` only lists the steps (directory entries and stats), so
        the step list can paint before any file is read.
        """
        steps = self.run.dir.scan()
        visible = {key: files for key, files in steps.items() if RunDir.is_visible(files, now)}
        keys = set(visible)
        new = keys - self._known
        self._known |= keys
        train = tuple(sorted(rid for rid, ev in keys if not ev))
        evaluation = tuple(sorted(rid for rid, ev in keys if ev))
        meta = self._meta()
        result = PollResult(
            train=train,
            evaluation=evaluation,
            new_train=tuple(sorted(rid for rid, ev in new if not ev)),
            new_evaluation=tuple(sorted(rid for rid, ev in new if ev)),
            run_name=str(meta.get("run_name") or self.run.path.name),
            latest=train[-1] if train else None,
            looks_like_a_run=bool(steps) or self.run.dir.looks_like_a_run(),
        )
        stale = [k for k, files in visible.items() if self._signatures.get(k) != files.signature]
        # A step whose files are landing right now is listed but not opened yet: opening it per
        # arriving shard would repeat the whole resolution several times over.
        landing = [k for k in stale if now - visible[k].newest_mtime < LANDING_SECONDS]
        stale = [k for k in stale if k not in landing]
        result.landing = len(landing)
        # Newest first: what the user most likely looks at next is ready first.
        stale.sort(key=lambda k: (k[0], not k[1]), reverse=True)
        deadline = time.monotonic() + SUMMARY_BUDGET_SECONDS
        for index, key in enumerate(stale):
            if not summarize or (index and time.monotonic() > deadline):
                result.pending = len(stale) - index
                break
            self._summarize(key, visible[key], now, result)

        waiting = self._waiting(steps, visible, now)
        if summarize and not result.pending:
            self._prepare(waiting, steps, now, deadline)
        result.preparable = sum(len(self.run.unprepared(steps[k], now, LANDING_SECONDS)) for k in waiting)
        mtimes = [files.newest_mtime for files in visible.values()]
        result.data_age = now - max(mtimes) if mtimes else None
        intervals = _step_intervals(visible)
        result.quiet_after = max(600.0, 5 * statistics.median(intervals)) if intervals else 600.0
        result.advisories = tuple(self._advisories(result, meta))
        return result

    def _waiting(
        self, steps: dict[tuple[int, bool], StepFiles], visible: dict[tuple[int, bool], StepFiles], now: float
    ) -> list[tuple[int, bool]]:
        """The two newest steps not ready yet (not visible, or landing): worth parsing ahead."""
        waiting = [k for k in steps if k not in visible or self._signatures.get(k) != steps[k].signature]
        return sorted(waiting, reverse=True)[:2]

    def _prepare(
        self, waiting: list[tuple[int, bool]], steps: dict[tuple[int, bool], StepFiles], now: float, deadline: float
    ) -> None:
        """Parse the files of the newest steps that are not ready yet, so opening them later is quick.

        A rollout file is written minutes before its train shards; parsing it (the
        seconds-long part) while training runs means the step opens as soon as
        its last shard lands.
        """
        for key in waiting:
            if time.monotonic() > deadline:
                return
            with _gc_paused():
                self.run.prepare(steps[key], now, settled_for=LANDING_SECONDS)

    def poll_streams_blocking(self, now: float) -> StreamPoll:
        """One telemetry poll and the telemetry advisories it implies."""
        delta = self.follower.poll(now)
        # A poll reports a problem once; keep the recent ones so the advisory stays up.
        self._stream_problems = [*self._stream_problems, *delta.problems][-KEEP_PROBLEMS:]
        self._stream_resets = [*self._stream_resets, *delta.resets][-KEEP_PROBLEMS:]
        advisories = stream_advisories(
            self.follower,
            now,
            problems=self._stream_problems,
            resets=self._stream_resets,
            low_mfu_threshold=self.low_mfu_threshold,
        )
        return StreamPoll(delta, tuple(advisories))

    def _advisories(self, result: PollResult, meta: dict[str, Any]) -> list[Advisory]:
        advisories: list[Advisory] = []
        if result.latest is not None:
            latest = self._summaries.get((result.latest, False))
            if latest is not None:
                args = meta.get("args") if isinstance(meta.get("args"), dict) else None
                advisories += step_advisories(latest, args)
        for (rid, evaluation), message in sorted(self._failures.items()):
            still = "still being written" in message
            advisories.append(step_error(rid, evaluation, message, None, still))
        return ordered(advisories)


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


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic collection while a step is read: unpickling allocates millions of containers,
    and the collector would walk them again and again (about 15% of an open)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _exempt_from_gc() -> None:
    """Move what a step open allocated out of the cyclic GC's reach.

    An open step holds millions of list elements (tokens, log-probs); every
    full collection would walk them again (~0.2 s per step: a visible
    stutter). They hold no cycles and are still freed by reference counting
    when the LRU drops the step; freezing only stops the re-walking.
    """
    gc.collect()
    gc.freeze()


def _step_intervals(visible: dict[tuple[int, bool], StepFiles]) -> list[float]:
    times = sorted(files.rollout.mtime for (rid, ev), files in visible.items() if not ev)
    return [b - a for a, b in itertools.pairwise(times) if b > a][-20:]
