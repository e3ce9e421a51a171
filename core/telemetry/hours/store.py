"""One partitioned telemetry stream of a run, read as columns, each file once: from the cache, then only new bytes.

Contract:

- :class:`HourStore` follows the files of one stream of :data:`~.columns.SPECS`
  (``{stream}/{YYYYMMDD_HH}.jsonl`` hours and an older flat ``{stream}.jsonl``,
  which reads as one partition covering all time). :meth:`HourStore.refresh`
  lists them and brings the partitions asked for up to date: all of them, the
  ones a time window touches, or the newest only. Nothing else is read: a
  partition outside the request is known by its name, never opened.
- A partition is restored from its cache entry (:mod:`.cache`) when the entry
  still covers the file's bytes, then followed with the tail rule
  (:class:`~miles_tui.core.base.tail.TailFile`: complete lines only, rewrites reset
  it); only the bytes after what is known are decoded (:func:`.columns.decode`).
  A partition that grew is saved again once it grew by :data:`RESAVE_BYTES` (or
  an eighth), or at once when settled (an hour before its stream's newest).
- ``gpu_util`` partitions also hold their bucket summaries
  (:mod:`.gpu_buckets`, cached with the hour); with ``keep_columns=False`` their
  raw columns are dropped once summarised and read again (from the cache) only
  when a window asks for them, so memory follows the window, not the run.
- Problems are values: malformed lines (file and offset) and unreadable files
  come back from :meth:`refresh`, each once. Not thread-safe: one caller at a
  time (the caller's lock). Never writes into the run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from miles_tui.core.base.dir_listing import FolderListing
from miles_tui.core.base.errors import StreamError
from miles_tui.core.base.run_files import os_error_message
from miles_tui.core.base.tail import MalformedLineError, ReadHook, TailFile
from miles_tui.core.telemetry.hours import cache
from miles_tui.core.telemetry.hours.columns import Columns, concat, empty
from miles_tui.core.telemetry.hours.decode import decode
from miles_tui.core.telemetry.hours.engine_columns import engine_table
from miles_tui.core.telemetry.hours.engine_digest import EngineDigest, engine_digest
from miles_tui.core.telemetry.hours.engine_digest import from_cache as engines_from_cache
from miles_tui.core.telemetry.hours.gpu_buckets import WIDTHS, GpuBuckets, from_arrays, hour_buckets, merge
from miles_tui.core.telemetry.hours.phase_cover import PhaseCover, hour_covers
from miles_tui.core.telemetry.hours.phase_cover import from_cache as cover_from_cache
from miles_tui.core.telemetry.hours.phase_digest import PhaseDigest, from_cache, phase_digest
from miles_tui.core.telemetry.partitions import HOUR_SECONDS, hour_of, hour_overlaps

SETTLED_EVERY: Final = 16
"""An hour two or more behind its stream's newest is stat'ed on every this-many-th refresh only."""

HOT_PARTS: Final = 4
"""Partitions whose columns are kept after a window read them back (a live view asks again every few seconds)."""

RESAVE_BYTES: Final = 8 << 20
"""A followed partition's cache entry is rewritten after this many new bytes (or an eighth of what it covers)."""

GPU_STREAM: Final = "gpu_util"
PHASE_STREAM: Final = "phases"
ENGINE_STREAM: Final = "engine_series"


