"""The ``dashboard/`` telemetry of a run, followed as it grows.

Contract:

- :class:`DashboardReader` reads ``meta.json`` (re-read whenever a resumed run
  rewrites it), ``metrics.jsonl`` into a columnar :class:`~miles_tui.core.telemetry.metrics.metric_store.MetricStore`,
  the hourly partitions ``{stream}/{YYYYMMDD_HH}.jsonl`` (UTC; phases by end
  hour) of phases, gpu_util, engine_series, trajectories and gpu_processes, an
  older flat ``{stream}.jsonl`` of those as one partition covering all time,
  and the flat topology.jsonl and data_buffer.jsonl.
- :meth:`DashboardReader.poll` returns only what is new since the last poll.
  It is one transaction under the reader's ``threading.Lock``, and every file
  follows the tail rule of :mod:`miles_tui.core.base.tail`, so polls from several threads (or
  asyncio tasks via ``asyncio.to_thread``) never duplicate or drop a record.
  New hourly files are picked up as they appear. A poll that finds nothing
  lists the stream folders and stats the followed files; it reads no file.
  Partitions two or more hours behind their stream's newest are settled and
  stat'ed only every :data:`SETTLED_EVERY` polls.
- With ``recent_hours`` the first poll parses only the newest hours of each
  partitioned stream; older partitions stay on disk, unparsed, until
  :meth:`DashboardReader.records` asks for a window that needs them. A window
  query never parses an hour outside the window.
- Problems are values, not exceptions: malformed lines and rewritten files come
  back in the delta (file and byte offset), and reading goes on. meta.json is
  read through :mod:`miles_tui.core.base.run_files` (a regular file of at most
  ``META_MAX_BYTES``, JSON of sane depth); otherwise the previous meta is kept
  and the problem reported. A folder or entry that cannot be followed (a
  symbolic link loop, permissions) is a problem said once; the rest goes on.
- A stream file that is no longer listed (``rm -rf RUN_DIR`` and a restart) is
  forgotten: its records are dropped and the delta carries a
  :class:`~miles_tui.core.base.tail.StreamReset` with reason ``removed``.
  back in the delta (file and byte offset), and reading goes on.
- metrics.jsonl is followed by :class:`~miles_tui.core.telemetry.metrics.metric_stream.MetricStream`: the
  same tail rule, decoded into columns (by ``parse_workers`` scanner threads
  for a long stretch, or as many processes when the scanner is not built, for
  that poll only) and cached in the user cache dir.
- With ``streams`` only those telemetry streams (and always meta.json and
  metrics.jsonl) are listed and read.
- Never writes into the run; never sleeps or reads a clock but for a long
  metrics read's pauses between blocks (not ``headless``: see
  :mod:`~miles_tui.core.telemetry.metrics.metric_stream`); the only threads it
  starts are a poll's own (the scanner's; with ``headless``, the store's
  appender; with ``save_in_background``, the cache writer, which
  :meth:`DashboardReader.wait_saved` waits for).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from miles_tui.core.base.dir_listing import FolderListing
from miles_tui.core.base.errors import StreamError, UnreadableFileError
from miles_tui.core.base.run_files import META_MAX_BYTES, os_error_message, read_json
from miles_tui.core.base.tail import ReadHook, StreamReset, TailFile, TailRead
from miles_tui.core.telemetry.metrics.metric_store import MetricStore
from miles_tui.core.telemetry.metrics.metric_stream import MetricStream
from miles_tui.core.telemetry.partitions import (
    COLUMNAR_STREAMS,
    HOUR_SECONDS,
    Partition,
    PartitionInfo,
    hour_of,
    next_generation,
)
from miles_tui.core.telemetry.record_table import Interner, RecordTable, TableArrays, table_arrays
from miles_tui.core.telemetry.stream_records import (
    DECODERS,
    RunMeta,
    StreamRecord,
    decode_meta,
    record_time,
)

PARTITIONED_STREAMS: Final = ("phases", "gpu_util", "engine_series", "trajectories", "gpu_processes")
"""Streams written as hourly files in a folder (or, by older writers, as one flat file)."""

FLAT_STREAMS: Final = ("topology", "data_buffer")
"""Streams written as one flat file."""

TELEMETRY_STREAMS: Final = PARTITIONED_STREAMS + FLAT_STREAMS
"""Every stream except metrics, in the order a poll reads them."""

STREAMS: Final = ("metrics", *TELEMETRY_STREAMS)
"""Every stream name."""

SETTLED_EVERY: Final = 16
"""A partition two or more hours older than its stream's newest is stat'ed on every this-many-th poll
only: writers move on with the clock, and a stream of many hours then costs a few stats per poll."""


@dataclass(frozen=True)
class StreamsDelta:
    """What one :meth:`DashboardReader.poll` found."""

    metric_records: range
    """Indices (in the metric store) of the metrics records appended by this poll."""
    metric_keys: tuple[str, ...]
    """Metric names that got new points, sorted."""
    records: Mapping[str, tuple[StreamRecord, ...]]
    """Stream -> its new records (partitions in hour order, each in file order); only streams with some."""
    meta: RunMeta | None
    """meta.json as currently known."""
    meta_changed: bool
    """Whether meta.json was (re-)read by this poll."""
    problems: tuple[StreamError, ...]
    """Found since the last poll: malformed lines (:class:`~miles_tui.core.base.tail.MalformedLineError`, with byte
    offset), an unparsable meta.json, a stream file that cannot be read."""
    resets: tuple[StreamReset, ...]
    """Files found rewritten: their old records were dropped and they were read again from 0."""
    reset_streams: tuple[str, ...]
    """Streams with a reset: their records in this delta replace, not extend, a partition's."""
    newest_mtime: float | None
    """Latest modification time among the dashboard files followed."""

    @property
    def is_empty(self) -> bool:
        """Whether the poll found nothing at all."""
        return not (self.metric_records or self.records or self.meta_changed or self.problems or self.resets)


