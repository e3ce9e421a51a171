"""The telemetry half of the watcher: follows ``dashboard/`` and runs the telemetry rules when due.

It has its own lock (a first load of a long stream takes seconds and must not
hold up step reads). The rules read every record held, so they run again at
once when a stream had a problem or the attempt changed, at most every
:data:`STREAM_ADVISORY_MIN_SECONDS` while records arrive, and every
:data:`STREAM_ADVISORY_SECONDS` otherwise (the rules about time: a stalled
phase, a run gone quiet): a quiet poll of a long run costs a few stat calls. The starvation figures
(MFU, wait per step, data-buffer depth) are computed again only by a poll that brings one of their inputs.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from miles_tui.core.analysis import LOW_MFU, Advisory
from miles_tui.core.analysis.starvation import KEYS as STARVATION_KEYS
from miles_tui.core.analysis.starvation import Starvation, starvation
from miles_tui.core.analysis.stream_advisories import stream_advisories
from miles_tui.core.base.errors import StreamError
from miles_tui.core.base.tail import MalformedLineError, StreamReset
from miles_tui.core.dump import RunDir
from miles_tui.core.follow import RunDelta, RunFollower
from miles_tui.tui.runtime import gc_policy

STREAM_HOURS = 6
"""Hourly telemetry partitions parsed up front; older hours are parsed when a view asks for them."""

FOLLOWED_STREAMS = ("engine_series", "trajectories", "topology", "data_buffer")
"""Streams the reader follows record by record (the engines view reads them); ``gpu_util`` and ``phases``, the
bulk of a long run, are read as cached hourly columns (the follower's digests, the GPU view's columns), and
``gpu_processes`` the same way, one hour at a time, by the GPU view's inspector. ``topology`` (the GPU view's engine
rows and lane grammar), ``data_buffer`` (the starvation rows) and ``trajectories`` (the anatomy and the samples in
flight) are followed record by record; a record of theirs that is not one (an empty object) is a malformed line,
never held."""

KEEP_PROBLEMS = 20
"""Stream problems and resets kept (a poll reports each once; the advisory stays up)."""

METRIC_WORKER_NICE = 10
"""Niceness of the processes that decode a long metrics.jsonl: keys come first."""

STREAM_ADVISORY_SECONDS = 30.0
"""Telemetry rules run again at least this often when no record arrived (for the rules about time)..."""

STREAM_ADVISORY_MIN_SECONDS = 10.0
"""... and at most this often when records keep arriving (they read every record held)."""


@dataclass(frozen=True)
class StreamPoll:
    """What one telemetry poll found."""

    delta: RunDelta
    advisories: tuple[Advisory, ...]
    starvation: Starvation | None = None
    """MFU, wait per step and data-buffer depth (the same object until a poll brings any of their inputs)."""


def _kept(problems: list[StreamError]) -> list[StreamError]:
    """The last :data:`KEEP_PROBLEMS` malformed lines and, apart, the last as many other problems: a file that
    cannot be read (a broken meta.json) is said once, and a burst of malformed lines (counted per file anyway)
    must not push it out of the advisories."""
    lines = [p for p in problems if isinstance(p, MalformedLineError)][-KEEP_PROBLEMS:]
    others = [p for p in problems if not isinstance(p, MalformedLineError)][-KEEP_PROBLEMS:]
    return [*others, *lines]


class StreamWatch:
    """Follows one run's telemetry; :meth:`poll_blocking` runs in a worker thread under :attr:`lock`."""

    def __init__(self, run_dir: RunDir) -> None:
        # A long metrics.jsonl is decoded by the line scanner in niced threads that release the GIL (by niced worker
        # processes where the scanner is not built): the UI keeps the GIL and a core.
        self.follower = RunFollower(
            run_dir,
            recent_hours=STREAM_HOURS,
            parse_workers=os.cpu_count() or 1,
            worker_nice=METRIC_WORKER_NICE,
            streams=FOLLOWED_STREAMS,
        )
        """The telemetry follower (the step files are followed by the watcher); its own locks make it safe
        to read from the UI thread."""
        self.lock = asyncio.Lock()
        self.low_mfu_threshold = LOW_MFU
        """``--low-mfu-threshold``: mean MFU under it is advised on (0: never)."""
        self._problems: list[StreamError] = []
        self._resets: list[StreamReset] = []
        self._advisories: tuple[Advisory, ...] = ()
        self._checked: float | None = None
        self._meta: object = None
        self._unseen = False
        """Records arrived that the telemetry rules have not read yet."""
        self._starvation: Starvation | None = None
        self._starvation_meta: object = None

    def poll_blocking(self, now: float) -> StreamPoll:
        """One telemetry poll and the telemetry advisories it implies (see the module docstring)."""
        with gc_policy.young_only():  # a first load of a long metrics.jsonl: no full collection stalls the UI
            delta = self.follower.poll(now)
        self._problems = _kept([*self._problems, *delta.problems])
        self._resets = [*self._resets, *delta.resets][-KEEP_PROBLEMS:]
        urgent = bool(delta.problems or delta.resets or delta.reset_streams or delta.attempt_changed)
        urgent = urgent or delta.meta is not self._meta or self._checked is None
        since = now - (self._checked or now)
        fresh = bool(delta.metric_keys or delta.records) or self._unseen
        if urgent or since >= STREAM_ADVISORY_SECONDS or (fresh and since >= STREAM_ADVISORY_MIN_SECONDS):
            self._meta = delta.meta
            self._checked = now
            self._unseen = False
            self._advisories = tuple(
                stream_advisories(
                    self.follower,
                    now,
                    problems=self._problems,
                    resets=self._resets,
                    low_mfu_threshold=self.low_mfu_threshold,
                )
            )
        else:
            self._unseen = fresh
        return StreamPoll(delta, self._advisories, self._starving(delta))

    def _starving(self, delta: RunDelta) -> Starvation:
        """The starvation figures, computed again only when a poll brought one of their inputs."""
        inputs = STARVATION_KEYS.intersection(delta.metric_keys) or "data_buffer" in delta.records
        inputs = inputs or bool({"metrics", "data_buffer"}.intersection(delta.reset_streams))
        if self._starvation is None or inputs or delta.meta is not self._starvation_meta:
            self._starvation_meta = delta.meta
            args = delta.meta.args if delta.meta is not None else {}
            buffer = self.follower.dashboard.records("data_buffer")
            self._starvation = starvation(self.follower.metrics, buffer, args)
        return self._starvation
