"""The metrics stream (``dashboard/metrics.jsonl``) held as columns, and ``export --metrics``.

Contract:

- Lines are decoded by :mod:`miles_tui.core.telemetry.metrics.metric_batch` (:func:`decode_metric_record`
  is the per-record rule); :class:`MetricStore` keeps every record in file
  order, columnar, as numpy arrays: per record its ts, step key and step; per
  metric key the record index and value of each point (a key may first appear
  at any record). Raw values survive the columns: an int comes back an int, a
  float a float, and anything else (None, a string, a bool, a list) exactly as
  parsed. Fifty million points take about 12 bytes each.
- The store is thread-safe: appends and reads take its lock, and every array it
  hands out is a copy, so a reader never sees half an append.
- The number of distinct metric keys is bounded (:data:`MAX_KEYS`): a key
  first seen when the store holds that many is not kept (its points are
  dropped), and :attr:`MetricStore.dropped_keys` says so, so the stream can
  name the file. A key's columns start small (:data:`FIRST_ROOM` points), so a
  key with one point costs about a kilobyte, not the four it did: 200,000
  one-point keys took 1.4 GB.
- :func:`export_metrics` is a pure function of a store's contents: the JSON of
  ``miles-tui export --metrics [KEY ...] [--x STEP_KEY]`` (cli.md);
  :mod:`miles_tui.core.telemetry.metrics.metric_export` writes the same document as a stream.
- Never formats or rounds a value; never touches the clock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.metrics.metric_batch import MetricBatch, MetricRow, decode_metric_record, rows_to_batch
from miles_tui.core.telemetry.metrics.metric_values import Values

__all__ = [
    "MAX_KEYS",
    "MetricRecord",
    "MetricRow",
    "MetricSeries",
    "MetricStore",
    "decode_metric_record",
    "export_metrics",
]


MAX_KEYS = 20_000
"""Distinct metric keys a store keeps (miles logs a few hundred)."""

FIRST_ROOM = 8
"""Points a growing column first has room for (then a quarter more at each move)."""


@dataclass(frozen=True)
class MetricRecord:
    """One metrics.jsonl record, rebuilt from the columns with its raw values."""

    ts: float
    """When the record was logged (seconds since the epoch)."""
    step_key: str
    """The step counter the record was logged against, e.g. ``train/step``."""
    step: Any
    """That counter's value (an int in every run seen so far)."""
    metrics: Mapping[str, Any]
    """Metric name -> value, as logged."""


@dataclass(frozen=True)
class MetricSeries:
    """One metric's points logged against one step key, as numpy arrays for plotting."""

    key: str
    """The metric name."""
    x_key: str
    """The step key the points were logged against."""
    record: npt.NDArray[np.int64]
    """Index of each point's record in the store (file order)."""
    step: npt.NDArray[np.float64]
    """Each point's step (NaN where the step is not a number)."""
    value: npt.NDArray[np.float64]
    """Each point's value (NaN where the value is not a number)."""
    ts: npt.NDArray[np.float64]
    """Each point's record ts."""


