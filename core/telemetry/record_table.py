"""Telemetry records kept as columns: what holding a long run's ``gpu_util`` and ``phases`` costs.

Contract:

- A :class:`RecordTable` holds records of one frozen dataclass (:class:`GpuUtil`
  or :class:`Phase`) as one column per field; :meth:`RecordTable.extend`
  appends, ``len``, indexing, slicing and iteration rebuild records equal to
  the ones appended: same values of the same types (an int stays an int, a
  float keeps its bits, NaN included, None stays None, any other JSON value is
  kept as it was).
- A numeric field costs 9 bytes a record (a float64 and a type tag), 8 while
  every value it got is a float (times, utilisation), 4 while every value it
  got is an int that fits 32 bits (GPU indices, ranks, memory and power
  readings); a field of shared values (names, hosts, roles, the
  shared GPU lists) costs a 1-, 2- or 4-byte code (as many as the codes need)
  into a value table that the tables of one stream share (:class:`Interner`).
  A record held as an object cost ~180 bytes, and the allocator's
  fragmentation around millions of them about as much again.
- :meth:`RecordTable.numbers` and :meth:`RecordTable.codes` hand a field out as
  numpy arrays, for rules that read every record without building one object
  per record (a long run's phases, read every few seconds).
- Pure and not thread-safe: the reader that owns a table locks around it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final, Generic, TypeVar, overload

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.stream_records import GpuUtil, Phase

R = TypeVar("R", GpuUtil, Phase)

TAG_FLOAT: Final = 0
TAG_INT: Final = 1
TAG_NONE: Final = 2
TAG_OTHER: Final = 3
_EXACT_INT: Final = 2**53
"""An int of at most this magnitude survives a float64; a larger one is kept as an object."""
_INT32: Final = 2**31
"""A field whose values are all ints in [-_INT32, _INT32) is held as int32s."""
_CODE_TYPES: Final = (("B", 1 << 8), ("H", 1 << 16), ("I", 1 << 32))
"""Array type codes of shared-field codes, narrowest first, with the number of codes each holds."""

NUMERIC_FIELDS: Final = {
    GpuUtil: frozenset({"ts", "gpu", "util", "mem_mb", "power_w"}),
    Phase: frozenset({"t0", "t1", "rank"}),
}
"""Fields held as tagged float64; the rest (names, hosts, roles, GPU lists) are shared values, held by reference."""


class _Numbers:
    """One numeric field: float64 values, a tag per value, and the rare value a float64 cannot hold.

    Held in the narrowest of three forms that is exact for every value so far: int32s (``ints``; no
    ``values``), then float64s without tags (``tags`` None: every value a float), then float64s and tags.
    """

    __slots__ = ("ints", "other", "tags", "values")

    def __init__(self) -> None:
        self.ints: array[int] | None = array("i")
        self.values = array("d")
        self.tags: bytearray | None = None
        self.other: dict[int, Any] = {}

    def extend(self, batch: Sequence[Any]) -> None:
        ints = self.ints
        if ints is not None:
            if all(type(v) is int and -_INT32 <= v < _INT32 for v in batch):
                ints.extend(batch)
                return
            self.values = array("d", ints)  # exact: every int32 is a float64
            self.tags = bytearray([TAG_INT]) * len(ints) if ints else None
            self.ints = None
        if all(type(v) is float for v in batch):  # the common case, at C speed
            self.values.extend(batch)
            if self.tags is not None:
                self.tags.extend(bytes(len(batch)))
            return
        if self.tags is None:
            self.tags = bytearray(len(self.values))  # TAG_FLOAT for every value so far
        values, tags = self.values, self.tags
        base = len(values)
        for i, v in enumerate(batch):
            kind = type(v)
            if kind is float:
                values.append(v)
                tags.append(TAG_FLOAT)
            elif kind is int and -_EXACT_INT <= v <= _EXACT_INT:
                values.append(float(v))
                tags.append(TAG_INT)
            elif v is None:
                values.append(0.0)
                tags.append(TAG_NONE)
            else:  # a bool, a huge int, a string, a list: kept as it was
                values.append(0.0)
                tags.append(TAG_OTHER)
                self.other[base + i] = v

    def get(self, start: int, stop: int) -> list[Any]:
        if self.ints is not None:
            return self.ints[start:stop].tolist()
        if self.tags is None:
            return self.values[start:stop].tolist()
        tags = self.tags[start:stop]
        floats = tags.count(TAG_FLOAT)
        if floats == len(tags):
            return self.values[start:stop].tolist()
        if not floats and tags.count(TAG_INT) == len(tags):  # a column of ints (ranks, GPU indices), at C speed
            ints: list[Any] = np.frombuffer(self.values, np.float64, stop - start, start * 8).astype(np.int64).tolist()
            return ints
        return _untagged(self.values[start:stop].tolist(), tags, self.other, start)

    def arrays(self, size: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint8]]:
        """The first ``size`` values as float64s and their tags (new arrays)."""
        if self.ints is not None:
            return np.frombuffer(self.ints, np.int32, size).astype(np.float64), np.full(size, TAG_INT, np.uint8)
        values = np.frombuffer(self.values, np.float64, size).copy()
        if self.tags is None:
            return values, np.zeros(size, np.uint8)
        return values, np.frombuffer(self.tags, np.uint8, size).copy()

    def clear(self) -> None:
        self.ints = array("i")
        self.values = array("d")
        self.tags = None
        self.other = {}


def _untagged(values: list[Any], tags: Iterable[int], other: Mapping[int, Any], offset: int) -> list[Any]:
    """``values`` (float64s as Python floats, row ``offset`` first) with each non-float tag applied: an exact
    int back to an int, None back to None, any other value from ``other``."""
    for i, tag in enumerate(tags):
        if tag != TAG_FLOAT:
            values[i] = int(values[i]) if tag == TAG_INT else None if tag == TAG_NONE else other[offset + i]
    return values


class Interner:
    """Value <-> code for the shared fields of one stream's tables.

    A string (or None) is one code per distinct value; any other value (a shared
    GPU list, an odd JSON value) is one code per object, so values equal but of
    another type (1 and 1.0 and True, 0.0 and -0.0) never share a code. Grows with
    the distinct values seen; a stream's names, hosts and roles are few.
    """

    __slots__ = ("_codes", "values")

    def __init__(self) -> None:
        self.values: list[Any] = []
        """Code -> value."""
        self._codes: dict[Any, int] = {}

    def codes(self, batch: Sequence[Any]) -> list[int]:
        codes = self._codes
        out = []
        for value in batch:
            key = value if value is None or type(value) is str else (id(value),)
            code = codes.get(key)
            if code is None:
                code = codes[key] = len(self.values)
                self.values.append(value)
            out.append(code)
        return out


class _Shared:
    """One field of shared values: a code each (see :class:`Interner`), in the narrowest array that holds
    every code given so far (widened when the interner outgrows it)."""

    __slots__ = ("codes", "interner")

    def __init__(self, interner: Interner) -> None:
        self.interner = interner
        self.codes = array("B")

    def extend(self, batch: Sequence[Any]) -> None:
        codes = self.interner.codes(batch)
        needed = len(self.interner.values)
        if needed > 1 << (8 * self.codes.itemsize):
            typecode = next(code for code, room in _CODE_TYPES if needed <= room)
            self.codes = array(typecode, self.codes)
        self.codes.extend(codes)

    def get(self, start: int, stop: int) -> list[Any]:
        return list(map(self.interner.values.__getitem__, self.codes[start:stop]))

    def clear(self) -> None:
        self.codes = array("B")


class RecordTable(Generic[R]):
    """Records of one type as columns; see the module docstring."""

    __slots__ = ("_columns", "_kind", "_names", "_size")

    def __init__(self, kind: type[R], interner: Interner | None = None) -> None:
        self._kind: type[R] = kind
        self._names = tuple(f.name for f in fields(kind))
        numeric = NUMERIC_FIELDS[kind]
        shared = Interner() if interner is None else interner
        self._columns: tuple[_Numbers | _Shared, ...] = tuple(
            _Numbers() if name in numeric else _Shared(shared) for name in self._names
        )
        self._size = 0

    @property
    def kind(self) -> type[R]:
        """The record type held."""
        return self._kind

    def __len__(self) -> int:
        return self._size

    def extend(self, records: Iterable[Any]) -> None:
        """Append records of this table's type (anything else is a caller's bug: TypeError)."""
        batch = list(records)
        if not batch:
            return
        if any(type(r) is not self._kind for r in batch):
            raise TypeError(f"a RecordTable of {self._kind.__name__} holds only those")
        for name, column in zip(self._names, self._columns, strict=True):
            column.extend([getattr(r, name) for r in batch])
        self._size += len(batch)

    def clear(self) -> None:
        """Drop every record."""
        for column in self._columns:
            column.clear()
        self._size = 0

    def rows(self, start: int = 0, stop: int | None = None) -> list[R]:
        """Records ``start`` to ``stop`` (clipped to the table), rebuilt."""
        start, stop, _ = slice(start, stop).indices(self._size)
        if start >= stop:
            return []
        kind = self._kind
        return [kind(*values) for values in zip(*(c.get(start, stop) for c in self._columns), strict=True)]

    def column(self, name: str) -> list[Any]:
        """Every record's value of one field, in order."""
        return self._columns[self._names.index(name)].get(0, self._size)

    def numbers(self, name: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint8], dict[int, Any]]:
        """A numeric field as (float64 values, type tags, row -> the value of each row tagged other); the
        tags are :data:`TAG_FLOAT`, :data:`TAG_INT` (the value is an exact int), :data:`TAG_NONE`, :data:`TAG_OTHER`."""
        column = self._columns[self._names.index(name)]
        if not isinstance(column, _Numbers):
            raise TypeError(f"{name!r} is not a numeric field of {self._kind.__name__}")
        if not self._size:
            return np.zeros(0), np.zeros(0, np.uint8), {}
        values, tags = column.arrays(self._size)
        return values, tags, dict(column.other)

    def codes(self, name: str) -> npt.NDArray[np.int64]:
        """A shared field's codes (their values are the interner's)."""
        column = self._columns[self._names.index(name)]
        if not isinstance(column, _Shared):
            raise TypeError(f"{name!r} is not a shared field of {self._kind.__name__}")
        if not self._size:
            return np.zeros(0, np.int64)
        return np.frombuffer(column.codes, f"u{column.codes.itemsize}", self._size).astype(np.int64)

    @overload
    def __getitem__(self, index: int) -> R: ...
    @overload
    def __getitem__(self, index: slice) -> list[R]: ...
    def __getitem__(self, index: int | slice) -> R | list[R]:
        if isinstance(index, slice):
            if index.step not in (None, 1):
                return self.rows()[index]
            return self.rows(*index.indices(self._size)[:2])
        position = index + self._size if index < 0 else index
        if not 0 <= position < self._size:
            raise IndexError("record index out of range")
        return self.rows(position, position + 1)[0]

    def __iter__(self) -> Iterator[R]:
        chunk = 4096
        for start in range(0, self._size, chunk):
            yield from self.rows(start, start + chunk)

    def __bool__(self) -> bool:
        return self._size > 0


