"""Follow a live run: one ``poll(now)`` that says what changed since the previous one.

Contract:

- :class:`RunFollower` follows the ``dashboard/`` streams
  (:class:`~miles_tui.core.telemetry.streams.DashboardReader`) and the state they
  give the run. :meth:`RunFollower.poll` returns a :class:`RunDelta`: new metric
  points, new telemetry records per stream, data age (``now`` minus the newest
  write seen in the streams and, as :meth:`RunFollower.note_step_write` reports
  it, in the dump files), the current attempt, the open phases and the stream
  problems. The step files are the step follower's
  (:class:`~miles_tui.core.follow.steps.StepFollower`); whoever polls both tells
  this one the steps' newest write, so the data age covers the whole run.
- The attempt is meta.json's ``start_ts``; a resumed run rewrites it. An open
  phase marker (``t1 == -1``) that started before the current attempt belongs
  to an attempt that died, so it never counts as open.
- Cost follows what is new: a poll that finds nothing stats a few files and
  reads none. Polls are serialized by the follower's lock, so each change is
  reported by exactly one poll.
- No threads, no sleeps, no clock: the caller passes ``now``; a worker in tui/
  decides when to poll. Never writes into the run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from miles_tui.core.base.errors import StreamError
from miles_tui.core.base.tail import ReadHook, StreamReset
from miles_tui.core.dump import RunDir
from miles_tui.core.telemetry import OPEN_T1, DashboardReader, MetricStore, Phase, RunMeta, StreamRecord
from miles_tui.core.telemetry.hours.phase_digest import PhaseDigest, open_markers
from miles_tui.core.telemetry.hours.store import HourStore


@dataclass(frozen=True)
class RunDelta:
    """What changed between two polls."""

    now: float
    """The ``now`` this poll was taken at."""
    metric_records: range
    """Indices of the metrics records appended (see :meth:`MetricStore.series` ``start``)."""
    metric_keys: tuple[str, ...]
    """Metric names with new points, sorted."""
    records: Mapping[str, tuple[StreamRecord, ...]]
    """Telemetry stream -> its new records; only streams with some."""
    newest_write: float | None
    """Latest modification time among the dump files and stream files seen."""
    data_age: float | None
    """``now - newest_write`` (None before anything was written); negative under clock skew."""
    meta: RunMeta | None
    """meta.json as currently known."""
    attempt_start: float | None
    """Start of the current attempt (meta.json ``start_ts``)."""
    attempt_changed: bool
    """Whether the run was resumed since the previous poll (``start_ts`` changed)."""
    open_phases: tuple[Phase, ...]
    """Phases of the current attempt still open at this poll, by start time."""
    problems: tuple[StreamError, ...]
    """Malformed lines (file and byte offset) and unreadable stream files found by this poll."""
    resets: tuple[StreamReset, ...]
    """Stream files found rewritten and read again from byte 0."""
    reset_streams: tuple[str, ...]
    """Streams with a reset: reload them whole rather than appending this delta's records."""

    @property
    def is_empty(self) -> bool:
        """Whether nothing changed (data age aside)."""
        return not (self.metric_records or self.records or self.attempt_changed or self.problems or self.resets)


@dataclass(frozen=True)
class RunState:
    """The followed run as of the last poll."""

    meta: RunMeta | None
    """meta.json as last read."""
    attempt_start: float | None
    """Start of the current attempt."""
    open_phases: tuple[Phase, ...]
    """Phases of the current attempt still open."""
    record_counts: Mapping[str, int]
    """Stream -> records held."""
    time_range: tuple[float, float] | None
    """Earliest and latest time in the records held."""
    newest_write: float | None
    """Latest modification time seen in dump files and streams."""
    malformed_lines: int
    """Malformed stream lines skipped so far."""