class _Grow:
    """An append-only numpy array with room to grow (a quarter more at each move)."""

    __slots__ = ("data", "size")

    def __init__(self, dtype: type[Any], data: npt.NDArray[Any] | None = None) -> None:
        self.data: npt.NDArray[Any] = np.zeros(0, dtype) if data is None else data
        self.size = len(self.data)

    def extend(self, values: npt.NDArray[Any], ahead: float = 1.0) -> None:
        """Append ``values``; when the array must move, make room for ``ahead`` times as many."""
        need = self.size + len(values)
        if need > len(self.data):
            room = max(need, self.size + self.size // 4, FIRST_ROOM, self.size + int(len(values) * ahead))
            grown = np.empty(room, self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : need] = values
        self.size = need

    def view(self) -> npt.NDArray[Any]:
        return self.data[: self.size]


class _ValueColumn:
    """Append-only raw values (see :class:`~miles_tui.core.telemetry.metrics.metric_batch.Values`)."""

    __slots__ = ("ints", "num", "raw")

    def __init__(self, values: Values | None = None) -> None:
        self.num = _Grow(np.float64, None if values is None else values.num)
        self.ints = None if values is None or values.ints is None else _Grow(np.bool_, values.ints)
        self.raw: dict[int, Any] = {} if values is None else dict(values.raw)

    def extend(self, values: Values, ahead: float = 1.0) -> None:
        base = self.num.size
        self.num.extend(values.num, ahead)
        if values.ints is not None and self.ints is None:
            self.ints = _Grow(np.bool_, np.zeros(base, np.bool_))
        if self.ints is not None:
            self.ints.extend(values.ints if values.ints is not None else np.zeros(len(values), np.bool_), ahead)
        if values.raw:
            self.raw.update((base + p, v) for p, v in values.raw.items())

    def snapshot(self) -> Values:
        """The values as they are (views: use under the store's lock)."""
        return Values(self.num.view(), None if self.ints is None else self.ints.view(), self.raw)


class _KeyColumn:
    """One metric key: the record index and raw value of each of its points, and its points per step key."""

    __slots__ = ("counts", "records", "values")

    def __init__(self, records: npt.NDArray[np.uint32] | None = None, values: Values | None = None) -> None:
        self.records = _Grow(np.uint32, records)
        self.values = _ValueColumn(values)
        self.counts: dict[int, int] | None = {} if records is None else None
        """Step key id -> points logged against it (None: not counted yet, then kept up to date)."""

    def count(self, step_key_ids: npt.NDArray[np.uint32]) -> None:
        """Add the points whose records have these step key ids."""
        if self.counts is not None and len(step_key_ids):
            for sk, n in enumerate(np.bincount(step_key_ids).tolist()):
                if n:
                    self.counts[sk] = self.counts.get(sk, 0) + n


@dataclass(frozen=True)
class StoreColumns:
    """A store's whole contents as arrays (views: for the cache writer, under the store's lock)."""

    ts: Values
    step: Values
    step_key: npt.NDArray[np.uint32]
    step_keys: tuple[str, ...]
    keys: Mapping[str, tuple[npt.NDArray[np.uint32], Values]]
    counts: Mapping[str, Mapping[int, int]] | None = None
    """Key -> step key id -> its points (None: to be counted)."""


class MetricStore:
    """Every metrics.jsonl record in file order, columnar. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._ts = _ValueColumn()
        self._step = _ValueColumn()
        self._step_key_of = _Grow(np.uint32)
        self._step_key_ids: dict[str, int] = {}
        self._keys: dict[str, _KeyColumn] = {}
        self.dropped_keys = 0
        """Keys not kept because the store held :data:`MAX_KEYS` (counted once per batch that had them)."""
        self.first_dropped: str | None = None
        """The first key not kept, for the message."""

    @classmethod
    def from_records(cls, records: Iterable[Any]) -> MetricStore:
        """A store holding ``records`` (parsed metrics.jsonl lines); raises on an invalid one."""
        store = cls()
        store.append_rows([decode_metric_record(r) for r in records])
        return store

    @classmethod
    def from_columns(cls, columns: StoreColumns) -> MetricStore:
        """A store holding ``columns`` (its arrays are taken over, not copied)."""
        store = cls()
        store._ts, store._step = _ValueColumn(columns.ts), _ValueColumn(columns.step)
        store._step_key_of = _Grow(np.uint32, columns.step_key)
        store._step_key_ids = {name: i for i, name in enumerate(columns.step_keys)}
        store._keys = {name: _KeyColumn(records, values) for name, (records, values) in columns.keys.items()}
        for name, counts in (columns.counts or {}).items():
            store._keys[name].counts = dict(counts)
        return store

    def append_rows(self, rows: Sequence[MetricRow]) -> None:
        """Append decoded rows at the end, in order."""
        self.append_batch(rows_to_batch(rows))

    def append_batch(self, batch: Sequence[MetricRow], ahead: float = 1.0) -> None:
        """Append records at the end, in order (a :class:`MetricBatch`, or checked rows).

        ``ahead``: about this many times as many records are coming (this batch included), so an
        array that must grow is sized once for a long read instead of moving again and again.
        """
        if not isinstance(batch, MetricBatch):
            batch = rows_to_batch(batch)
        if not len(batch):
            return
        with self._lock:
            base = self._step_key_of.size
            ids = self._step_key_ids
            remap = np.array([ids.setdefault(name, len(ids)) for name in batch.step_keys], dtype=np.uint32)
            step_key = remap[batch.step_key]
            self._step_key_of.extend(step_key, ahead)
            self._ts.extend(batch.ts, ahead)
            self._step.extend(batch.step, ahead)
            for name, points in batch.keys.items():
                column = self._keys.get(name)
                if column is None:
                    if len(self._keys) >= MAX_KEYS:  # a key budget: each key is a series of its own
                        self.dropped_keys += 1
                        self.first_dropped = self.first_dropped or name
                        continue
                    column = self._keys[name] = _KeyColumn()
                column.records.extend(points.records + np.uint32(base), ahead)
                column.values.extend(points.values, ahead)
                column.count(step_key[points.records])

    def replace(self, other: MetricStore) -> None:
        """Hold exactly what ``other`` holds (its arrays are taken over; ``other`` is left empty)."""
        with self._lock, other._lock:
            self._ts, self._step, self._step_key_of = other._ts, other._step, other._step_key_of
            self._step_key_ids, self._keys = other._step_key_ids, other._keys
            other._clear()

    def columns(self) -> StoreColumns:
        """Every array, as views (they stay valid: appends never write into what is already there)."""
        with self._lock:
            for name in self._keys:
                self._step_key_counts(name)  # every key counted
            return StoreColumns(
                ts=self._ts.snapshot(),
                step=self._step.snapshot(),
                step_key=self._step_key_of.view(),
                step_keys=tuple(self._step_key_ids),
                keys={name: (c.records.view(), c.values.snapshot()) for name, c in self._keys.items()},
                counts={name: dict(c.counts or {}) for name, c in self._keys.items()},
            )

    def clear(self) -> None:
        """Drop every record (the file was rewritten and is read again)."""
        with self._lock:
            self._clear()

    def __len__(self) -> int:
        """Number of records."""
        return self._step_key_of.size

    def keys(self) -> tuple[str, ...]:
        """Every metric name, sorted."""
        with self._lock:
            return tuple(sorted(self._keys))

    def step_keys(self) -> tuple[str, ...]:
        """Every step key records were logged against, sorted."""
        with self._lock:
            return tuple(sorted(self._step_key_ids))

    def point_counts(self) -> dict[str, int]:
        """Metric name -> number of points (all step keys)."""
        with self._lock:
            return self._point_counts()

    def point_counts_now(self) -> dict[str, int] | None:
        """:meth:`point_counts`, or None at once while another thread holds the store (a long load stores
        blocks of records: the UI thread asks this way and never waits behind one)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self._point_counts()
        finally:
            self._lock.release()

    def _point_counts(self) -> dict[str, int]:
        return {name: column.records.size for name, column in self._keys.items()}

    def time_range(self) -> tuple[float, float] | None:
        """(earliest, latest) record ts, or None without records."""
        with self._lock:
            ts = self._ts.num.view()
            if not len(ts) or np.isnan(ts).all():
                return None
            return float(np.nanmin(ts)), float(np.nanmax(ts))

    def step_key_counts(self, key: str) -> dict[str, int]:
        """How many points of ``key`` were logged against each step key."""
        with self._lock:
            return self._step_key_counts(key)

    def _step_key_counts(self, key: str) -> dict[str, int]:
        column = self._keys.get(key)
        if column is None:
            return {}
        if column.counts is None:  # restored from the cache: counted once, then kept up to date by appends
            column.counts = {}
            column.count(self._step_key_of.view()[column.records.view()])
        names = list(self._step_key_ids)
        return {names[sk]: n for sk, n in column.counts.items()}

    def default_x_key(self, key: str) -> str | None:
        """The step key ``key`` was logged against most often (ties: alphabetically first); None if unknown."""
        with self._lock:
            counts = self._step_key_counts(key)
        if not counts:
            return None
        return min(counts, key=lambda name: (-counts[name], name))

    def _select(self, key: str, x_key: str, start: int) -> tuple[_KeyColumn, npt.NDArray[np.intp]] | None:
        """The key's column and the positions of its points logged against ``x_key`` in records >= start."""
        column = self._keys.get(key)
        sk = self._step_key_ids.get(x_key)
        if column is None or sk is None:
            return None
        records = column.records.view()
        first = int(np.searchsorted(records, start)) if start > 0 else 0
        if self._step_key_counts(key).get(x_key) == len(records):  # every point against x_key: no filtering
            return column, np.arange(first, len(records), dtype=np.intp)
        positions = first + np.flatnonzero(self._step_key_of.view()[records[first:]] == sk)
        return column, positions

    def selection(self, key: str, x_key: str) -> tuple[npt.NDArray[np.intp], Values] | None:
        """(records, values) of ``key``'s points logged against ``x_key`` (copies); None if there is none."""
        with self._lock:
            selected = self._select(key, x_key, 0)
            if selected is None:
                return None
            column, positions = selected
            return column.records.view()[positions].astype(np.intp), _take(column.values.snapshot(), positions)

    def steps_and_ts(self, records: npt.NDArray[np.intp]) -> tuple[Values, Values]:
        """The step and the ts of records ``records`` (ascending), raw (copies)."""
        with self._lock:
            return _take(self._step.snapshot(), records), _take(self._ts.snapshot(), records)

    def series(self, key: str, x_key: str | None = None, start: int = 0) -> MetricSeries | None:
        """``key``'s points logged against ``x_key`` (default: :meth:`default_x_key`) in records >= ``start``.

        None when the key was never logged (against that step key or at all).
        """
        x = x_key if x_key is not None else self.default_x_key(key)
        if x is None:
            return None
        with self._lock:
            selected = self._select(key, x, start)
            if selected is None:
                return None
            column, positions = selected
            records = column.records.view()[positions].astype(np.int64)
            return MetricSeries(
                key=key,
                x_key=x,
                record=records,
                step=self._step.num.view()[records],
                value=column.values.num.view()[positions],
                ts=self._ts.num.view()[records],
            )

    def points(self, key: str, x_key: str) -> tuple[list[Any], list[Any], list[Any]]:
        """(steps, values, ts) of ``key`` logged against ``x_key``, raw, in file order."""
        selected = self.selection(key, x_key)
        if selected is None:
            return [], [], []
        records, values = selected
        steps, ts = self.steps_and_ts(records)
        return steps.python(), values.python(), ts.python()

    def record(self, index: int) -> MetricRecord:
        """Record ``index`` (file order) rebuilt with its raw values; IndexError past the end."""
        with self._lock:
            size = self._step_key_of.size
            if not 0 <= index < size:
                raise IndexError(f"no metrics record {index} (the store holds {size})")
            metrics: dict[str, Any] = {}
            for name, column in self._keys.items():
                records = column.records.view()
                position = int(np.searchsorted(records, index))
                if position < len(records) and records[position] == index:
                    metrics[name] = column.values.snapshot().value(position)
            names = list(self._step_key_ids)
            return MetricRecord(
                ts=self._ts.snapshot().value(index),
                step_key=names[int(self._step_key_of.view()[index])],
                step=self._step.snapshot().value(index),
                metrics=metrics,
            )


def _take(values: Values, positions: npt.NDArray[np.intp]) -> Values:
    """The values at ``positions`` (ascending), as a new column."""
    raw: dict[int, Any] = {}
    if values.raw:
        keys = np.fromiter(values.raw, np.intp, len(values.raw))
        hit = np.searchsorted(positions, keys)
        inside = hit < len(positions)
        found = inside.copy()
        found[inside] = positions[hit[inside]] == keys[inside]
        raw = {int(hit[i]): values.raw[int(keys[i])] for i in np.flatnonzero(found).tolist()}
    ints = None if values.ints is None else values.ints[positions]
    return Values(values.num[positions], ints if ints is not None and ints.any() else None, raw)


def export_metrics(store: MetricStore, keys: Sequence[str] | None = None, x_key: str | None = None) -> dict[str, Any]:
    """``export --metrics [KEY ...] [--x STEP_KEY]``: ``{"metrics": {KEY: {x_key, step, value, ts}}}``.

    Every key when ``keys`` is empty or None (sorted). Only points logged against the
    key's step key count: ``x_key`` when given, otherwise the step key the key was
    logged against most often (ties: alphabetically first). A key never logged
    (against that step key) gets empty lists, and ``x_key`` null when none was given.
    """
    names = list(keys) if keys else list(store.keys())
    exported: dict[str, Any] = {}
    for name in names:
        x = x_key if x_key is not None else store.default_x_key(name)
        steps, values, ts = store.points(name, x) if x is not None else ([], [], [])
        exported[name] = {"x_key": x, "step": steps, "value": values, "ts": ts}
    return {"metrics": exported}