@dataclass(frozen=True)
class TableArrays:
    """Fields of several tables of one stream (one interner), rows end to end, as numpy arrays."""

    size: int
    """Rows."""
    numbers: Mapping[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.uint8], dict[int, Any]]]
    """Numeric field -> (values, tags, row -> value of the rows tagged TAG_OTHER); see :meth:`RecordTable.numbers`."""
    codes: Mapping[str, npt.NDArray[np.int64]]
    """Shared field -> each row's code."""
    values: Sequence[Any]
    """Code -> value."""

    def column(self, name: str) -> list[Any]:
        """One field's values as they were appended (numbers by their tags: an int stays an int)."""
        if name in self.codes:
            return list(map(self.values.__getitem__, self.codes[name].tolist()))
        values, tags, other = self.numbers[name]
        return _untagged(values.tolist(), tags.tobytes(), other, 0)


def table_arrays(
    tables: Sequence[RecordTable[Any]], numeric: Sequence[str], shared: Sequence[str], interner: Interner
) -> TableArrays:
    """The fields of ``tables`` (which share ``interner``), rows end to end."""
    size = sum(len(t) for t in tables)
    numbers: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.uint8], dict[int, Any]]] = {}
    for name in numeric:
        parts = [t.numbers(name) for t in tables]
        other: dict[int, Any] = {}
        offset = 0
        for table, (_, _, rows) in zip(tables, parts, strict=True):
            other.update((offset + row, value) for row, value in rows.items())
            offset += len(table)
        values = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
        tags = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.uint8)
        numbers[name] = (values, tags, other)
    codes = {
        name: np.concatenate([t.codes(name) for t in tables]) if tables else np.zeros(0, np.int64) for name in shared
    }
    return TableArrays(size, numbers, codes, list(interner.values))
