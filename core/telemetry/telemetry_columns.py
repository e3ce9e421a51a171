"""A run's ``gpu_util`` and ``phases`` for the GPU view: columns of the hours a window touches, or their summaries.

Contract:

- :class:`TelemetryColumns` reads the two streams through
  :class:`~miles_tui.core.telemetry.hours.store.HourStore` (each hour parsed
  once, ever, with the user cache; memory follows the window asked for, not
  the run). Every call brings the hours it needs up to date first (a file
  that grew is read past what was read; one rewritten is read again).
- :meth:`TelemetryColumns.gpu_samples` hands out the samples of the hours a
  window touches (filter by time when binning); :meth:`~TelemetryColumns.gpu_cells`
  the window's per-lane bucket summaries instead (one row per lane and
  1- or 10-minute bucket, weighted by the samples in it): what a zoomed-out
  view draws, at a cost that follows hours × lanes, never samples.
- :meth:`TelemetryColumns.extent` gives the run's first and newest GPU times
  without reading old hours (an hour not read is bounded by its name).
- Open phase markers are not kept here: the caller passes the open phases (the
  follower tracks them, attempt by attempt) to :meth:`TelemetryColumns.phase_spans`.
- Thread-safe (one lock); meant to be called from a worker thread. Reads no
  clock, never formats, never writes into the run.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import numpy as np

from miles_tui.core.telemetry.gpu_samples import FloatArray, GpuSamples, IntArray, Lane, _hashable
from miles_tui.core.telemetry.hours.columns import CodeArray, Columns, dense_keys
from miles_tui.core.telemetry.hours.gpu_buckets import WIDTHS
from miles_tui.core.telemetry.hours.store import HourStore
from miles_tui.core.telemetry.partitions import HOUR_SECONDS
from miles_tui.core.telemetry.phase_bands import (
    Actor,
    BandKey,
    PhaseSpans,
    PhaseTime,
    pair_ids,
    phase_columns,
    phase_time,
)
from miles_tui.core.telemetry.record_table import TAG_INT
from miles_tui.core.telemetry.stream_records import Phase
from miles_tui.core.telemetry.streams import DashboardReader
from miles_tui.core.telemetry.time_bins import TimeBins

CELL_WIDTHS: Final = WIDTHS
"""Bucket widths a view can draw from (seconds)."""


class TelemetryColumns:
    """See the module docstring."""

    def __init__(self, source: DashboardReader | Path | str, *, workers: int = 0, nice: int = 0) -> None:
        directory = source.directory if isinstance(source, DashboardReader) else Path(source)
        self.directory = directory
        """The run's dashboard folder."""
        self._lock = threading.Lock()
        self._gpu = HourStore(directory, "gpu_util", keep_columns=False, workers=workers, nice=nice)
        self._phases = HourStore(directory, "phases", keep_columns=False, workers=workers, nice=nice)
        self._lanes: dict[Lane, int] = {}
        self._bands: dict[BandKey, int] = {}
        self._actors: dict[Actor, int] = {}
        self._state: tuple[tuple[int, int], tuple[int, int]] = ((-1, -1), (-1, -1))
        """(gpu_util, phases) as last handed out: records held and files known."""

    # -- state ----------------------------------------------------------------------------------------

    @staticmethod
    def _signature(store: HourStore) -> tuple[int, int]:
        return store.records(), store.count()

    def has_news(self) -> bool:
        """Whether the newest hours grew (or hours came or went) since the calls that last handed out samples
        and phases; False while another call holds the columns (the UI thread asks: it never waits)."""
        if not self._lock.acquire(blocking=False):
            return False
        with contextlib.ExitStack() as held:
            held.callback(self._lock.release)
            self._gpu.refresh(newest=True)
            self._phases.refresh(newest=True)
            return (self._signature(self._gpu), self._signature(self._phases)) != self._state

    def time_range(self, *, everything: bool = False) -> tuple[float, float] | None:
        """Earliest and newest GPU sample of the hours read (``everything``: every hour read first)."""
        with self._lock:
            if everything:
                self._gpu.refresh(columns=False)  # the whole run is drawn from the hours' summaries
            else:
                self._gpu.refresh(newest=True)
            return self._gpu.span()

    def extent(self) -> tuple[float, float] | None:
        """(earliest, newest) GPU time of the run without reading old hours: an hour not read yet is bounded by
        its start (a flat file not read yet is read); the newest is the newest hour's newest sample."""
        with self._lock:
            newest = self._newest_span()
            if newest is None:
                return None
            earliest = self._gpu.earliest()
            if earliest is None:  # a flat file nothing bounds but its records
                self._gpu.refresh(columns=False)
                earliest = self._gpu.earliest()
            return (earliest if earliest is not None else newest[0]), newest[1]

    def _newest_span(self) -> tuple[float, float] | None:
        """The span of the hours read once the newest hour holding a sample is among them: the newest file may
        hold none (a writer that opened it and died, a name from a wrong clock), and a stopped run's live window
        ends at its newest sample, not at nothing. Hours are read back one at a time, each once."""
        self._gpu.refresh(newest=True)
        span = self._gpu.span()
        unread = [hour for _, hour, read in self._gpu.partitions() if hour is not None and not read]
        while span is None and unread:
            hour = unread.pop()
            self._gpu.refresh(hour, hour)
            span = self._gpu.span()
        return span

    def hours_read(self, stream: str = "gpu_util") -> list[tuple[float | None, bool]]:
        """(hour, read) of every file of ``gpu_util`` or ``phases`` known, flat file first, then by hour."""
        with self._lock:
            store = self._gpu if stream == "gpu_util" else self._phases
            return [(hour, read) for _, hour, read in store.partitions()]

    # -- samples --------------------------------------------------------------------------------------

    def gpu_samples(self, since: float | None, until: float | None) -> GpuSamples:
        """Samples of the window (every sample without one) and every known lane's newest sample time."""
        with self._lock:
            self._gpu.refresh(since, until)
            self._gpu.refresh(newest=True)
            columns = self._gpu.columns(since, until)
            if since is not None and until is not None:  # a flat file spans every window: hand out the window's
                ts = columns.numbers["ts"]
                columns = columns.take((ts >= since) & (ts <= until))
            self._state = (self._signature(self._gpu), self._state[1])
            lane = self._lane_ids(columns.codes["node"], columns.codes["gpu"], columns.values)
            return GpuSamples(
                lanes=tuple(self._lanes),
                lane=lane,
                ts=columns.numbers["ts"],
                util=_floats(columns, "util"),
                mem_mb=_floats(columns, "mem_mb"),
                last_seen=self._last_seen(),
                power_w=_floats(columns, "power_w"),
            )

    def gpu_cells(self, since: float | None, until: float | None, width: float) -> GpuSamples:
        """The window's bucket summaries of ``width`` seconds (:data:`CELL_WIDTHS`) as weighted samples: one per
        lane and bucket, at the bucket's start, holding the mean of its samples and their count."""
        with self._lock:
            self._gpu.refresh(since, until, columns=False)
            self._gpu.refresh(newest=True)
            self._state = (self._signature(self._gpu), self._state[1])
            cells = self._gpu.buckets(width, since, until)
            table = list(cells.lanes)
            codes = np.array([self._lanes.setdefault(_key(lane), len(self._lanes)) for lane in table], np.int64)
            lane = codes[cells.lane] if cells.cells else np.zeros(0, np.int64)
            stats = cells.stats
            with np.errstate(invalid="ignore", divide="ignore"):
                util = stats["util.sum"] / stats["util.n"]
                mem = stats["mem_mb.sum"] / stats["mem_mb.n"]
                power = stats["power_w.sum"] / stats["power_w.n"]
            return GpuSamples(
                lanes=tuple(self._lanes),
                lane=lane,
                ts=cells.start(),
                util=util,
                mem_mb=mem,
                last_seen=self._last_seen(),
                weight=(stats["util.n"], stats["mem_mb.n"], cells.samples.astype(np.float64)),
                cell=width,
                power_w=power,
                power_n=stats["power_w.n"],
            )

    def _lane_ids(self, node: CodeArray, gpu: CodeArray, values: tuple[Any, ...]) -> IntArray:
        if not len(node):
            return np.zeros(0, np.int64)
        pair = node.astype(np.int64) * (len(values) + 1) + gpu.astype(np.int64)
        unique, inverse = np.unique(pair, return_inverse=True)
        table = self._lanes
        ids = [
            table.setdefault(
                _key((values[int(p) // (len(values) + 1)], values[int(p) % (len(values) + 1)])), len(table)
            )
            for p in unique.tolist()
        ]
        return np.array(ids, np.int64)[inverse.ravel()]

    def _last_seen(self) -> FloatArray:
        """Per lane id: its newest sample time in the hours read (NaN: none)."""
        seen = {_key(lane): t for lane, t in self._gpu.lane_last_seen().items()}
        for lane in seen:
            self._lanes.setdefault(lane, len(self._lanes))
        out = np.full(len(self._lanes), np.nan)
        for lane, t in seen.items():
            out[self._lanes[lane]] = t
        return out

    # -- phases ---------------------------------------------------------------------------------------

    def phase_spans(self, since: float | None, until: float | None, open_phases: Iterable[Phase]) -> PhaseSpans:
        """Closed phases of the hours the window touches (a phase is filed by its end: later hours too) that
        overlap it, plus ``open_phases`` (t1 NaN)."""
        with self._lock:
            later = None if until is None else until + HOUR_SECONDS
            self._seed_phase_keys()
            self._phases.refresh(since, later)
            self._phases.refresh(newest=True)
            self._state = (self._state[0], self._signature(self._phases))
            columns = self._phases.columns(since, later)
            t0, t1 = columns.numbers["t0"], columns.numbers["t1"]
            keep = t1 != -1
            if since is not None:
                keep &= t1 >= since
            if until is not None:
                keep &= t0 <= until
            closed = columns.take(keep)
            # ids numbered over every closed record of the hours read, in file order (as a table filled record by
            # record would): the bands keep their order whichever window is asked for first
            band, actor = self._phase_keys(columns.take(t1 != -1))
            band, actor = band[keep[t1 != -1]], actor[keep[t1 != -1]]
            still = [p for p in open_phases if p.is_open]
            open_band, open_actor, open_t0, open_t1 = phase_columns(still, self._bands, self._actors)
            return PhaseSpans(
                bands=tuple(self._bands),
                actors=tuple(self._actors),
                band=np.concatenate([band, open_band]),
                actor=np.concatenate([actor, open_actor]),
                t0=np.concatenate([closed.numbers["t0"], open_t0]),
                t1=np.concatenate([closed.numbers["t1"], open_t1]),
            )

    def phase_cells(
        self, bins: TimeBins, width: float, open_phases: Iterable[Phase], now: float
    ) -> tuple[PhaseSpans, PhaseTime]:
        """The phase rows of a zoomed-out window from the hours' covers of ``width`` seconds (``bins`` made of
        whole buckets): the seconds each rank spent in each phase per bin, exact at that resolution, plus
        ``open_phases`` counted up to ``now``. The spans returned hold only the open phases (and the tables)."""
        with self._lock:
            self._seed_phase_keys()
            self._phases.refresh(bins.since, None, columns=False)
            still = [p for p in open_phases if p.is_open]
            open_band, open_actor, open_t0, open_t1 = phase_columns(still, self._bands, self._actors)
            actor_parts, band_parts, bin_parts, second_parts = [], [], [], []
            for cover in self._phases.phase_covers(width, bins.since):
                if not cover.pairs:
                    continue
                bands = np.array([self._bands.setdefault((p[0], p[1]), len(self._bands)) for p in cover.pairs])
                actors = np.array(
                    [self._actors.setdefault((p[2], _hashable(p[3]), p[4]), len(self._actors)) for p in cover.pairs]
                )
                start = cover.bucket.astype(np.float64) * width
                inside = (start >= bins.since) & (start < bins.until)
                where = np.minimum(((start[inside] - bins.since) // bins.width).astype(np.int64), bins.count - 1)
                actor_parts.append(actors[cover.pair[inside]])
                band_parts.append(bands[cover.pair[inside]])
                bin_parts.append(where)
                second_parts.append(cover.seconds[inside])
            spans = PhaseSpans(tuple(self._bands), tuple(self._actors), open_band, open_actor, open_t0, open_t1)
            opened = phase_time(spans, bins, now)
            per = max(len(self._bands), 1)
            closed_keys = np.concatenate(
                [a * per + b for a, b in zip(actor_parts, band_parts, strict=True)] or [np.zeros(0, np.int64)]
            )
            keys, which = pair_ids(
                np.concatenate([closed_keys, opened.actor * per + opened.band]), len(self._actors) * per
            )
            seconds = np.zeros((len(keys), bins.count))
            closed_which = which[: len(closed_keys)]
            if len(closed_keys):
                flat = closed_which * bins.count + np.concatenate(bin_parts)
                seconds += np.bincount(flat, weights=np.concatenate(second_parts), minlength=seconds.size).reshape(
                    seconds.shape
                )
            open_which = which[len(closed_keys) :]
            seconds[open_which] += opened.seconds
            is_open = np.zeros(len(keys), bool)
            is_open[open_which[opened.open]] = True
            return spans, PhaseTime(keys // per, keys % per, seconds, is_open)

    def _seed_phase_keys(self) -> None:
        """Number the bands and actors of the run's first hour first, in file order: their order (the legend's)
        is then the run's own (rollout, train_wait, actor_train ...), whichever window is asked for first."""
        if self._bands:
            return
        self._phases.refresh(newest=True)  # lists the files
        hours = [hour for _, hour, _ in self._phases.partitions() if hour is not None]
        first = min(hours, default=None)
        self._phases.refresh(first, first)
        columns = self._phases.columns(first, first)
        self._phase_keys(columns.take(columns.numbers["t1"] != -1))

    def _phase_keys(self, closed: Columns) -> tuple[IntArray, IntArray]:
        """Band and actor ids of closed phase rows, through their codes (one dict lookup per distinct key)."""
        if not closed.size:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        values, codes = closed.values, closed.codes
        role, name, node, rank, gpus = (codes[f] for f in ("role", "name", "node", "rank", "gpus"))
        bands = _first_sight(dense_keys(role, name), lambda row: (values[role[row]], values[name[row]]), self._bands)
        actors = _first_sight(
            dense_keys(node, rank, gpus),
            lambda row: (values[node[row]], _hashable(values[rank[row]]), tuple(values[gpus[row]] or ())),
            self._actors,
        )
        return bands, actors


def _first_sight(keys: IntArray, value: Callable[[int], Any], table: dict[Any, int]) -> IntArray:
    """Each row's id in ``table`` of ``value(first row of its key)``, new values numbered in order of first
    sight (as a dict filled row by row would), one lookup per distinct key."""
    unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    ids = np.empty(len(unique), np.int64)
    for index in np.argsort(first, kind="stable").tolist():
        ids[index] = table.setdefault(value(int(first[index])), len(table))
    return ids[inverse.ravel()]


def _key(lane: tuple[Any, Any]) -> Lane:
    return (_hashable(lane[0]), _hashable(lane[1]))


def _floats(columns: Columns, field: str) -> FloatArray:
    """A numeric field as float64, NaN where the value is not a number."""
    values, tags = columns.numbers[field], columns.tags[field]
    return np.where(tags <= TAG_INT, values, np.nan)
