"""The step half of following a run: which steps are visible, which to summarize, what failed.

Contract of :class:`StepFollower` (blocking, no threads of its own, no clock: the caller passes ``now``):
:meth:`StepFollower.poll` takes one incremental scan in (:class:`~miles_tui.core.dump.run_scan.RunScanner`),
applies the spec's visibility rule, summarizes the visible steps whose files' signatures changed (a step that
failed too) newest first, the steps in :meth:`StepFollower.focus` before the rest, within ``budget`` seconds,
and returns a :class:`PollResult`: the visible steps, the new ones, the summaries and failures that are new or
changed, the newest write and the run's cadence; what the dump rules judge (:meth:`StepFollower.failed_steps`,
:attr:`StepFollower.latest_summary`) moves :attr:`StepFollower.facts_version`. A step failed
for good is read again only when its files change. Cold back-fills of many steps go to helper processes
(:class:`~miles_tui.core.follow.backfill.Backfill`) when ``workers`` allows. ``hooks`` brackets every read
(the monitor pauses its garbage collector there); by default nothing.

The monitor (``tui/runtime/run_watcher``: its locks and threads) and ``report`` (one poll with no budget, no helpers)
both read steps through it.
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from miles_tui.core.base.errors import MilesTuiError, StillWritingError
from miles_tui.core.dump import ColumnRows, OpenStep, Run, RunDir, RunScanner, StepFiles, StepKey, StepSummary
from miles_tui.core.follow.backfill import Backfill
from miles_tui.core.follow.summary_queue import SummaryQueue

SUMMARY_BUDGET_SECONDS = 0.25
"""How long one poll may spend summarizing steps before reporting back (and letting a key's read in)."""

LANDING_SECONDS = 0.5
"""A step with a file written less than this ago is still landing: wait before opening it."""

POOL_MIN_STEPS = 32
"""A back-fill of at least this many steps goes to helper processes (fewer: not worth starting them)..."""

POOL_MIN_BYTES = 256 << 20
"""... or of steps whose files hold at least this many bytes (a few big steps)."""


class ReadHooks(Protocol):
    """What brackets a read of step files (the monitor's garbage-collector policy; nothing headless)."""

    def paused(self) -> contextlib.AbstractContextManager[None]:
        """Entered around each read."""
        ...

    def after_read(self, rollout_bytes: int) -> None:
        """Called after a read of a step whose rollout file has this many bytes."""
        ...


class NoHooks:
    """Reads bracketed by nothing."""

    def paused(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def after_read(self, rollout_bytes: int) -> None:
        return None


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
    latest: int | None = None
    newest_write: float | None = None
    """Newest modification time among the visible steps' files (None: none yet)."""
    cadence: tuple[float, ...] = ()
    """The rollout files' times of the newest train steps (up to 21): the run's step cadence."""
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


class StepFollower:
    """Follows one run's step files; call :meth:`poll` from one thread at a time (see the module docstring)."""

    def __init__(
        self,
        run: Run,
        *,
        hooks: ReadHooks | None = None,
        workers: int | None = None,
        pool_min_steps: int = POOL_MIN_STEPS,
        budget: float = SUMMARY_BUDGET_SECONDS,
        landing: float = LANDING_SECONDS,
        open_latest: bool = True,
        ahead: bool = True,
    ) -> None:
        """``budget``: seconds of summarizing per poll (``math.inf``: every step to summarize);
        ``landing``: a step with a file younger than this waits; ``open_latest``: the newest train step is
        opened whole (the user gets to it instantly), not only summarized; ``ahead``: the newest steps not
        visible yet are parsed ahead, so they open quickly once they are."""
        self.run = run
        self.hooks: ReadHooks = hooks if hooks is not None else NoHooks()
        self.scanner = RunScanner(run.dir)
        self.backfill = Backfill(run.path, run.use_cache, workers)
        self.pool_min_steps = pool_min_steps
        self.budget, self.landing, self.open_latest, self.ahead = budget, landing, open_latest, ahead
        self._steps: dict[StepKey, StepFiles] = {}
        self._visible: set[StepKey] = set()
        self._hidden: set[StepKey] = set()
        """Listed steps that are not visible yet (re-checked every poll: visibility comes with age)."""
        self._done: dict[StepKey, tuple[Any, ...]] = {}
        """The signature each step was last summarized (or failed for good) at."""
        self._todo = SummaryQueue()
        self._failures: dict[StepKey, tuple[str, bool]] = {}
        self._failed_files: dict[StepKey, Path | None] = {}
        """The file at fault of each failure, when the error named one."""
        self._unsettled: dict[StepKey, StepSummary] = {}
        """Incomplete summaries already reported (not reported again until they change)."""
        self._latest: StepSummary | None = None
        self._ids: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
        self._newest: float | None = None
        self._cadence: tuple[float, ...] = ()
        self.facts_version = 0
        """Moves whenever the failures or the newest train step's summary change (what the dump rules judge)."""
        self._focus: tuple[StepKey, ...] = ()
        self._summarized_once = False

    def focus(self, keys: tuple[StepKey, ...]) -> None:
        """The steps on screen: summarized before the others (may be called from another thread)."""
        self._focus = keys

    def visible_files(self) -> dict[StepKey, StepFiles]:
        """The visible steps' files as of the last poll."""
        return {key: self._steps[key] for key in self._visible}

    def failed_steps(self) -> list[tuple[int, bool, str, bool, Path | None]]:
        """(rollout id, evaluation, message, still writing, file at fault) of every step that could not be read,
        ascending."""
        return [(*key, *self._failures[key], self._failed_files.get(key)) for key in sorted(self._failures)]

    @property
    def latest_summary(self) -> StepSummary | None:
        """The newest train step's summary, once read."""
        return self._latest

    def close(self) -> None:
        """Stop the helper processes."""
        self.backfill.close()

    def open_blocking(self, rollout_id: int, evaluation: bool, now: float, files: StepFiles | None = None) -> OpenStep:
        """A step opened whole (its files as listed, or listed now), reads bracketed by the hooks."""
        with self.hooks.paused():
            opened = self.run.open(rollout_id, evaluation, now) if files is None else self.run.open_files(files, now)
        rollout = files.rollout.size if files is not None else opened.summary.signature[0][1]  # the rollout file
        self.hooks.after_read(rollout)
        return opened

    def summary_blocking(self, rollout_id: int, evaluation: bool, now: float) -> StepSummary:
        """A step's summary, its rows built (from the last poll's listing when the step is visible)."""
        files = self._steps.get(StepKey(rollout_id, evaluation))
        if files is None or (rollout_id, evaluation) not in self._visible:
            return self.run.summary(rollout_id, evaluation, now)
        with self.hooks.paused():
            summary = self.run.summary_of(files, now)  # the last poll's listing: no listing per step
            for rows in (summary.rows, summary.groups):
                if isinstance(rows, ColumnRows):
                    rows.build_now()  # here, not in the UI thread that shows them
        self.hooks.after_read(files.rollout.size)
        return summary

    def poll(self, now: float, summarize: bool = True) -> PollResult:
        """One poll: new steps, (re)summarized steps within the time budget, the newest write and the cadence.

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
        deadline = time.monotonic() + self.budget
        if summarize:
            self._summarize_some(result, now, deadline)
        else:
            result.pending = len(self._todo)
        waiting = self._waiting() if self.ahead else []
        if summarize and not result.pending:
            self._prepare(waiting, now, deadline)
        result.preparable = sum(len(self.run.unprepared(self._steps[k], now, self.landing)) for k in waiting)
        result.newest_write = self._newest
        result.cadence = self._cadence
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
        self._failed_files.pop(key, None)
        if self._failures.pop(key, None) is not None:
            self.facts_version += 1

    def _schedule(self, key: StepKey) -> None:
        if self._done.get(key) != self._steps[key].signature:
            self._todo.add(key)

    def _relist_ids(self) -> None:
        train = tuple(sorted(rid for rid, ev in self._visible if not ev))
        evaluation = tuple(sorted(rid for rid, ev in self._visible if ev))
        self._ids = (train, evaluation)
        # the run's cadence (core's one rule): a few step intervals, not a fixed 10 minutes
        self._cadence = tuple(self._steps[StepKey(rid, False)].rollout.mtime for rid in train[-21:])
        if self._latest is not None and (not train or self._latest.rollout_id != train[-1]):
            self._latest = None
            self.facts_version += 1

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
            if now - files.newest_mtime < self.landing:
                # A step whose files are landing right now is listed but not opened yet: opening it per
                # arriving shard would repeat the whole resolution several times over.
                result.landing += 1
                continue
            known = None if self.open_latest and key == latest else self.run.cached_summary(files, now)
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
            if self.open_latest and key == (result.latest, False):
                summary = self.open_blocking(key[0], key[1], now, files).summary
            else:
                with self.hooks.paused():
                    summary = self.run.summary_of(files, now)
                self.hooks.after_read(files.rollout.size)
        except StillWritingError as err:
            self._fail(key, str(err), True, result, err.path)
        except MilesTuiError as err:
            self._fail(key, str(err), False, result, err.path)
        except Exception as err:  # a file no rule foresaw: this step is unreadable, the monitor goes on
            self._fail(key, f"{files.rollout.path}: could not be read ({type(err).__name__}: {err})", False, result)
        else:
            self._accept(key, summary, result)

    def _accept(self, key: StepKey, summary: StepSummary, result: PollResult) -> None:
        self._failed_files.pop(key, None)
        if self._failures.pop(key, None) is not None:
            self.facts_version += 1
        if key == (result.latest, False) and summary is not self._latest:
            self._latest = summary
            self.facts_version += 1
        if summary.complete:
            self._done[key] = self._steps[key].signature
            self._todo.discard(key)
            self._unsettled.pop(key, None)
        elif self._unsettled.get(key) is summary:
            return  # reported already, unchanged
        else:
            self._unsettled[key] = summary
        result.summaries.append(summary)

    def _fail(
        self, key: StepKey, message: str, still_writing: bool, result: PollResult, path: Path | None = None
    ) -> None:
        """A step that could not be read; one that failed for good is read again only when its files change."""
        if not still_writing:
            self._done[key] = self._steps[key].signature
            self._todo.discard(key)
        if self._failures.get(key) != (message, still_writing):
            self._failures[key] = (message, still_writing)
            self._failed_files[key] = path
            self.facts_version += 1
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
            with self.hooks.paused():
                self.run.prepare(self._steps[key], now, settled_for=self.landing)