def read_meta(directory: Path | str) -> RunMeta | None:
    """``directory``'s meta.json as :class:`RunMeta`, read once and now (None when it is missing or is not a run
    description): the run's name before any stream is read."""
    try:
        return decode_meta(read_json(Path(directory) / "meta.json", META_MAX_BYTES, "meta.json"))
    except (OSError, UnreadableFileError, ValueError):
        return None


def _problems(read: TailRead) -> list[StreamError]:
    return [*read.malformed, read.error] if read.error is not None else list(read.malformed)


class DashboardReader:
    """Follows ``RUN_DIR/dashboard/``; see the module docstring for the contract."""

    def __init__(
        self,
        directory: Path | str,
        *,
        recent_hours: int | None = None,
        read_hook: ReadHook | None = None,
        parse_workers: int = 0,
        worker_nice: int = 0,
        save_in_background: bool = False,
        headless: bool = False,
        streams: Sequence[str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        """The dashboard folder (it may not exist yet)."""
        self.recent_hours = recent_hours
        """Hours of each partitioned stream the first poll parses (None: all)."""
        self.streams: tuple[str, ...] = TELEMETRY_STREAMS if streams is None else tuple(streams)
        """The telemetry streams followed besides metrics.jsonl and meta.json (the others are never listed or
        read: ``export --metrics`` and ``report`` read what they need)."""
        self._read_hook = read_hook
        self._lock = threading.Lock()
        # metrics.jsonl: columns, decoded by worker processes when long, cached in the user cache dir
        self._metric_stream = MetricStream(
            self.directory / "metrics.jsonl",
            read_hook=read_hook,
            workers=parse_workers,
            nice=worker_nice,
            save_in_background=save_in_background,
            headless=headless,
        )
        self._metrics = self._metric_stream.store
        self._metrics_tail: TailFile[Any] = self._metric_stream.tail
        self._parts: dict[str, list[Partition]] = {stream: [] for stream in TELEMETRY_STREAMS}
        self._interners = {stream: Interner() for stream in COLUMNAR_STREAMS}  # one code space per stream
        self._known: set[str] = set()
        self._seen_stream: set[str] = set()
        self._meta: RunMeta | None = None
        self._meta_signature: tuple[object, ...] | None = None
        self._meta_mtime: float | None = None
        self._polls = 0
        self._unlistable: set[str] = set()  # folders (and entries) already reported as unusable
        self._listing = FolderListing()
        self._listed: dict[str, tuple[list[os.DirEntry[str]], set[str]]] = {}  # stream -> (listing, its paths)
        self._pending: list[StreamError] = []  # problems found by a window query, reported by the next poll

    @property
    def metrics(self) -> MetricStore:
        """metrics.jsonl, columnar (thread-safe on its own)."""
        return self._metrics

    def wait_saved(self) -> None:
        """Return once metrics.jsonl's cache entry is written (``save_in_background``: a thread writes it)."""
        self._metric_stream.wait_saved()

    @property
    def meta(self) -> RunMeta | None:
        """meta.json as last read (None until one was read)."""
        return self._meta

    def poll(self) -> StreamsDelta:
        """Everything new since the last poll; the first poll reads what exists."""
        with self._lock:
            problems: list[StreamError] = self._pending
            self._pending = []
            resets: list[StreamReset] = []
            reset_streams: list[str] = []
            meta_changed = self._poll_meta(problems)
            self._discover(problems, resets, reset_streams)

            store = self._metrics
            before = len(store), store.point_counts()
            read = self._metric_stream.poll()
            problems += _problems(read)
            metric_keys: tuple[str, ...] = ()
            if read.reset is not None:
                resets.append(read.reset)
                reset_streams.append("metrics")
                before = 0, {}
            if read.records or read.reset is not None:
                counts = store.point_counts()
                metric_keys = tuple(sorted(k for k, n in counts.items() if n != before[1].get(k, 0)))

            records: dict[str, tuple[StreamRecord, ...]] = {}
            check_settled = self._polls % SETTLED_EVERY == 0
            self._polls += 1
            for stream, parts in self._parts.items():
                fresh: list[StreamRecord] = []
                recent = parts[-1].hour - HOUR_SECONDS if parts and parts[-1].hour is not None else None
                for part in parts:
                    settled = recent is not None and part.hour is not None and part.hour < recent
                    if part.loaded and (check_settled or not settled):
                        tail_read = self._load(part, fresh)
                        problems += _problems(tail_read)
                        if tail_read.reset is not None:
                            resets.append(tail_read.reset)
                            if stream not in reset_streams:
                                reset_streams.append(stream)
                if fresh:
                    records[stream] = tuple(fresh)
            return StreamsDelta(
                metric_records=range(before[0], len(store)),
                metric_keys=metric_keys,
                records=records,
                meta=self._meta,
                meta_changed=meta_changed,
                problems=tuple(problems),
                resets=tuple(resets),
                reset_streams=tuple(reset_streams),
                newest_mtime=self._newest_mtime(),
            )

    def records(self, stream: str, since: float | None = None, until: float | None = None) -> list[StreamRecord]:
        """Records of ``stream`` whose time (:func:`record_time`) is in [since, until].

        Partitions in hour order (a flat file first), each in file order. Only the
        hours the window touches are parsed. A partition parsed here (history the
        first poll skipped) is followed from then on: its records are this query's,
        not a delta's, and any malformed line in it is reported by the next poll.
        Followed partitions are not re-read here; :meth:`poll` reads them.
        """
        with self._lock:
            out: list[StreamRecord] = []
            for part in self._window(stream, since, until):
                if since is None and until is None:
                    out += part.records
                    continue
                for record in part.records:
                    t = record_time(record)
                    if t is not None and (since is None or t >= since) and (until is None or t <= until):
                        out.append(record)
            return out

    def parse(self, stream: str, since: float | None = None, until: float | None = None) -> None:
        """Have the partitions of ``stream`` that the window [since, until] touches parsed (and followed from
        now on), like :meth:`records`, without building the records."""
        with self._lock:
            self._window(stream, since, until)

    def _window(self, stream: str, since: float | None, until: float | None) -> list[Partition]:
        """The partitions of ``stream`` the window touches, each parsed (and followed from now on); the caller
        holds the lock."""
        if stream not in self._parts:
            raise ValueError(f"unknown telemetry stream {stream!r} (metrics are in DashboardReader.metrics)")
        parts = [part for part in self._parts[stream] if part.overlaps(since, until)]
        for part in parts:
            if not part.loaded:
                self._pending += _problems(self._load(part, []))
        return parts

    def loaded_records(self, stream: str) -> list[StreamRecord]:
        """Records of ``stream`` from the partitions parsed so far; parses nothing."""
        with self._lock:
            return [record for part in self._parts[stream] if part.loaded for record in part.records]

    def loaded_arrays(self, stream: str, numeric: Sequence[str], shared: Sequence[str]) -> TableArrays:
        """Fields of a columnar stream (:data:`COLUMNAR_STREAMS`) over the partitions parsed so far, in
        :meth:`loaded_records` order, as numpy arrays: no object per record; parses nothing."""
        with self._lock:
            tables = [p.records for p in self._parts[stream] if p.loaded]
            if not all(isinstance(t, RecordTable) for t in tables):
                raise ValueError(f"{stream!r} is not held as columns")
            return table_arrays(cast("list[RecordTable[Any]]", tables), numeric, shared, self._interners[stream])

    def partition_records(
        self, stream: str, path: Path, generation: int, start: int, stop: int
    ) -> list[StreamRecord] | None:
        """Records ``start`` to ``stop`` of one parsed partition, as :meth:`partitions` described it (path and
        generation); None when that partition is gone, was rewritten or holds fewer records now."""
        with self._lock:
            for part in self._parts[stream]:
                if part.tail.path == path and part.generation == generation and part.loaded:
                    return list(part.records[start:stop]) if len(part.records) >= stop else None
            return None

    def partitions(self, stream: str) -> tuple[PartitionInfo, ...]:
        """The files of ``stream`` known at the last poll, flat file first, then by hour."""
        with self._lock:
            return tuple(
                PartitionInfo(stream, p.tail.path, p.hour, p.loaded, len(p.records), p.generation)
                for p in self._parts[stream]
            )

    def record_counts(self) -> dict[str, int]:
        """Stream -> records held (metrics: records of metrics.jsonl)."""
        with self._lock:
            counts = {"metrics": len(self._metrics)}
            counts.update({s: sum(len(p.records) for p in parts) for s, parts in self._parts.items()})
            return counts

    def time_range(self) -> tuple[float, float] | None:
        """Earliest and latest time any held record mentions (ts; a phase's t0 and t1)."""
        with self._lock:
            spans = [p.span for parts in self._parts.values() for p in parts if p.span is not None]
            metrics = self._metrics.time_range()
            if metrics is not None:
                spans.append(metrics)
            if not spans:
                return None
            return min(s[0] for s in spans), max(s[1] for s in spans)

    def malformed_counts(self) -> dict[Path, int]:
        """File -> malformed lines skipped in it so far (files with none are left out)."""
        with self._lock:
            return {tail.path: tail.malformed_count for tail in self._tails() if tail.malformed_count}

    def _tails(self) -> Iterator[TailFile[Any]]:
        yield self._metrics_tail
        for parts in self._parts.values():
            for part in parts:
                if part.loaded:
                    yield part.tail

    def _newest_mtime(self) -> float | None:
        times = [t.mtime for t in self._tails() if t.mtime is not None]
        if self._meta_mtime is not None:
            times.append(self._meta_mtime)
        return max(times, default=None)

    def _load(self, part: Partition, fresh: list[StreamRecord]) -> TailRead:
        """Poll one partition's tail into its records (and ``fresh``)."""

        def consume(batch: Sequence[StreamRecord]) -> None:
            part.records.extend(batch)
            fresh.extend(batch)
            part.widen(batch)

        def on_reset() -> None:
            part.records.clear()
            part.span = None
            part.generation = next_generation()

        part.loaded = True
        return part.tail.poll(consume, on_reset)

    def _poll_meta(self, problems: list[StreamError]) -> bool:
        path = self.directory / "meta.json"
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return False
        except OSError as err:  # a link loop, an I/O error: said once, until it changes
            if self._meta_signature != ("error", err.errno):
                self._meta_signature = ("error", err.errno)
                problems.append(StreamError(os_error_message(path, err), path))
            return False
        signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if signature == self._meta_signature:
            return False
        self._meta_signature, self._meta_mtime = signature, st.st_mtime
        keeping = "keeping the previous meta until the file is rewritten"
        try:
            meta = decode_meta(read_json(path, META_MAX_BYTES, "meta.json"))
        except FileNotFoundError:
            self._meta_signature = None  # replaced between stat and read: read it next poll
            return False
        except UnreadableFileError as err:
            problems.append(StreamError(f"{err.message}; {keeping}", path))
            return False
        except ValueError as err:  # valid JSON, but not an object
            problems.append(StreamError(f"not a run description ({err}); {keeping}", path))
            return False
        except OSError as err:
            problems.append(StreamError(f"{os_error_message(path, err)}; {keeping}", path))
            return False
        self._meta = meta
        return True

    def _say_once(self, path: str, message: str, problems: list[StreamError]) -> None:
        if path not in self._unlistable:
            self._unlistable.add(path)
            problems.append(StreamError(message, path))

    def _list(self, directory: Path, problems: list[StreamError]) -> list[os.DirEntry[str]] | None:
        """The folder's entries; a missing folder is empty, an unlistable one None and a problem (said once)."""
        try:
            listed = self._listing.entries(directory)  # listed again only when the folder changed
        except (FileNotFoundError, NotADirectoryError):
            return []
        except PermissionError:
            self._say_once(str(directory), "permission denied: this user cannot list the folder", problems)
            return None
        except OSError as err:  # a symbolic link loop, an I/O error
            self._say_once(str(directory), f"{os_error_message(directory, err)}; the folder is skipped", problems)
            return None
        self._unlistable.discard(str(directory))
        return listed

    def _is_dir(self, entry: os.DirEntry[str], problems: list[StreamError]) -> bool:
        try:
            return entry.is_dir()
        except OSError as err:  # dashboard/gpu_util -> itself
            self._say_once(entry.path, f"{os_error_message(entry.path, err)}; the stream is skipped", problems)
            return False

    def _discover(self, problems: list[StreamError], resets: list[StreamReset], reset_streams: list[str]) -> None:
        """Add stream files that appeared since the last poll; drop those that disappeared."""
        listed = self._list(self.directory, problems)
        if listed is None:
            return  # unlistable (said once): keep what is known
        entries = {entry.name: entry for entry in listed}
        present: set[str] = set()
        for stream in self.streams:
            flat = entries.get(f"{stream}.jsonl")
            if flat is not None:
                present.add(flat.path)
                if flat.path not in self._known:
                    self._known.add(flat.path)
                    self._add(stream, flat.path, None, hot=True)
        for stream in (s for s in PARTITIONED_STREAMS if s in self.streams):
            entry = entries.get(stream)
            if entry is None or not self._is_dir(entry, problems):
                continue
            files = self._list(Path(entry.path), problems)
            if files is None:
                present.update(p.key for p in self._parts[stream] if p.hour is not None)
                continue
            last = self._listed.get(stream)
            same = last is not None and last[0] is files  # the same listing as last poll: nothing came or went
            paths = last[1] if last is not None and same else {file.path for file in files}
            self._listed[stream] = (files, paths)
            present |= paths
            fresh = [] if same else [file for file in files if file.path not in self._known]
            self._known.update(file.path for file in fresh)  # hourly files, or names to ignore from now on
            new = [(hour, file.path) for file in fresh if (hour := hour_of(file.name)) is not None]
            if not new:
                continue
            new.sort()
            first_sight = stream not in self._seen_stream
            self._seen_stream.add(stream)
            newest = new[-1][0]
            for hour, path in new:
                recent = self.recent_hours is None or hour > newest - self.recent_hours * HOUR_SECONDS
                self._add(stream, path, hour, hot=recent or not first_sight)
        self._drop_vanished(present, resets, reset_streams)

    def _drop_vanished(self, present: set[str], resets: list[StreamReset], reset_streams: list[str]) -> None:
        """Forget stream files no longer listed (``rm -rf`` of a run, a restart): their records go, with a notice."""
        if len(present) == len(self._known):
            return  # every listed name is known (the listing added the new ones): nothing vanished
        self._known &= present
        for stream, parts in self._parts.items():
            kept = [part for part in parts if part.key in present]
            if len(kept) == len(parts):
                continue
            for part in parts:
                if part.key not in present and (part.records or part.tail.offset):
                    resets.append(StreamReset(part.tail.path, part.tail.offset, 0, "removed"))
                    if stream not in reset_streams:
                        reset_streams.append(stream)
            self._parts[stream] = kept

    def _add(self, stream: str, path: str, hour: float | None, *, hot: bool) -> None:
        tail: TailFile[StreamRecord] = TailFile(path, DECODERS[stream], read_hook=self._read_hook)
        part = Partition(path, tail, hour, stream, self._interners.get(stream))
        part.loaded = hot  # followed from now on: this very poll reads it
        parts = self._parts[stream]
        parts.append(part)
        parts.sort(key=Partition.sort_key)
