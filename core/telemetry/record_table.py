"""Telemetry records kept as columns: what holding a long run's ``gpu_util`` and ``phases`` costs.

Contract:

- A :class:`RecordTable` holds records of one frozen dataclass (:class:`GpuUtil`
  or :class:`Phase`) as one column per field; :meth:`RecordTable.extend`
  appends, ``len``, indexing, slicing and iteration rebuild records equal to
  the ones appended: same values of the same types (an int stays an int, a
  float keeps its bits, NaN included, None stays None, any other JSON value is
  kept as it was).
- A numeric field costs 9 bytes a record (a float64 and a type tag); a field of
  shared values (interned names, the shared GPU lists) costs a reference. A
  record held as an object cost ~180 bytes, and the allocator's fragmentation
  around millions of them about as much again.
- Pure and not thread-safe: the reader that owns a table locks around it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields
from typing import Any, Final, Generic, TypeVar, overload

import numpy as np

from miles_tui.core.telemetry.stream_records import GpuUtil, Phase

R = TypeVar("R", GpuUtil, Phase)

_FLOAT: Final = 0
_INT: Final = 1
_NONE: Final = 2
_OTHER: Final = 3
_EXACT_INT: Final = 2**53
"""An int of at most this magnitude survives a float64; a larger one is kept as an object."""

NUMERIC_FIELDS: Final = {
    GpuUtil: frozenset({"ts", "gpu", "util", "mem_mb", "power_w"}),
    Phase: frozenset({"t0", "t1", "rank"}),
}
"""Fields held as tagged float64; the rest (names, hosts, roles, GPU lists) are shared values, held by reference."""


class _Numbers:
    """One numeric field: float64 values, a tag per value, and the rare value a float64 cannot hold."""

    __slots__ = ("other", "tags", "values")

    def __init__(self) -> None:
        self.values = array("d")
        self.tags = bytearray()
        self.other: dict[int, Any] = {}

    def extend(self, batch: Sequence[Any]) -> None:
        if all(type(v) is float for v in batch):  # the common case, at C speed
            self.values.extend(batch)
            self.tags.extend(bytes(len(batch)))
            return
        base = len(self.values)
        for i, v in enumerate(batch):
            kind = type(v)
            if kind is float:
                self.values.append(v)
                self.tags.append(_FLOAT)
            elif kind is int and -_EXACT_INT <= v <= _EXACT_INT:
                self.values.append(float(v))
                self.tags.append(_INT)
            elif v is None:
                self.values.append(0.0)
                self.tags.append(_NONE)
            else:  # a bool, a huge int, a string, a list: kept as it was
                self.values.append(0.0)
                self.tags.append(_OTHER)
                self.other[base + i] = v

    def get(self, start: int, stop: int) -> list[Any]:
        tags = self.tags[start:stop]
        floats = tags.count(_FLOAT)
        if floats == len(tags):
            return self.values[start:stop].tolist()
        if not floats and tags.count(_INT) == len(tags):  # a column of ints (ranks, GPU indices), at C speed
            ints: list[Any] = np.frombuffer(self.values, np.float64, stop - start, start * 8).astype(np.int64).tolist()
            return ints
        out: list[Any] = self.values[start:stop].tolist()
        for i, tag in enumerate(tags):
            if tag == _INT:
                out[i] = int(out[i])
            elif tag == _NONE:
                out[i] = None
            elif tag == _OTHER:
                out[i] = self.other[start + i]
        return out

    def clear(self) -> None:
        self.values = array("d")
        self.tags = bytearray()
        self.other = {}


class _Shared:
    """One field of shared values (interned strings, shared tuples): a reference each."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: list[Any] = []

    def extend(self, batch: Sequence[Any]) -> None:
        self.values += batch

    def get(self, start: int, stop: int) -> list[Any]:
        return self.values[start:stop]

    def clear(self) -> None:
        self.values = []


class RecordTable(Generic[R]):
    """Records of one type as columns; see the module docstring."""

    __slots__ = ("_columns", "_kind", "_names", "_size")

    def __init__(self, kind: type[R]) -> None:
        self._kind: type[R] = kind
        self._names = tuple(f.name for f in fields(kind))
        numeric = NUMERIC_FIELDS[kind]
        self._columns: tuple[_Numbers | _Shared, ...] = tuple(
            _Numbers() if name in numeric else _Shared() for name in self._names
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