class RunFollower:
    """Follows one run directory; call :meth:`poll` from a worker, as often as wanted."""

    def __init__(
        self,
        run_dir: RunDir | Path | str,
        *,
        recent_hours: int | None = None,
        read_hook: ReadHook | None = None,
        parse_workers: int = 0,
        worker_nice: int = 0,
        streams: Sequence[str] | None = None,
    ) -> None:
        self.run_dir = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        """The run directory."""
        self.dashboard = DashboardReader(
            self.run_dir.dashboard_dir,
            recent_hours=recent_hours,
            read_hook=read_hook,
            parse_workers=parse_workers,
            worker_nice=worker_nice,
            streams=streams,
        )
        """The telemetry streams (query windows and metrics through it)."""
        self.phases: HourStore | None = (
            None
            if "phases" in self.dashboard.streams
            else HourStore(
                self.run_dir.dashboard_dir, "phases", keep_columns=False, workers=parse_workers, nice=worker_nice
            )
        )
        """When the reader does not follow ``phases``: every hour of it as digests (open markers, the stall rule)."""
        self.gpu_newest: HourStore | None = (
            None
            if "gpu_util" in self.dashboard.streams
            else HourStore(self.run_dir.dashboard_dir, "gpu_util", keep_columns=False)
        )
        """When the reader does not follow ``gpu_util``: its newest hour (the run's newest data time)."""
        self._lock = threading.Lock()
        self._hours_found: dict[str, bool] = {}
        """What :meth:`has_hours` answered last, per stream (its answer while a poll holds the lock)."""
        self._newest_step_write: float | None = None
        """The newest step-file write, as the step follower's caller reports it (:meth:`note_step_write`)."""
        self._open: dict[tuple[object, ...], Phase] = {}  # open markers of the current attempt, by Phase.key
        self._attempt_start: float | None = None
        self._newest_write: float | None = None
        self._markers_of: object = None
        """What the open markers were last joined from (phase records held, hours, attempt)."""
        self._open_after_poll: tuple[Phase, ...] = ()
        """The open phases as the last finished poll left them (read without the lock: see :meth:`open_phases`)."""

    @property
    def metrics(self) -> MetricStore:
        """metrics.jsonl, columnar."""
        return self.dashboard.metrics

    def poll(self, now: float) -> RunDelta:
        """Everything that changed since the previous poll (the first poll reports what exists)."""
        with self._lock:
            streams = self.dashboard.poll()
            previous_attempt = self._attempt_start
            meta = streams.meta
            self._attempt_start = meta.start_ts if meta is not None else None
            phase_problems: list[StreamError] = []
            if self.gpu_newest is not None:
                phase_problems += self.gpu_newest.refresh(newest=True)
            if self.phases is not None:
                phase_problems += self.phases.refresh()
                key = (
                    self.phases.records(),
                    self.phases.newest_mtime(),
                    self.phases.count(),
                    self._attempt_start,
                )
                if key != self._markers_of:  # the digests changed: join them again (20k markers a week)
                    self._markers_of = key
                    self._open = {p.key: p for p in self._digest_markers()}
            elif "phases" in streams.reset_streams:  # the reader follows phases: track its records
                self._open.clear()
                self._track_phases(self.dashboard.loaded_records("phases"))
            else:
                self._track_phases(streams.records.get("phases", ()))
            if self._attempt_start is not None:  # markers a dead attempt left open never close
                self._open = {k: p for k, p in self._open.items() if p.t0 >= self._attempt_start}

            stores = [s for s in (self.phases, self.gpu_newest) if s is not None]
            known = [self._newest_step_write, streams.newest_mtime, self._newest_write]
            writes = [t for t in (*known, *(s.newest_mtime() for s in stores)) if t is not None]
            self._newest_write = max(writes, default=None)
            self._open_after_poll = tuple(sorted(self._open.values(), key=lambda p: p.t0))
            return RunDelta(
                now=now,
                metric_records=streams.metric_records,
                metric_keys=streams.metric_keys,
                records=streams.records,
                newest_write=self._newest_write,
                data_age=None if self._newest_write is None else now - self._newest_write,
                meta=meta,
                attempt_start=self._attempt_start,
                attempt_changed=previous_attempt is not None and self._attempt_start != previous_attempt,
                open_phases=self._open_after_poll,
                problems=(*streams.problems, *phase_problems),
                resets=streams.resets,
                reset_streams=streams.reset_streams,
            )

    def note_step_write(self, mtime: float | None) -> None:
        """The newest write among the step files, from whoever follows them (:class:`~miles_tui.core.follow.steps.
        StepFollower`'s caller): the data age then covers both halves of the run."""
        with self._lock:
            if mtime is not None and (self._newest_step_write is None or mtime > self._newest_step_write):
                self._newest_step_write = mtime

    def state(self) -> RunState:
        """The run's telemetry as of the last poll."""
        with self._lock:
            return RunState(
                meta=self.dashboard.meta,
                attempt_start=self._attempt_start,
                open_phases=self._open_after_poll,
                record_counts=self.dashboard.record_counts(),
                time_range=self._time_range(),
                newest_write=self._newest_write,
                malformed_lines=sum(self.dashboard.malformed_counts().values())
                + sum(sum(h.malformed_counts().values()) for h in (self.phases, self.gpu_newest) if h is not None),
            )

    def _time_range(self) -> tuple[float, float] | None:
        """Earliest and latest time of the records read (the reader's, the phase hours', the newest GPU hour's)."""
        stores = (self.phases, self.gpu_newest)
        spans = [s for s in (self.dashboard.time_range(), *(h.span() for h in stores if h is not None)) if s]
        return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None

    def _digest_markers(self) -> list[Phase]:
        assert self.phases is not None
        rows = open_markers(self.phases.phase_digests(), self._attempt_start)
        return [
            Phase(name, t0, OPEN_T1, node, tuple(gpus or ()), rank, role) for name, t0, node, rank, role, gpus in rows
        ]

    def open_phases(self) -> tuple[Phase, ...]:
        """The phases still open as of the last finished poll (none before the first). Never waits: a view drawn
        while a poll holds the follower (a cold start reads every phase hour for seconds) draws what the last poll
        knew, and is drawn again when the poll's records arrive."""
        return self._open_after_poll

    def has_hours(self, stream: str) -> bool:
        """Whether files of ``gpu_util`` or ``phases`` were found, when the follower (not its reader) reads them.
        Never waits: while a poll holds the follower (a cold start reads every phase hour for seconds) it answers
        what it found last, so a UI thread asking which views have data is not held up."""
        if not self._lock.acquire(blocking=False):
            known = self._hours_found.get(stream)
            return known if known is not None else self._hour_files_listed(stream)
        try:
            store = self.gpu_newest if stream == "gpu_util" else self.phases if stream == "phases" else None
            found = store is not None and bool(store.partitions())
            self._hours_found[stream] = found
            return found
        finally:
            self._lock.release()

    def _hour_files_listed(self, stream: str) -> bool:
        """Whether ``stream``'s folder lists an hour file (a directory listing, no lock, nothing read)."""
        try:
            with os.scandir(self.run_dir.dashboard_dir / stream) as entries:
                return any(entry.name.endswith(".jsonl") for entry in entries)
        except OSError:
            return False

    def phase_digests(self) -> list[PhaseDigest]:
        """Every ``phases`` hour's digest (empty when the reader follows ``phases`` itself)."""
        with self._lock:
            return self.phases.phase_digests() if self.phases is not None else []

    def _track_phases(self, records: Iterable[StreamRecord]) -> None:
        for record in records:
            if isinstance(record, Phase):
                if record.is_open:
                    self._open[record.key] = record
                else:
                    self._open.pop(record.key, None)
