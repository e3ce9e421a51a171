"""Columnar copies of a run's ``gpu_util`` and ``phases`` streams, kept up to date partition by partition.

Contract:

- :class:`TelemetryColumns` follows a :class:`~miles_tui.core.telemetry.streams.DashboardReader`
  without polling it (the app's poll worker does that). Each call converts only
  what the reader parsed since the previous call: per partition file, the records
  past the count converted before, asked of the reader by position. A partition
  whose records were replaced (a new generation: the file was rewritten) is
  converted again; a vanished one is dropped. A call that finds every
  partition's count unchanged converts nothing.
- A window that needs hours the reader has not parsed yet has the reader parse
  them (:meth:`DashboardReader.parse` with that window), never hours outside it.
- Open phase markers are not kept here: the caller passes the open phases (the
  follower tracks them, attempt by attempt) to :meth:`TelemetryColumns.phase_spans`.
- Thread-safe (one lock); meant to be called from a worker thread. Reads no
  clock, touches files only through the reader, never formats.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from miles_tui.core.telemetry.gpu_samples import FloatArray, GpuSamples, Lane, gpu_columns, last_seen
from miles_tui.core.telemetry.partitions import PartitionInfo
from miles_tui.core.telemetry.phase_bands import Actor, BandKey, PhaseSpans, phase_columns
from miles_tui.core.telemetry.stream_records import Phase, StreamRecord
from miles_tui.core.telemetry.streams import DashboardReader

SYNC_TRIES: Final = 4
"""A partition rewritten between a sync's listing and its read is detected and the sync retried this many times."""

Columns = tuple[np.ndarray[Any, Any], ...]


@dataclass
class _Chunk:
    """The converted records of one partition file."""

    count: int
    """Records converted."""
    generation: int
    """The partition's generation they came from (a rewritten file has a new one)."""
    columns: Columns
    """The arrays, one row per kept record."""
    lo: float = np.inf
    """Earliest time in it."""
    hi: float = -np.inf
    """Latest time in it."""
    extra: list[FloatArray] = field(default_factory=list)
    """Per stream: gpu_util keeps each lane's newest sample time here."""


class _Stream:
    """One stream's chunks and the conversion that fills them."""

    def __init__(
        self, reader: DashboardReader, stream: str, convert: Callable[[Sequence[StreamRecord], int], _Chunk]
    ) -> None:
        self.reader = reader
        self.stream = stream
        self.convert = convert
        self.chunks: dict[str, _Chunk] = {}
        self.order: list[str] = []
        self.seen: tuple[PartitionInfo, ...] = ()

    def ensure(self, since: float | None, until: float | None) -> None:
        """Have the reader parse the partitions the window touches that it has not parsed yet."""
        self.reader.parse(self.stream, since, until)

    def sync(self, merge: Callable[[_Chunk, _Chunk], _Chunk]) -> None:
        """Convert what the reader parsed since the last sync."""
        for _ in range(SYNC_TRIES):
            infos = self.reader.partitions(self.stream)
            if infos == self.seen:
                return
            chunks = self._convert(infos, merge)
            if chunks is not None:
                self.chunks, self.order, self.seen = chunks, list(chunks), infos
                return
        # rewritten under our feet every time: keep the previous (consistent) copy until the next call

    def _convert(
        self, infos: Sequence[PartitionInfo], merge: Callable[[_Chunk, _Chunk], _Chunk]
    ) -> dict[str, _Chunk] | None:
        """The chunks for ``infos``, reusing what is converted; None when a partition changed since listed."""
        chunks: dict[str, _Chunk] = {}
        for info in infos:
            if not info.loaded:
                continue
            key, n = str(info.path), info.records
            old = self.chunks.get(key)
            start = old.count if old is not None and old.generation == info.generation and old.count <= n else 0
            if old is not None and start == n and old.generation == info.generation:
                chunks[key] = old
                continue
            records = self.reader.partition_records(self.stream, info.path, info.generation, start, n)
            if records is None:
                return None
            new = self.convert(records, info.generation)
            chunks[key] = merge(old, new) if old is not None and start else new
        return chunks

    def overlapping(self, since: float | None, until: float | None) -> list[_Chunk]:
        return [
            c for c in (self.chunks[k] for k in self.order)
            if c.columns and len(c.columns[0]) and (since is None or c.hi >= since) and (until is None or c.lo <= until)
        ]  # fmt: skip


