"""The metrics stream (``dashboard/metrics.jsonl``) held as columns, and ``export --metrics``.

Contract:

- :func:`decode_metric_record` turns one parsed line into a :data:`MetricRow`
  or raises (a missing or mistyped field); it never reads files.
- :class:`MetricStore` keeps every record in file order, columnar: per record
  its ts, step key and step; per metric key the record index and value of each
  point. Raw values survive the columns: an int comes back an int, a float a
  float, and anything else (None, a string, a bool, a list) exactly as parsed.
  Two million records with five metrics each take about 160 MB, not the
  gigabytes the same records would take as dicts.
- The store is thread-safe: appends and reads take its lock, and every array it
  hands out is a copy, so a reader never sees half an append.
- :func:`export_metrics` is a pure function of a store's contents: the JSON of
  ``miles-tui export --metrics [KEY ...] [--x STEP_KEY]`` (cli.md).
- Never formats or rounds a value; never touches the clock.
"""

from __future__ import annotations

import bisect
import math
import threading
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

MetricRow = tuple[float, str, Any, Mapping[str, Any]]
"""One metrics.jsonl record as decoded: (ts, step_key, step, metrics)."""

_EXACT: Final = 2**53  # ints beyond this do not survive a float64 round trip
_FLOAT, _INT, _MIXED = 1, 2, 3


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def decode_metric_record(value: Any) -> MetricRow:
    """Check one parsed metrics.jsonl line and return it as a row; raise ValueError/KeyError if it is not one."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    ts, step_key, metrics = value["ts"], value["step_key"], value["metrics"]
    if not _is_number(ts):
        raise ValueError(f"field 'ts' is not a number: {ts!r}")
    if not isinstance(step_key, str):
        raise ValueError(f"field 'step_key' is not a string: {step_key!r}")
    if not isinstance(metrics, dict):
        raise ValueError("field 'metrics' is not an object")
    return ts, step_key, value["step"], metrics


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


class _Column:
    """Append-only raw values: numbers in a float64 array, everything else in a sparse dict."""

    __slots__ = ("kind", "mask", "num", "raw")

    def __init__(self) -> None:
        self.num = array("d")
        self.kind = 0  # _FLOAT / _INT once a number arrived; _MIXED once both did
        self.mask: bytearray | None = None  # for _MIXED: 1 where the number was an int
        self.raw: dict[int, Any] = {}  # position -> a value that is not a plain number

    def append(self, value: Any) -> None:
        kind = type(value)
        if kind is float:
            is_int = False
        elif kind is int and -_EXACT <= value <= _EXACT:
            is_int = True
        else:
            self.raw[len(self.num)] = value
            self.num.append(math.nan)
            if self.mask is not None:
                self.mask.append(0)
            return
        seen = _INT if is_int else _FLOAT
        if self.kind != seen:
            if not self.kind:
                self.kind = seen
            elif self.mask is None:
                self.mask = bytearray([self.kind == _INT]) * len(self.num)
                self.kind = _MIXED
        if self.mask is not None:
            self.mask.append(is_int)
        self.num.append(value)

    def floats(self) -> npt.NDArray[np.float64]:
        """Every value as float64 (NaN where not a number); a copy."""
        return np.frombuffer(self.num, dtype=np.float64).copy()

    def values(self, positions: npt.NDArray[np.int64]) -> list[Any]:
        """The raw values at ``positions``."""
        nums = self.floats()[positions]
        if not self.raw and self.kind != _MIXED:
            plain: list[Any] = nums.astype(np.int64).tolist() if self.kind == _INT else nums.tolist()
            return plain
        out: list[Any] = nums.tolist()
        raw, mask, all_int = self.raw, self.mask, self.kind == _INT
        for j, p in enumerate(positions.tolist()):
            if p in raw:
                out[j] = raw[p]
            elif all_int or (mask is not None and mask[p]):
                out[j] = int(out[j])
        return out

    def value(self, position: int) -> Any:
        if position in self.raw:
            return self.raw[position]
        number = self.num[position]
        if self.kind == _INT or (self.mask is not None and self.mask[position]):
            return int(number)
        return number


class _KeyColumn:
    """One metric key: the record index and raw value of each of its points."""

    __slots__ = ("records", "values")

    def __init__(self) -> None:
        self.records = array("I")
        self.values = _Column()

    def record_indices(self) -> npt.NDArray[np.int64]:
        return np.frombuffer(self.records, dtype=np.uint32).astype(np.int64)


class MetricStore:
    """Every metrics.jsonl record in file order, columnar. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._ts = _Column()
        self._step = _Column()
        self._step_key_of = array("I")
        self._step_key_ids: dict[str, int] = {}
        self._step_key_names: list[str] = []
        self._keys: dict[str, _KeyColumn] = {}

    @classmethod
    def from_records(cls, records: Iterable[Any]) -> MetricStore:
        """A store holding ``records`` (parsed metrics.jsonl lines); raises on an invalid one."""
        store = cls()
        store.append_rows([decode_metric_record(r) for r in records])
        return store

    def append_rows(self, rows: Sequence[MetricRow]) -> None:
        """Append decoded rows at the end, in order."""
        with self._lock:
            ts_col, step_col, sk_of, sk_ids, keys = (
                self._ts,
                self._step,
                self._step_key_of,
                self._step_key_ids,
                self._keys,
            )
            index = len(sk_of)
            for ts, step_key, step, metrics in rows:
                sk = sk_ids.get(step_key)
                if sk is None:
                    sk = sk_ids[step_key] = len(self._step_key_names)
                    self._step_key_names.append(step_key)
                ts_col.append(ts)
                step_col.append(step)
                sk_of.append(sk)
                for name, value in metrics.items():
                    column = keys.get(name)
                    if column is None:
                        column = keys[name] = _KeyColumn()
                    column.records.append(index)
                    values = column.values
                    if type(value) is float and values.kind == _FLOAT and values.mask is None:
                        values.num.append(value)  # the common case, without a call
                    else:
                        values.append(value)
                index += 1

    def clear(self) -> None:
        """Drop every record (the file was rewritten and is read again)."""
        with self._lock:
            self._clear()

    def __len__(self) -> int:
        """Number of records."""
        return len(self._step_key_of)

    def keys(self) -> tuple[str, ...]:
        """Every metric name, sorted."""
        with self._lock:
            return tuple(sorted(self._keys))

    def step_keys(self) -> tuple[str, ...]:
        """Every step key records were logged against, sorted."""
        with self._lock:
            return tuple(sorted(self._step_key_names))

    def point_counts(self) -> dict[str, int]:
        """Metric name -> number of points (all step keys)."""
        with self._lock:
            return {name: len(column.records) for name, column in self._keys.items()}

    def time_range(self) -> tuple[float, float] | None:
        """(earliest, latest) record ts, or None without records."""
        with self._lock:
            if not len(self._step_key_of):
                return None
            ts = self._ts.floats()
            return float(np.nanmin(ts)), float(np.nanmax(ts))

    def step_key_counts(self, key: str) -> dict[str, int]:
        """How many points of ``key`` were logged against each step key."""
        with self._lock:
            return self._step_key_counts(key)

    def _step_key_counts(self, key: str) -> dict[str, int]:
        column = self._keys.get(key)
        if column is None:
            return {}
        sk_of = np.frombuffer(self._step_key_of, dtype=np.uint32).copy()
        counts = np.bincount(sk_of[column.record_indices()], minlength=len(self._step_key_names))
        return {name: int(counts[i]) for i, name in enumerate(self._step_key_names) if counts[i]}

    def default_x_key(self, key: str) -> str | None:
        """The step key ``key`` was logged against most often (ties: alphabetically first); None if unknown."""
        with self._lock:
            counts = self._step_key_counts(key)
        if not counts:
            return None
        return min(counts, key=lambda name: (-counts[name], name))

    def _select(self, key: str, x_key: str, start: int) -> tuple[_KeyColumn, npt.NDArray[np.int64]] | None:
        """The key's column and the positions of its points logged against ``x_key`` in records >= start."""
        column = self._keys.get(key)
        sk = self._step_key_ids.get(x_key)
        if column is None or sk is None:
            return None
        records = column.record_indices()
        first = bisect.bisect_left(column.records, start)
        sk_of = np.frombuffer(self._step_key_of, dtype=np.uint32).copy()
        positions = first + np.flatnonzero(sk_of[records[first:]] == sk)
        return column, positions.astype(np.int64)

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
            records = column.record_indices()[positions]
            return MetricSeries(
                key=key,
                x_key=x,
                record=records,
                step=self._step.floats()[records],
                value=column.values.floats()[positions],
                ts=self._ts.floats()[records],
            )

    def points(self, key: str, x_key: str) -> tuple[list[Any], list[Any], list[Any]]:
        """(steps, values, ts) of ``key`` logged against ``x_key``, raw, in file order."""
        with self._lock:
            selected = self._select(key, x_key, 0)
            if selected is None:
                return [], [], []
            column, positions = selected
            records = column.record_indices()[positions]
            return self._step.values(records), column.values.values(positions), self._ts.values(records)

    def record(self, index: int) -> MetricRecord:
        """Record ``index`` (file order) rebuilt with its raw values; IndexError past the end."""
        with self._lock:
            if not 0 <= index < len(self._step_key_of):
                raise IndexError(f"no metrics record {index} (the store holds {len(self._step_key_of)})")
            metrics: dict[str, Any] = {}
            for name, column in self._keys.items():
                position = bisect.bisect_left(column.records, index)
                if position < len(column.records) and column.records[position] == index:
                    metrics[name] = column.values.value(position)
            return MetricRecord(
                ts=self._ts.value(index),
                step_key=self._step_key_names[self._step_key_of[index]],
                step=self._step.value(index),
                metrics=metrics,
            )


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
