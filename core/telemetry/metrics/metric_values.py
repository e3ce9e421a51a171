"""A column of raw metric values: numbers in a float64 array, each value's JSON type kept.

Contract: :class:`Values` holds a column as decoded from metrics.jsonl (a float
as a float, an integer within 2**53 as an integer, anything else exactly as
parsed); :func:`values_of` builds one from parsed values; :func:`int_flags`
finds the integers of a column and moves those a float64 cannot hold out of the numbers. Split from
:mod:`~miles_tui.core.telemetry.metrics.metric_batch`, which decodes lines into batches of these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

EXACT: Final = 2**53
"""Integers up to this magnitude survive a float64 round trip; bigger ones are kept as Python ints."""


@dataclass(frozen=True)
class Values:
    """A column of raw values: numbers in a float64 array, each value's JSON type kept."""

    num: FloatArray
    """Every value as a float64; NaN where the value is not a plain number."""
    ints: BoolArray | None
    """True where the value is a JSON integer within 2**53 (exact in ``num``); None when there is none."""
    raw: Mapping[int, Any]
    """Position -> a value that is not a plain number, as parsed."""

    def __len__(self) -> int:
        return len(self.num)

    def python(self, positions: npt.NDArray[np.intp] | None = None) -> list[Any]:
        """The raw values (at ``positions``, default all), with their JSON types."""
        num = self.num if positions is None else self.num[positions]
        out: list[Any] = num.tolist()
        if self.ints is not None:
            ints = self.ints if positions is None else self.ints[positions]
            for j in np.flatnonzero(ints).tolist():
                out[j] = int(out[j])
        if self.raw:
            if positions is None:
                for p, v in self.raw.items():
                    out[p] = v
            else:
                raw = self.raw
                for j, p in enumerate(positions.tolist()):
                    if p in raw:
                        out[j] = raw[p]
        return out

    def value(self, position: int) -> Any:
        """One raw value."""
        if position in self.raw:
            return self.raw[position]
        number = float(self.num[position])
        return int(number) if self.ints is not None and self.ints[position] else number

    def take(self, order: npt.NDArray[np.intp]) -> Values:
        """The values at ``order`` (a permutation of the positions), in that order."""
        raw: dict[int, Any] = {}
        if self.raw:
            where = np.empty(len(order), np.intp)
            where[order] = np.arange(len(order))
            raw = {int(where[p]): v for p, v in self.raw.items()}
        return Values(self.num[order], None if self.ints is None else self.ints[order], raw)

    @staticmethod
    def scatter(parts: Sequence[tuple[npt.NDArray[np.int64], Values]], total: int) -> Values:
        """``total`` values, each part's placed at its positions (together they cover every position once)."""
        num = np.empty(total, np.float64)
        ints = np.zeros(total, bool) if any(v.ints is not None for _, v in parts) else None
        raw: dict[int, Any] = {}
        for positions, values in parts:
            num[positions] = values.num
            if ints is not None and values.ints is not None:
                ints[positions] = values.ints
            if values.raw:
                raw.update((int(positions[p]), v) for p, v in values.raw.items())
        return Values(num, ints, raw)

    @staticmethod
    def concat(parts: Sequence[Values]) -> Values:
        """The values of ``parts`` one after the other."""
        if len(parts) == 1:
            return parts[0]
        num = np.concatenate([p.num for p in parts]) if parts else np.zeros(0)
        ints = None
        if any(p.ints is not None for p in parts):
            ints = np.concatenate([p.ints if p.ints is not None else np.zeros(len(p), bool) for p in parts])
        raw: dict[int, Any] = {}
        base = 0
        for p in parts:
            raw.update((base + k, v) for k, v in p.raw.items())
            base += len(p)
        return Values(num, ints, raw)


EMPTY_VALUES: Final = Values(np.zeros(0), None, {})


def values_of(items: Sequence[Any]) -> Values:
    """The column of ``items`` (parsed JSON values, already checked by :func:`check_value`)."""
    types = set(map(type, items))
    if types <= {float, int}:
        try:
            num = np.array(items, dtype=np.float64) if items else np.zeros(0)
        except (OverflowError, TypeError, ValueError):
            return _values_slow(items)
        ints, raw = int_flags(items, num, types)
        return Values(num, ints, raw)
    return _values_slow(items)


def int_flags(
    items: Sequence[Any], num: FloatArray, types: set[type] | None = None
) -> tuple[BoolArray | None, dict[int, Any]]:
    """Where the JSON integers of ``items`` are (None: nowhere), ``num`` holding ``items`` as float64s, and the
    integers a float64 does not hold exactly, moved out of ``num`` into raw values (:func:`_beyond_exact`).
    ``types``: the set of ``items``' types, when the caller has it."""
    types = set(map(type, items)) if types is None else types
    if int not in types:
        return None, {}
    ints = np.ones(len(items), bool) if len(types) == 1 else np.array([type(v) is int for v in items], bool)
    raw = _beyond_exact(items, num, ints)
    return (ints if ints.any() else None), raw


def _beyond_exact(items: Sequence[Any], num: FloatArray, ints: BoolArray) -> dict[int, Any]:
    """Integers a float64 does not hold exactly, moved out of ``num`` into the raw values (found by their rounded
    value: at 2**53 or beyond, the original is looked at)."""
    raw: dict[int, Any] = {}
    for p in np.flatnonzero(ints & ~(np.abs(num) < EXACT)).tolist():
        if not -EXACT <= items[p] <= EXACT:
            raw[p] = items[p]
            num[p], ints[p] = np.nan, False
    return raw


def _values_slow(items: Sequence[Any]) -> Values:
    nums: list[float] = [np.nan] * len(items)
    int_at: list[int] = []
    raw: dict[int, Any] = {}
    for i, v in enumerate(items):
        kind = type(v)
        if kind is float:
            nums[i] = v
        elif kind is int and -EXACT <= v <= EXACT:
            nums[i] = float(v)
            int_at.append(i)
        else:
            raw[i] = v
    ints = None
    if int_at:
        ints = np.zeros(len(items), bool)
        ints[int_at] = True
    return Values(np.array(nums, dtype=np.float64) if items else np.zeros(0), ints, raw)
