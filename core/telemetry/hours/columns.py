"""A partitioned telemetry stream's records as columns, and what each field is checked to be.

Contract:

- :data:`SPECS` says, per stream held as columns (``gpu_util``, ``phases``, ``gpu_processes``,
  ``engine_series``), which fields are numbers and which are shared values,
  and what each must be (:mod:`.decode` applies it): a time (``ts``, ``t0``,
  ``t1``) is a number of seconds in ``[0, 2**34)`` (:func:`not_times`); a name used as a key (phase, host, role, engine
  address, metric, label) is a string of at most :data:`MAX_TEXT` characters
  (or null where the stream may omit it); a GPU index, a rank is a bounded int
  (no attacker-chosen key that hashes alike); a GPU list and a label set are
  bounded.
- :class:`Columns`: one float64 array and one type tag per numeric field
  (:data:`~.record_table.TAG_FLOAT`, ``TAG_INT`` for an int a float64 holds
  exactly, ``TAG_NONE``, ``TAG_OTHER`` for anything else, kept in ``other``, as
  :class:`~miles_tui.core.telemetry.record_table.RecordTable` does), one code
  per shared field into a value table. Shared values are keyed by their
  canonical JSON (``[0, 1]`` and ``[0,1]`` are one code); the table holds each
  as parsed (a list, a dict, a string).
- :func:`concat` joins columns of one stream into one code space. Pure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.record_table import TAG_FLOAT, TAG_INT, TAG_NONE, TAG_OTHER, TableArrays
from miles_tui.core.telemetry.stream_records import (
    MAX_GPUS,
    MAX_INDEX,
    MAX_LABELS,
    MAX_TEXT,
    MAX_TIME,
    OPEN_T1,
    short_label,
)

FloatArray = npt.NDArray[np.float64]
TagArray = npt.NDArray[np.uint8]
CodeArray = npt.NDArray[np.int32]

EXACT_INT: Final = 2**53
"""An int below this magnitude is exact in a float64 (``TAG_INT``); a larger one is kept as it was."""


class _Phase(msgspec.Struct):
    name: Any
    t0: Any
    t1: Any
    node: Any = None
    gpus: msgspec.Raw = msgspec.Raw(b"null")
    rank: Any = None
    role: Any = None


class _Gpu(msgspec.Struct):
    ts: Any
    node: Any
    gpu: Any
    util: Any = None
    mem_mb: Any = None
    power_w: Any = None


class _Process(msgspec.Struct):
    ts: Any
    node: Any
    gpu: Any
    pid: Any = None
    name: Any = None
    mem_mb: Any = None


class _Engine(msgspec.Struct):
    ts: Any
    metric: Any
    addr: Any = None
    labels: msgspec.Raw = msgspec.Raw(b"null")
    value: Any = None


@dataclass(frozen=True)
class StreamSpec:
    """How one stream's records become columns."""

    record: type[msgspec.Struct]
    """The msgspec shape of a line (required fields have no default)."""
    times: tuple[str, ...]
    """Numeric fields that must be times (:func:`not_times`)."""
    numbers: tuple[str, ...]
    """Every numeric field (times first)."""
    names: Mapping[str, bool]
    """Shared string fields -> whether null is allowed."""
    indices: tuple[str, ...]
    """Shared fields that are bounded ints (a GPU index; a rank may also be null)."""
    raw: Mapping[str, Callable[[Any], Any]]
    """Shared fields decoded from their JSON text -> a check that returns the value or raises ValueError."""
    time: str
    """The field a record's time is (for spans and windows); a phase's is its end, its start while open."""

    @property
    def shared(self) -> tuple[str, ...]:
        return (*self.names, *self.indices, *self.raw)

    @property
    def fields(self) -> tuple[str, ...]:
        return (*self.numbers, *self.shared)