def _concat(chunks: Sequence[_Chunk], index: int, dtype: type[Any]) -> np.ndarray[Any, Any]:
    parts = [c.columns[index] for c in chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


class TelemetryColumns:
    """gpu_util and closed phases of a followed run as columns; see the module docstring."""

    def __init__(self, reader: DashboardReader) -> None:
        self.reader = reader
        """The reader followed (polled by someone else)."""
        self._lock = threading.Lock()
        self._lanes: dict[Lane, int] = {}
        self._bands: dict[BandKey, int] = {}
        self._actors: dict[Actor, int] = {}
        self._gpu = _Stream(reader, "gpu_util", self._convert_gpu)
        self._phases = _Stream(reader, "phases", self._convert_phases)

    # -- conversion ---------------------------------------------------------------------------------------

    def _convert_gpu(self, records: Sequence[StreamRecord], generation: int) -> _Chunk:
        lane, ts, util, mem = gpu_columns(records, self._lanes)
        chunk = _Chunk(len(records), generation, (lane, ts, util, mem))
        if len(ts):
            chunk.lo, chunk.hi = float(ts.min()), float(ts.max())
        chunk.extra = [last_seen(lane, ts, len(self._lanes))]
        return chunk

    def _convert_phases(self, records: Sequence[StreamRecord], generation: int) -> _Chunk:
        closed = [r for r in records if isinstance(r, Phase) and not r.is_open]
        band, actor, t0, t1 = phase_columns(closed, self._bands, self._actors)
        chunk = _Chunk(len(records), generation, (band, actor, t0, t1))
        if len(t0):
            chunk.lo, chunk.hi = float(t0.min()), float(t1.max())
        return chunk

    @staticmethod
    def _merge(old: _Chunk, new: _Chunk) -> _Chunk:
        columns = tuple(np.concatenate([a, b]) for a, b in zip(old.columns, new.columns, strict=True))
        merged = _Chunk(old.count + new.count, new.generation, columns, min(old.lo, new.lo), max(old.hi, new.hi))
        if old.extra and new.extra:
            merged.extra = [_fmax(old.extra[0], new.extra[0])]
        return merged

    # -- queries ------------------------------------------------------------------------------------------

    def has_news(self) -> bool:
        """Whether the reader holds gpu_util or phases records not converted yet (touches no record)."""
        with self._lock:
            gpu, phases = self._gpu, self._phases
            return (
                self.reader.partitions(gpu.stream) != gpu.seen or self.reader.partitions(phases.stream) != phases.seen
            )

    def time_range(self, *, everything: bool = False) -> tuple[float, float] | None:
        """Earliest and newest gpu_util sample converted (``everything``: have the reader parse every hour first)."""
        with self._lock:
            if everything:
                self._gpu.ensure(None, None)
            self._gpu.sync(self._merge)
            spans = [(c.lo, c.hi) for c in self._gpu.overlapping(None, None)]
            return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None

    def extent(self) -> tuple[float, float] | None:
        """(earliest, newest) time of the run's gpu_util without parsing old hours: the earliest is the first
        sample converted, or the start of an earlier hour the reader has not parsed yet (its first sample is
        no earlier); the newest is the newest sample converted."""
        with self._lock:
            unread = [i.hour for i in self.reader.partitions(self._gpu.stream) if not i.loaded]
            if None in unread:  # a flat file not parsed: nothing bounds it but its records
                self._gpu.ensure(None, None)
            self._gpu.sync(self._merge)
            spans = [(c.lo, c.hi) for c in self._gpu.overlapping(None, None)]
            if not spans:
                return None
            hours = [hour for hour in unread if hour is not None]
            return min([*hours, *(s[0] for s in spans)]), max(s[1] for s in spans)

    def gpu_samples(self, since: float | None, until: float | None) -> GpuSamples:
        """Samples of the partitions overlapping the window (filter by time when binning) and every lane's newest."""
        with self._lock:
            self._gpu.ensure(since, until)
            self._gpu.sync(self._merge)
            chunks = self._gpu.overlapping(since, until)
            lanes = len(self._lanes)
            newest = np.full(lanes, np.nan)
            for chunk in self._gpu.chunks.values():
                if chunk.extra:
                    newest = _fmax(newest, chunk.extra[0])
            return GpuSamples(
                lanes=tuple(self._lanes),
                lane=_concat(chunks, 0, np.int64),
                ts=_concat(chunks, 1, np.float64),
                util=_concat(chunks, 2, np.float64),
                mem_mb=_concat(chunks, 3, np.float64),
                last_seen=newest,
            )

    def phase_spans(self, since: float | None, until: float | None, open_phases: Iterable[Phase]) -> PhaseSpans:
        """Closed phases of the partitions overlapping the window, plus ``open_phases`` (t1 NaN)."""
        with self._lock:
            self._phases.ensure(since, None)  # a phase is filed by its end: later hours may hold this window's
            self._phases.sync(self._merge)
            chunks = self._phases.overlapping(since, until)
            still = [p for p in open_phases if p.is_open]
            band, actor, t0, t1 = phase_columns(still, self._bands, self._actors)
            return PhaseSpans(
                bands=tuple(self._bands),
                actors=tuple(self._actors),
                band=np.concatenate([_concat(chunks, 0, np.int64), band]),
                actor=np.concatenate([_concat(chunks, 1, np.int64), actor]),
                t0=np.concatenate([_concat(chunks, 2, np.float64), t0]),
                t1=np.concatenate([_concat(chunks, 3, np.float64), t1]),
            )


def _fmax(a: FloatArray, b: FloatArray) -> FloatArray:
    """Elementwise max ignoring NaN, the shorter array padded with NaN."""
    size = max(len(a), len(b))
    a = np.concatenate([a, np.full(size - len(a), np.nan)])
    b = np.concatenate([b, np.full(size - len(b), np.nan)])
    return np.fmax(a, b)
