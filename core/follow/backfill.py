"""Cold step summaries in helper processes, so back-filling a long run uses every core and not the UI's GIL.

:class:`Backfill` owns a small process pool (started on first use, shut down
when its work is done or the app quits). Each job summarizes one step from
its already-listed files with core's own reader (:meth:`Run.summary_of`,
which also writes the summary cache) and hands back the summary as
:func:`~miles_tui.core.dump.summary_cache.encode_summary` bytes (no pickle of anything read
from the run), or the one-line reason it failed. Helpers run at a lower CPU
priority than the monitor, so keys stay quick while they work.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from miles_tui.core.base.errors import MilesTuiError, StillWritingError
from miles_tui.core.base.worker_processes import start_context, stderr_with_a_file
from miles_tui.core.dump import Run, StepFiles, StepKey, StepSummary, decode_summary, encode_summary

HELPER_NICENESS = 10
"""Helpers yield the CPU to the monitor itself."""

JOB_SECONDS = 0.2
"""A helper's batch is sized to take about this long (small steps go many to a round trip)."""

MAX_STEPS_PER_JOB = 64

JOBS_PER_HELPER = 3
"""Batches queued per helper: enough to keep it busy between two polls, few enough to follow the user."""


@dataclass(frozen=True)
class JobResult:
    """What a helper found for one step."""

    files: StepFiles
    """The files it summarized."""
    summary: StepSummary | None
    """The summary, or None when the step could not be read."""
    failure: str = ""
    """Why not (names the file)."""
    still_writing: bool = False
    """The failure is a file still being written (retry later)."""


_runs: dict[tuple[str, bool], Run] = {}


def _start_helper() -> None:
    """In a helper: lower priority, and nothing it might print (a numpy warning) reaches the terminal."""
    with contextlib.suppress(OSError):  # not allowed: run at the same priority
        os.nice(HELPER_NICENESS)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    warnings.simplefilter("ignore")


Answer = tuple[str, bytes | str]
"""("ok", summary bytes) | ("still", message) | ("failed", message)."""


def _summarize(run_path: str, use_cache: bool, files: StepFiles, now: float) -> Answer:
    """In a helper: one step's :data:`Answer`."""
    run = _runs.get((run_path, use_cache))
    if run is None:
        run = _runs[(run_path, use_cache)] = Run(run_path, use_cache=use_cache, max_open=1)
    try:
        return "ok", encode_summary(run.summary_of(files, now))
    except StillWritingError as err:
        return "still", str(err)
    except MilesTuiError as err:
        return "failed", str(err)
    except Exception as err:  # a bug or a file no rule foresaw: one step unreadable, not a dead helper
        return "failed", f"{files.rollout.path}: could not be summarized ({type(err).__name__}: {err})"


def _summarize_batch(run_path: str, use_cache: bool, batch: list[StepFiles], now: float) -> tuple[float, list[Answer]]:
    """In a helper: (seconds taken, :func:`_summarize` of each step of a batch)."""
    start = time.perf_counter()
    answers = [_summarize(run_path, use_cache, files, now) for files in batch]
    return time.perf_counter() - start, answers


class Backfill:
    """A lazily started pool of ``workers`` helper processes."""

    def __init__(self, run_path: Path, use_cache: bool, workers: int | None = None) -> None:
        self.run_path = str(run_path)
        self.use_cache = use_cache
        self.workers = workers if workers is not None else max(1, min(os.cpu_count() or 1, 4))
        self._pool: ProcessPoolExecutor | None = None
        self._jobs: list[tuple[list[StepFiles], Future[tuple[float, list[Answer]]]]] = []
        self._busy: set[StepKey] = set()
        self._step_seconds = JOB_SECONDS / 8
        """How long a step takes a helper (a running mean; a first guess until a batch comes back)."""
        self.broken = False
        """A helper died: the watcher summarizes in its own thread from then on."""

    @property
    def batch_size(self) -> int:
        """Steps per batch: about :data:`JOB_SECONDS` of a helper's work."""
        return max(1, min(MAX_STEPS_PER_JOB, round(JOB_SECONDS / max(self._step_seconds, 1e-6))))

    @property
    def capacity(self) -> int:
        """Steps worth queueing now: a few batches per helper (the rest wait, in priority order, for the next)."""
        return 0 if self.broken else (JOBS_PER_HELPER * self.workers - len(self._jobs)) * self.batch_size

    def busy(self, key: StepKey) -> bool:
        return key in self._busy

    @property
    def in_flight(self) -> int:
        """Steps with the helpers."""
        return len(self._busy)

    def submit(self, batch: list[StepFiles], now: float) -> bool:
        """Queue a batch of steps; False when the pool cannot take it (broken)."""
        if self.broken:
            return False
        try:
            with stderr_with_a_file():  # making the pool's queues and a submit may start processes
                if self._pool is None:
                    context = start_context("spawn")  # never fork a process that runs threads
                    self._pool = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_start_helper)
                future = self._pool.submit(_summarize_batch, self.run_path, self.use_cache, batch, now)
        except (BrokenProcessPool, RuntimeError, OSError, ValueError):
            self._break()
            return False
        self._jobs.append((batch, future))
        self._busy.update(files.key for files in batch)
        return True

    def done(self) -> list[JobResult]:
        """Finished steps (never waits)."""
        out = []
        for job in [job for job in self._jobs if job[1].done()]:
            self._jobs.remove(job)
            batch, future = job
            self._busy.difference_update((files.rollout_id, files.evaluation) for files in batch)
            try:
                seconds, answers = future.result()
                self._step_seconds = 0.7 * self._step_seconds + 0.3 * seconds / max(len(batch), 1)
                for files, (kind, payload) in zip(batch, answers, strict=True):
                    summary = decode_summary(payload, files) if kind == "ok" and isinstance(payload, bytes) else None
                    failure = "" if summary is not None else str(payload)
                    out.append(JobResult(files, summary, failure, kind == "still"))
            except (BrokenProcessPool, OSError, RuntimeError, ValueError):
                self._break()  # the steps stay to do; the watcher reads them in its own thread
        return out

    def _break(self) -> None:
        self.broken = True
        self._busy.clear()
        self._jobs.clear()
        self.close()

    def close(self) -> None:
        """Stop the helpers (queued jobs are dropped; a running one finishes first)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
