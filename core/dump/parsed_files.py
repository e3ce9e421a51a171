"""Parsed dump files kept for reuse: a least-recently-used map bounded by entries and by bytes.

Contract: :class:`ParsedFiles` holds what a load returned under the file's
(path, size, mtime), weighs each value once when it is put
(:func:`held_bytes`), and drops the least recently used values while it holds
more than ``max_files`` of them or more than ``max_bytes`` bytes. The value
just put is always kept, however big: the caller is about to use it. It never
reads a file itself and never imports numpy (a value holding arrays has
imported it already).

Why bytes: a train shard's tensors are copies of the file's records (the
reader copies instead of mapping, so a file truncated later cannot SIGBUS),
so a count of files alone would let 64 big shards hold gigabytes.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

ParseKey = tuple[str, int, float]
"""(path, size, mtime) of a parsed file."""

ARRAY_HEADER_BYTES = 112
"""What a numpy array object costs besides its elements (CPython 3.11+, 64-bit)."""


def held_bytes(value: Any) -> int:
    """The memory a loaded value holds: its containers and scalars, and each array's elements once.

    An array that is a view (a strided or broadcast tensor) counts the elements of
    the array that owns them, once however many views share it.
    """
    seen: set[int] = set()
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        owner = _array_owner(item)
        if owner is not None:
            total += ARRAY_HEADER_BYTES
            if id(owner) != id(item):
                if id(owner) in seen:
                    continue
                seen.add(id(owner))
            total += _element_bytes(owner)
            continue
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        else:
            for name in getattr(type(item), "__slots__", ()):  # an inert record: its arguments and state
                if hasattr(item, name):
                    stack.append(getattr(item, name))
    return total


def _array_owner(item: Any) -> Any:
    """The array that owns an array's elements (itself when it owns them); None for what is not an array."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(item, numpy.ndarray):
        return None
    owner = item
    while isinstance(owner.base, numpy.ndarray):
        owner = owner.base
    return owner


def _element_bytes(array: Any) -> int:
    """Bytes of the elements an array owns; for one over a foreign buffer, the bytes its strides reach."""
    if array.flags.owndata or array.base is None or array.size == 0:
        return int(array.nbytes)
    reach = array.itemsize + sum((n - 1) * abs(s) for n, s in zip(array.shape, array.strides, strict=True))
    return int(min(reach, array.nbytes))


class ParsedFiles:
    """Parsed files, least recently used first out, bounded by ``max_files`` and ``max_bytes``."""

    def __init__(self, max_files: int, max_bytes: int) -> None:
        self.max_files = max_files
        self.max_bytes = max_bytes
        self._values: OrderedDict[ParseKey, tuple[Any, int]] = OrderedDict()
        self._bytes = 0

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[ParseKey]:
        return iter(self._values)

    @property
    def nbytes(self) -> int:
        """Bytes the kept values hold (as :func:`held_bytes` weighed them when they were put)."""
        return self._bytes

    def get(self, key: ParseKey) -> Any | None:
        """The value parsed for ``key`` (now the most recently used), or None."""
        entry = self._values.get(key)
        if entry is None:
            return None
        self._values.move_to_end(key)
        return entry[0]

    def put(self, key: ParseKey, value: Any) -> None:
        """Keep ``value`` as the most recently used; drop the oldest while over either bound."""
        old = self._values.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        weight = held_bytes(value)
        self._values[key] = (value, weight)
        self._bytes += weight
        while len(self._values) > 1 and (len(self._values) > self.max_files or self._bytes > self.max_bytes):
            _, (_, dropped) = self._values.popitem(last=False)
            self._bytes -= dropped