def _prefixed(arrays: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


@dataclass
class _Part:
    path: Path
    hour: float | None
    tail: TailFile[Columns]
    columns: Columns | None = None
    """The records known (None: dropped from memory, in the cache)."""
    size: int = 0
    """Records known."""
    span: tuple[float, float] | None = None
    buckets: dict[float, GpuBuckets] = field(default_factory=dict)
    digest: PhaseDigest | None = None
    """A ``phases`` partition's digest for the stall rule."""
    engines: EngineDigest | None = None
    """An ``engine_series`` partition's digest for the engine rules."""
    covers: dict[float, PhaseCover] = field(default_factory=dict)
    """A ``phases`` partition's seconds per rank, phase and bucket (zoomed-out phase rows)."""
    restored: bool = False
    """Whether its cache entry was looked for."""
    polled: bool = False
    """Whether its file was followed at least once."""
    saved_end: int = 0
    malformed: list[tuple[int, str]] = field(default_factory=list)
    malformed_count: int = 0
    end: int = 0

    def overlaps(self, since: float | None, until: float | None) -> bool:
        return hour_overlaps(self.hour, since, until)


class HourStore:
    """See the module docstring."""

    def __init__(
        self,
        dashboard: Path | str,
        stream: str,
        *,
        keep_columns: bool = True,
        read_hook: ReadHook | None = None,
        workers: int = 0,
        nice: int = 0,
        save_columns: bool = True,
    ) -> None:
        self.dashboard = Path(dashboard)
        self.stream = stream
        self.keep_columns = keep_columns
        self.save_columns = save_columns
        """Whether an hour's cache entry holds its columns beside its summaries (``report``, which reads only the
        summaries, saves those alone: a view that reads an hour's columns reads the file once more)."""
        self.workers = workers
        """Processes that read hours no cache entry covers, when there are many (0: this process alone)."""
        self.nice = nice
        """Their niceness (the monitor's keys come first)."""
        self._read_hook = read_hook
        self._parts: dict[str, _Part] = {}
        self._ordered: list[_Part] = []
        """:attr:`_parts` with the flat file first, then by hour (sorted again only when the files change)."""
        self._listing = FolderListing()
        self._said: set[str] = set()
        self._refreshes = 0
        self._hot: dict[Path, tuple[int, Columns]] = {}
        """The last :data:`HOT_PARTS` partitions' columns read back from the cache (path -> (end, columns))."""

    # -- listing ---------------------------------------------------------------------------------------------

    def _list(self, problems: list[StreamError]) -> list[_Part]:
        found: dict[str, float | None] = {}
        flat = self.dashboard / f"{self.stream}.jsonl"
        if flat.is_file():
            found[str(flat)] = None
        folder = self.dashboard / self.stream
        try:
            for entry in self._listing.entries(folder):  # listed again only when the folder changed
                hour = hour_of(entry.name)
                if hour is not None:
                    found[entry.path] = hour
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as err:
            if str(folder) not in self._said:
                self._said.add(str(folder))
                problems.append(StreamError(f"{os_error_message(folder, err)}; the stream is skipped", folder))
        if found.keys() != self._parts.keys():
            for gone in set(self._parts) - set(found):
                del self._parts[gone]
            for path, hour in found.items():
                if path not in self._parts:
                    self._parts[path] = self._part(Path(path), hour)
            self._ordered = sorted(self._parts.values(), key=lambda p: -1.0 if p.hour is None else p.hour)
        return list(self._ordered)

    def _part(self, path: Path, hour: float | None) -> _Part:
        tail: TailFile[Columns] = TailFile(path, _unused, read_hook=self._read_hook, decode_block=self._decoder(path))
        return _Part(path, hour, tail)

    def _decoder(self, path: Path) -> Any:
        stream = self.stream

        def decode_block(block: bytes, base: int) -> tuple[list[Columns], list[MalformedLineError]]:
            columns, bad = decode(stream, block, base, path)
            return [columns], bad

        return decode_block

    def partitions(self) -> list[tuple[Path, float | None, bool]]:
        """(file, hour, read) of every partition known, flat file first, then by hour."""
        return [(p.path, p.hour, p.restored) for p in self._ordered]

    def count(self) -> int:
        """Partitions known (as :meth:`partitions` lists them)."""
        return len(self._parts)

    # -- reading ---------------------------------------------------------------------------------------------

    def refresh(
        self, since: float | None = None, until: float | None = None, *, newest: bool = False, columns: bool = True
    ) -> list[StreamError]:
        """List the files; bring those asked for up to date (the window [since, until], or the newest hour and
        the flat file with ``newest``); return the problems found in them since the last refresh. Without
        ``columns`` (a caller that reads the hours' summaries only: a whole-run view) the hours handed to workers
        are cached as summaries alone; their columns are read again if a window asks."""
        problems: list[StreamError] = []
        parts = self._list(problems)
        if newest:
            hours = [p for p in parts if p.hour is not None]
            wanted = [p for p in parts if p.hour is None] + hours[-1:]
        else:
            wanted = [p for p in parts if p.overlaps(since, until)]
        settled_before = parts[-1].hour if parts and parts[-1].hour is not None else None
        self._read_ahead(wanted, columns)
        self._refreshes += 1
        check_settled = self._refreshes % SETTLED_EVERY == 1
        for part in wanted:
            behind = settled_before is not None and part.hour is not None and part.hour < settled_before - HOUR_SECONDS
            if part.polled and behind and not check_settled:
                continue  # writers move on with the clock: an hour two behind the newest is looked at now and then
            self._sync(
                part,
                problems,
                settled=settled_before is not None and part.hour is not None and part.hour < settled_before,
            )
        return problems

    def _read_ahead(self, wanted: Sequence[_Part], columns: bool = True) -> None:
        """Hours not read yet that no cache entry covers, when they are many bytes: read by worker processes,
        each saving its hour's entry, which the caller then restores like any other."""
        if self.workers >= 2:
            from miles_tui.core.telemetry.hours.hour_workers import read_in_workers  # it starts stores itself

            read_in_workers([(self, self._unread(wanted))], self.workers, self.nice, self.save_columns and columns)

    def _unread(self, wanted: Sequence[_Part]) -> list[_Part]:
        """Of ``wanted``, restore those not restored yet; the ones no cache entry covered."""
        fresh = []
        for part in wanted:
            if not part.restored:
                part.restored = True
                self._restore(part)
                if part.end == 0:
                    fresh.append(part)
        return fresh

    def unread_parts(self) -> list[_Part]:
        """Every partition listed now, restored from the cache where an entry covers it; those none covered (for
        :func:`~.hour_workers.refreshing_together`)."""
        return self._unread(self._list([]))

    def _sync(self, part: _Part, problems: list[StreamError], *, settled: bool) -> None:
        if not part.restored:
            part.restored = True
            self._restore(part)
        chunks: list[Columns] = []

        def consume(batch: Sequence[Columns]) -> None:
            chunks.extend(batch)

        def on_reset() -> None:
            part.columns, part.size, part.span, part.buckets = empty(self.stream), 0, None, {}
            part.digest, part.engines, part.covers = None, None, {}
            part.malformed, part.malformed_count, part.saved_end, part.end = [], 0, 0, 0
            chunks.clear()

        read = part.tail.poll(consume, on_reset)
        part.polled = True
        if read.error is not None:
            problems.append(read.error)
        for bad in read.malformed:
            part.malformed_count += 1
            if len(part.malformed) < cache.KEPT_MALFORMED:
                part.malformed.append((bad.offset or 0, bad.reason))
            problems.append(bad)
        if chunks:
            known = self._columns(part)  # what was known before this poll (part.end is still its end)
            part.columns = concat([known, *chunks], self.stream)
            part.size = part.columns.size
            part.span = part.columns.span()
            if self.stream == GPU_STREAM:
                part.buckets = hour_buckets(part.columns)
            if self.stream == PHASE_STREAM:
                part.digest = phase_digest(part.columns)
                part.covers = hour_covers(part.columns, WIDTHS)
            if self.stream == ENGINE_STREAM:
                part.engines = engine_digest(engine_table(part.columns))
        part.end = part.tail.offset
        if part.end > part.saved_end and (
            settled or part.end - part.saved_end >= max(RESAVE_BYTES, part.saved_end // 8)
        ):
            self._save(part)
        if not self.keep_columns and part.columns is not None and part.saved_end == part.end:
            part.columns = None  # the cache holds them; an hour not saved yet (the newest) stays in memory

    def _restore(self, part: _Part) -> None:
        entry = cache.load(part.path, self.stream, with_columns=self.keep_columns)
        if entry is None:
            return
        part.columns, part.size, part.span = entry.columns, entry.size, entry.span
        part.malformed, part.malformed_count = list(entry.malformed), entry.malformed_count
        part.saved_end = part.end = entry.end
        try:
            if self.stream == GPU_STREAM:
                lanes = entry.extra_meta["lanes"]
                part.buckets = {w: from_arrays(w, lanes, _prefixed(entry.extra, f"{w:g}:")) for w in WIDTHS}
            if self.stream == PHASE_STREAM:
                part.digest = from_cache(_prefixed(entry.extra, "p:"), entry.extra_meta["phases"])
                part.covers = {
                    w: cover_from_cache(w, _prefixed(entry.extra, f"c{w:g}:"), entry.extra_meta["covers"][f"{w:g}"])
                    for w in WIDTHS
                }
            if self.stream == ENGINE_STREAM:
                part.engines = engines_from_cache(_prefixed(entry.extra, "e:"), entry.extra_meta["engines"])
        except (KeyError, ValueError, TypeError, IndexError):  # an entry without its summaries: read the file
            part.columns, part.size, part.span, part.buckets, part.digest = None, 0, None, {}, None
            part.engines, part.covers = None, {}
            part.malformed, part.malformed_count, part.saved_end, part.end = [], 0, 0, 0
            return
        part.tail.resume(entry.end, entry.ino)

    def _save(self, part: _Part) -> None:
        columns = self._columns(part)
        try:
            ino = os.stat(part.path).st_ino
        except OSError:
            return
        entry = cache.Entry(
            columns, columns.size, columns.span(), part.end, ino, tuple(part.malformed), part.malformed_count, {}, {}
        )
        extra: dict[str, Any] = {}
        meta: dict[str, Any] = {}
        if self.stream == GPU_STREAM and part.buckets:
            for width, buckets in part.buckets.items():
                extra.update({f"{width:g}:{k}": v for k, v in buckets.arrays().items()})
            meta["lanes"] = [list(lane) for lane in part.buckets[WIDTHS[0]].lanes]
        if self.stream == PHASE_STREAM and part.digest is not None:
            arrays, meta["phases"] = part.digest.to_cache()
            extra.update({f"p:{k}": v for k, v in arrays.items()})
            meta["covers"] = {}
            for width, cover in part.covers.items():
                arrays, meta["covers"][f"{width:g}"] = cover.to_cache()
                extra.update({f"c{width:g}:{k}": v for k, v in arrays.items()})
        if self.stream == ENGINE_STREAM and part.engines is not None:
            arrays, meta["engines"] = part.engines.to_cache()
            extra.update({f"e:{k}": v for k, v in arrays.items()})
        if cache.save(part.path, entry, extra=extra, extra_meta=meta, columns=self.save_columns):
            part.saved_end = part.end

    def _columns(self, part: _Part) -> Columns:
        """The records known of a partition, from the cache when they were dropped from memory."""
        if part.columns is not None:
            return part.columns
        if not part.end:
            return empty(self.stream)
        hot = self._hot.pop(part.path, None)
        if hot is not None and hot[0] == part.end:
            self._hot[part.path] = hot  # most recent last
            return hot[1]
        entry = cache.load(part.path, self.stream)
        if entry is not None and entry.end == part.end and entry.columns is not None:
            self._keep_hot(part, entry.columns)
            return entry.columns
        # not (or no longer) cached: read the file again, and cache its columns when it still ends where it did
        tail: TailFile[Columns] = TailFile(part.path, _unused, decode_block=self._decoder(part.path))
        chunks: list[Columns] = []
        tail.poll(chunks.extend)
        columns = concat(chunks, self.stream)
        if tail.offset == part.end:
            self._keep_hot(part, columns)
            if self.save_columns and part.saved_end == part.end:  # its summaries are saved: add its columns
                part.columns = columns
                self._save(part)
                part.columns = None if not self.keep_columns else columns
        return columns

    def _keep_hot(self, part: _Part, columns: Columns) -> None:
        """Remember a partition's columns read back, the :data:`HOT_PARTS` most recent only."""
        self._hot[part.path] = (part.end, columns)
        while len(self._hot) > HOT_PARTS:
            self._hot.pop(next(iter(self._hot)))

    # -- answers ---------------------------------------------------------------------------------------------

    def columns(self, since: float | None = None, until: float | None = None) -> Columns:
        """The records of the partitions refreshed so far that the window touches (the whole of each: filter
        by time yourself), in partition order."""
        parts = self._ordered
        chosen = [p for p in parts if p.restored and p.overlaps(since, until) and self._samples_in(p, since, until)]
        return concat([self._columns(p) for p in chosen], self.stream)

    def _samples_in(self, part: _Part, since: float | None, until: float | None) -> bool:
        """Whether a ``gpu_util`` file read so far holds a sample of [since, until], by its records' span: a flat
        legacy file spans every window by name, and its 460k rows were joined to every 15 min view. Point samples
        only: a phase (an interval) or a process snapshot (the nearest one is asked for) is kept by name."""
        if self.stream != "gpu_util" or part.span is None:
            return True
        first, last = part.span
        return (since is None or last >= since) and (until is None or first <= until)

    def buckets(self, width: float, since: float | None = None, until: float | None = None) -> GpuBuckets:
        """``gpu_util``'s bucket summaries of the partitions refreshed so far that the window touches."""
        parts = self._ordered
        return merge([p.buckets[width] for p in parts if p.restored and p.buckets and p.overlaps(since, until)], width)

    def lane_last_seen(self) -> dict[tuple[Any, Any], float]:
        """``gpu_util``: each lane's newest sample time over the partitions refreshed so far."""
        seen: dict[tuple[Any, Any], tuple[tuple[Any, Any], float]] = {}
        for part in self._parts.values():
            buckets = part.buckets.get(WIDTHS[0]) if part.restored else None
            if buckets is None:
                continue
            for lane, t in zip(buckets.lanes, buckets.last_seen.tolist(), strict=True):
                key = (lane[0], (type(lane[1]).__name__, lane[1]))
                if key not in seen or t > seen[key][1]:
                    seen[key] = (lane, t)
        return dict(seen.values())

    def phase_covers(self, width: float, since: float | None = None) -> list[PhaseCover]:
        """``phases``' covers of ``width`` of the partitions refreshed so far that may hold time after ``since``
        (a phase is filed by its end hour)."""
        parts = self._ordered
        return [p.covers[width] for p in parts if p.covers and p.overlaps(since, None)]

    def engine_digests(self) -> list[EngineDigest]:
        """``engine_series``' digests of the partitions refreshed so far, in partition order."""
        parts = self._ordered
        return [p.engines for p in parts if p.engines is not None]

    def phase_digests(self) -> list[PhaseDigest]:
        """``phases``' digests of the partitions refreshed so far, in partition order."""
        parts = self._ordered
        return [p.digest for p in parts if p.digest is not None]

    def earliest(self) -> float | None:
        """The earliest time of the stream without reading an hour: an hour read gives its first record's time,
        one not read its start (its first record is no earlier); a flat file not read, nothing (None)."""
        times = []
        for part in self._parts.values():
            if part.restored and part.span is not None:
                times.append(part.span[0])
            elif not part.restored:
                if part.hour is None:
                    return None
                times.append(part.hour)
        return min(times, default=None)

    def span(self) -> tuple[float, float] | None:
        """Earliest and latest time in the partitions refreshed so far."""
        spans = [p.span for p in self._parts.values() if p.span is not None]
        return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None

    def newest_mtime(self) -> float | None:
        """Latest modification time among the partitions refreshed so far."""
        times = [p.tail.mtime for p in self._parts.values() if p.restored and p.tail.mtime is not None]
        return max(times, default=None)

    def malformed_counts(self) -> dict[Path, int]:
        """File -> malformed lines in it (files with none left out), over the partitions refreshed so far."""
        return {p.path: p.malformed_count for p in self._parts.values() if p.malformed_count}

    def records(self) -> int:
        """Records held in the partitions refreshed so far."""
        return sum(p.size for p in self._parts.values())


def _unused(value: Any) -> Columns:  # the tail decodes whole blocks (decode_block); never called per line
    raise TypeError("decoded by blocks")
