"""GPU samples (``gpu_util/``) as columns: one lane per (node, gpu), numbers as float arrays.

Contract: :func:`gpu_samples` (and :func:`gpu_columns`, which a follower feeds
partition by partition with a lane table it keeps) turn GpuUtil records into
arrays; a value that is not a number becomes NaN, never 0. Lanes are numbered
in order of first sight; :func:`lane_key` gives their display order (node, then
gpu, both natural: ``10.0.0.9`` before ``10.0.0.10``). Pure: records in, arrays
out; never reads files, never formats.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.stream_records import GpuUtil, StreamRecord

FloatArray: TypeAlias = npt.NDArray[np.float64]
IntArray: TypeAlias = npt.NDArray[np.int64]
Lane: TypeAlias = tuple[str, Any]
"""(node, gpu index on the node)."""

_DIGITS = re.compile(r"([0-9]+)")  # ASCII digits: int() fails on "²", which str.isdigit() accepts


def natural_key(value: Any) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders ``10.0.0.9`` before ``10.0.0.10`` and gpu 2 before gpu 10."""
    parts = _DIGITS.split(str(value))
    return tuple((0, int(p)) if "0" <= p[0] <= "9" else (1, p) for p in parts if p)


def lane_key(lane: Lane) -> tuple[tuple[tuple[int, int | str], ...], ...]:
    """Display order of lanes: node, then gpu, both natural."""
    return natural_key(lane[0]), natural_key(lane[1])


def _hashable(value: Any) -> Any:
    """JSON values as dict keys: a list or dict (never expected here, but possible) by its repr."""
    return repr(value) if isinstance(value, (list, dict)) else value


def _number(value: Any) -> float:
    return float(value) if type(value) in (int, float) else math.nan


@dataclass(frozen=True, eq=False)
class GpuSamples:
    """GPU samples as columns, plus when every known lane was last sampled."""

    lanes: tuple[Lane, ...]
    """Lane id -> (node, gpu), in order of first sight."""
    lane: IntArray
    """Lane id of each sample."""
    ts: FloatArray
    """Sample time."""
    util: FloatArray
    """Utilisation, percent (NaN when not a number)."""
    mem_mb: FloatArray
    """Memory used, MB (NaN when not a number)."""
    last_seen: FloatArray
    """Per lane id: newest sample time known, which may lie outside these samples (NaN: none)."""
    weight: tuple[FloatArray, FloatArray, FloatArray] | None = None
    """For bucket summaries (each row a lane's bucket, its values the means): per row, how many utilisation
    values, memory values and samples it stands for. None: each row is one sample."""
    cell: float | None = None
    """For bucket summaries: the bucket width, seconds (the resolution of the values)."""
    power_w: FloatArray | None = None
    """Power draw, W (NaN when not a number; None: not read)."""
    power_n: FloatArray | None = None
    """For bucket summaries: per row, how many power values it stands for."""

    @property
    def newest(self) -> float | None:
        """Newest sample time of any lane."""
        seen = self.last_seen[np.isfinite(self.last_seen)]
        return float(seen.max()) if len(seen) else None


def key_ids(keys: Iterable[Any], table: dict[Any, int]) -> IntArray:
    """Id of each key in ``table``, adding new keys (an unhashable JSON value is keyed by its repr)."""
    keys = list(keys)
    try:
        ids = list(map(table.get, keys))  # the common case: every key known, at C speed
    except TypeError:
        keys = [_hashable_key(k) for k in keys]
        ids = list(map(table.get, keys))
    if None in ids:
        add = table.setdefault
        ids = [add(k, len(table)) if i is None else i for k, i in zip(keys, ids, strict=True)]
    return np.array(ids, dtype=np.int64)


def _hashable_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(tuple(_hashable(v) for v in k) if isinstance(k, tuple) else _hashable(k) for k in key)


def _floats(values: list[Any]) -> FloatArray:
    """Numbers as float64; anything else (None, a string, a bool) as NaN."""
    if all(type(v) is int or type(v) is float for v in values):
        return np.array(values, dtype=np.float64)
    return np.array([_number(v) for v in values], dtype=np.float64)


def gpu_columns(
    records: Iterable[StreamRecord], table: dict[Lane, int]
) -> tuple[IntArray, FloatArray, FloatArray, FloatArray]:
    """(lane id, ts, util, mem_mb) of the GpuUtil records; new lanes are added to ``table``."""
    samples = [r for r in records if type(r) is GpuUtil]
    lane = key_ids(zip(map(attrgetter("node"), samples), map(attrgetter("gpu"), samples), strict=True), table)
    ts = np.array(list(map(attrgetter("ts"), samples)), dtype=np.float64)
    util = _floats(list(map(attrgetter("util"), samples)))
    mem = _floats(list(map(attrgetter("mem_mb"), samples)))
    return lane, ts, util, mem


def last_seen(lane: IntArray, ts: FloatArray, lanes: int) -> FloatArray:
    """Newest ``ts`` per lane id (NaN for a lane without samples)."""
    out = np.full(lanes, -np.inf)
    np.maximum.at(out, lane, ts)
    return np.where(np.isneginf(out), np.nan, out)


def gpu_samples(records: Iterable[StreamRecord]) -> GpuSamples:
    """All the GpuUtil records as columns."""
    table: dict[Lane, int] = {}
    lane, ts, util, mem = gpu_columns(records, table)
    return GpuSamples(tuple(table), lane, ts, util, mem, last_seen(lane, ts, len(table)))