def not_times(name: str, values: FloatArray, tags: TagArray) -> npt.NDArray[np.bool_]:
    """Rows whose time field ``name`` holds no time (see :data:`~miles_tui.core.telemetry.stream_records.MAX_TIME`;
    a phase's ``t1`` may be the open marker's -1), as :func:`~miles_tui.core.telemetry.stream_records.is_time`."""
    number = tags <= TAG_INT
    ok = number & (values >= 0) & (values < MAX_TIME)
    if name == "t1":
        ok |= number & (values == OPEN_T1)
    return ~ok


def _gpu_list(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_GPUS:
        raise ValueError(f"field 'gpus' is not a list of at most {MAX_GPUS} GPU indices")
    if not all(type(g) is int and -MAX_INDEX < g < MAX_INDEX for g in value):
        raise ValueError("field 'gpus' holds something other than GPU indices")
    return value


def _labels(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_LABELS:
        raise ValueError(f"field 'labels' is not an object of at most {MAX_LABELS} labels")
    for key, item in value.items():
        if len(key) > MAX_TEXT:
            raise ValueError("field 'labels' has a label name too long to be one")
        if not short_label(item):
            raise ValueError(f"label {key[:40]!r} is not a short scalar")
    return value


SPECS: Final[Mapping[str, StreamSpec]] = {
    "gpu_util": StreamSpec(
        _Gpu, ("ts",), ("ts", "util", "mem_mb", "power_w"), {"node": False}, ("gpu",), {}, "ts"
    ),
    "phases": StreamSpec(
        _Phase, ("t0", "t1"), ("t0", "t1"), {"name": False, "node": True, "role": True}, ("rank",),
        {"gpus": _gpu_list}, "t1",
    ),
    "gpu_processes": StreamSpec(
        _Process, ("ts",), ("ts", "pid", "mem_mb"), {"node": False, "name": True}, ("gpu",), {}, "ts"
    ),
    "engine_series": StreamSpec(
        _Engine, ("ts",), ("ts", "value"), {"metric": False, "addr": True}, (), {"labels": _labels}, "ts"
    ),
}  # fmt: skip
"""The streams held as columns, and how."""


@dataclass(frozen=True, eq=False)
class Columns:
    """Records of one stream as columns; see the module docstring."""

    stream: str
    """The stream."""
    size: int
    """Records."""
    numbers: Mapping[str, FloatArray]
    """Numeric field -> float64 values (0 where the tag is not a number)."""
    tags: Mapping[str, TagArray]
    """Numeric field -> each value's JSON type."""
    other: Mapping[str, Mapping[int, Any]]
    """Numeric field -> row -> the value of each row tagged ``TAG_OTHER``."""
    codes: Mapping[str, CodeArray]
    """Shared field -> each row's code into :attr:`values`."""
    values: tuple[Any, ...]
    """Code -> value (a string, None, an int, a list, a dict)."""

    def value_of(self, field: str, row: int) -> Any:
        """One field of one row, as parsed."""
        if field in self.codes:
            return self.values[int(self.codes[field][row])]
        tag = int(self.tags[field][row])
        if tag == TAG_OTHER:
            return self.other[field][row]
        value = float(self.numbers[field][row])
        return None if tag == TAG_NONE else int(value) if tag == TAG_INT else value

    def column(self, field: str) -> list[Any]:
        """One field over every row, as parsed."""
        return [self.value_of(field, row) for row in range(self.size)]

    def time(self) -> FloatArray:
        """Each record's time (a phase: its end, its start while open)."""
        if self.stream == "phases":
            t0, t1 = self.numbers["t0"], self.numbers["t1"]
            return np.where(t1 == -1, t0, t1)
        return self.numbers[SPECS[self.stream].time]

    def span(self) -> tuple[float, float] | None:
        """Earliest and latest time any record mentions (a closed phase: t0 to t1)."""
        if not self.size:
            return None
        if self.stream == "phases":
            t0, t1 = self.numbers["t0"], self.numbers["t1"]
            closed = t1 != -1
            lo = min(float(t0.min()), float(t1[closed].min()) if closed.any() else math.inf)
            return lo, max(float(t0.max()), float(t1.max()))
        ts = self.time()
        return float(ts.min()), float(ts.max())

    def take(self, rows: npt.NDArray[Any]) -> Columns:
        """The rows selected (a boolean mask or indices), in order."""
        index = np.flatnonzero(rows) if rows.dtype == np.bool_ else rows.astype(np.int64)
        where = {int(old): new for new, old in enumerate(index.tolist())} if any(self.other.values()) else {}
        return Columns(
            self.stream,
            len(index),
            {k: v[index] for k, v in self.numbers.items()},
            {k: v[index] for k, v in self.tags.items()},
            {k: {where[r]: v for r, v in rows_.items() if r in where} for k, rows_ in self.other.items()},
            {k: v[index] for k, v in self.codes.items()},
            self.values,
        )

    def table_arrays(self, numeric: Sequence[str], shared: Sequence[str]) -> TableArrays:
        """The fields as :class:`~miles_tui.core.telemetry.record_table.TableArrays` (what the stall rule reads)."""
        return TableArrays(
            self.size,
            {k: self._numeric(k) for k in numeric},
            {k: self.codes[k].astype(np.int64) for k in shared},
            list(self.values),
        )

    def _numeric(self, field: str) -> tuple[FloatArray, TagArray, dict[int, Any]]:
        """A field as (float64s, tags, other values); a shared field (a rank) through its value table."""
        if field in self.numbers:
            return self.numbers[field], self.tags[field], dict(self.other[field])
        table = self.values
        kinds = [TAG_OF.get(type(v), TAG_OTHER) for v in table]
        floats = np.array([float(v) if k <= TAG_INT else 0.0 for v, k in zip(table, kinds, strict=True)])
        codes = self.codes[field]
        tags = np.array(kinds, np.uint8)[codes] if table else np.zeros(0, np.uint8)
        other = {int(row): table[int(codes[row])] for row in np.flatnonzero(tags == TAG_OTHER).tolist()}
        return (floats[codes] if table else np.zeros(0)), tags, other


def empty(stream: str) -> Columns:
    """No records of ``stream``."""
    spec = SPECS[stream]
    return Columns(
        stream,
        0,
        {k: np.zeros(0) for k in spec.numbers},
        {k: np.zeros(0, np.uint8) for k in spec.numbers},
        {k: {} for k in spec.numbers},
        {k: np.zeros(0, np.int32) for k in spec.shared},
        (),
    )


TAG_OF: Final[Mapping[type, int]] = {float: TAG_FLOAT, int: TAG_INT, type(None): TAG_NONE}


def numbers_of(values: list[Any]) -> tuple[FloatArray, TagArray, dict[int, Any]]:
    """(float64s, tags, row -> value of each row tagged other) of one numeric field."""
    n = len(values)
    kinds = set(map(type, values))
    if kinds == {float}:  # the common cases, in two passes at C speed
        return np.array(values, np.float64), np.zeros(n, np.uint8), {}
    if kinds == {int}:
        try:
            ints = np.array(values, np.int64)
        except OverflowError:
            ints = None
        if ints is not None and not (np.abs(ints) >= EXACT_INT).any():
            return ints.astype(np.float64), np.full(n, TAG_INT, np.uint8), {}
    tags = np.fromiter(map(TAG_OF.get, map(type, values), repeat(TAG_OTHER)), np.uint8, n)
    other: dict[int, Any] = {}
    out: FloatArray | None = None
    if not n or int(tags.max()) <= TAG_INT:
        try:
            out = np.array(values, np.float64) if n else np.zeros(0)
        except OverflowError:  # an int beyond any float
            out = None
    if out is None:
        out = np.zeros(n)
        for row in np.flatnonzero(tags != TAG_NONE).tolist():
            value = values[row]
            if tags[row] == TAG_FLOAT or (tags[row] == TAG_INT and -EXACT_INT < value < EXACT_INT):
                out[row] = value
            else:
                tags[row], other[row] = TAG_OTHER, value
        return out, tags, other
    big = (tags == TAG_INT) & ~(np.abs(out) < EXACT_INT)
    for row in np.flatnonzero(big).tolist():
        tags[row], other[row], out[row] = TAG_OTHER, values[row], 0.0
    out[tags == TAG_NONE] = 0.0
    return out, tags, other


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True)


class Interner:
    """Shared values -> codes, keyed by value (strings) or canonical JSON (anything else)."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._codes: dict[Any, int] = {}

    def code(self, key: Any, value: Any) -> int:
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self.values)
            self.values.append(value)
        return code

    def code_of(self, value: Any) -> int:
        """The code of a value as parsed (a string, None, an int, a list, a dict)."""
        return self.code(self.key_of(value), value)

    @staticmethod
    def key_of(value: Any) -> Any:
        """What a value is keyed by: itself (a string, None), ("i", n) (an int), ("j", canonical JSON)."""
        if value is None or type(value) is str:
            return value
        if type(value) is int:
            return ("i", value)
        return ("j", canonical(value))


DENSE_BY_TABLE: Final = 1 << 22
"""Int arrays whose range is under this (and under a few times their length) are numbered through a table."""


def _dense(array: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """Each row's rank among the distinct values (np.unique's inverse): by a table over a small int range, else
    by a sort."""
    if len(array) and array.dtype.kind in "iu":
        low, high = int(array.min()), int(array.max())
        span = high - low + 1
        if span < DENSE_BY_TABLE and span <= 4 * len(array) and low > -(1 << 62) and high < 1 << 62:
            shifted = array.astype(np.int64) - low
            seen = np.zeros(span, np.int64)
            seen[shifted] = 1
            rank: npt.NDArray[np.int64] = np.cumsum(seen) - 1
            return rank[shifted]
    return np.unique(array, return_inverse=True)[1].ravel().astype(np.int64)


def dense_keys(*codes: npt.NDArray[Any], compact: bool = True) -> npt.NDArray[np.int64]:
    """One int64 per row that is equal exactly where every array's value is, numbered densely (no product of
    code spaces overflows however many values a hostile file makes). Arrays of small non-negative ints (codes)
    are combined as they are, others by rank: one sort in all, while the product of ranges fits. Without
    ``compact`` the keys are left as combined (equal where the rows are, not numbered 0..n-1): no final sort."""
    rows = len(codes[0]) if codes else 0
    key: npt.NDArray[np.int64] = np.zeros(rows, np.int64)
    span = 1
    for array in codes:
        small = rows and array.dtype.kind in "iu" and int(array.min()) >= 0 and int(array.max()) < 1 << 31
        part = array.astype(np.int64) if small else _dense(array)
        size = int(part.max()) + 1 if rows else 1
        if span * size >= 1 << 62:
            key = _dense(key)
            span = int(key.max()) + 1
        key, span = key * size + part, span * size
    return _dense(key) if rows and compact else key


def concat(parts: Iterable[Columns], stream: str) -> Columns:
    """Columns of one stream end to end, in one code space."""
    parts = [p for p in parts if p.size]
    if not parts:
        return empty(stream)
    if len(parts) == 1:
        return parts[0]
    interner = Interner()
    codes: dict[str, list[CodeArray]] = {k: [] for k in parts[0].codes}
    other: dict[str, dict[int, Any]] = {k: {} for k in parts[0].other}
    offset = 0
    for part in parts:
        table = np.array([interner.code_of(v) for v in part.values], np.int32)
        for k, v in part.codes.items():
            codes[k].append(table[v] if len(table) else v)
        for k, rows in part.other.items():
            other[k].update((offset + r, v) for r, v in rows.items())
        offset += part.size
    return Columns(
        stream,
        offset,
        {k: np.concatenate([p.numbers[k] for p in parts]) for k in parts[0].numbers},
        {k: np.concatenate([p.tags[k] for p in parts]) for k in parts[0].tags},
        other,
        {k: np.concatenate(v) for k, v in codes.items()},
        tuple(interner.values),
    )
