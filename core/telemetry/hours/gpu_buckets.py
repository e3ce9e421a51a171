"""GPU samples summarised in fixed time buckets per lane: what a zoomed-out GPU view draws, computed once per hour.

Contract:

- :func:`gpu_buckets` reduces ``gpu_util`` columns to one cell per (lane,
  bucket) that holds a sample, buckets being ``[k·width, (k+1)·width)`` of epoch
  seconds (so an hour's buckets never straddle its partition): the samples,
  and per field (utilisation, memory, power) how many numeric values, their
  sum, min and max. Values that are not finite numbers are not counted (no
  data is not 0). A lane is (host, GPU index) as logged.
- :func:`coarsen` gives the buckets of a multiple of a width from that width's
  cells (counts and sums added, extremes of extremes): the 10 min buckets of an
  hour cost its 1 min cells, not its samples again.
- :func:`merge` joins cells of several partitions (cells of one lane and
  bucket in two files add up), into one lane table.
- Exact at the bucket's resolution: a cell's max is the max of its samples, its
  mean (sum / count) their mean up to float rounding of the sum. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.hours.columns import Columns
from miles_tui.core.telemetry.record_table import TAG_INT

WIDTHS: Final = (60.0, 600.0)
"""Bucket widths kept for every hour (1 and 10 minutes)."""

FIELDS: Final = ("util", "mem_mb", "power_w")
STATS: Final = ("n", "sum", "min", "max")

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class GpuBuckets:
    """Cells of (lane, bucket) that hold samples, ordered by lane then bucket."""

    width: float
    """Bucket width, seconds."""
    lanes: tuple[tuple[Any, Any], ...]
    """Lane index -> (host, GPU index)."""
    lane: npt.NDArray[np.int32]
    """Per cell: its lane."""
    bucket: npt.NDArray[np.int64]
    """Per cell: its bucket number (start = bucket × width)."""
    samples: npt.NDArray[np.int64]
    """Per cell: samples in it."""
    stats: Mapping[str, FloatArray]
    """``{field}.{stat}`` -> per cell (n as float counts; min/max NaN where n is 0)."""
    last_seen: FloatArray
    """Per lane: its newest sample time."""

    @property
    def cells(self) -> int:
        return len(self.lane)

    def start(self) -> FloatArray:
        """Each cell's bucket start time."""
        return self.bucket.astype(np.float64) * self.width

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """Everything but the lane table, as arrays (what the cache stores)."""
        out: dict[str, npt.NDArray[Any]] = {
            "lane": self.lane,
            "bucket": self.bucket,
            "samples": self.samples,
            "last_seen": self.last_seen,
        }
        out.update(self.stats)
        return out


def empty(width: float) -> GpuBuckets:
    zero = np.zeros(0)
    stats = {f"{f}.{s}": zero for f in FIELDS for s in STATS}
    return GpuBuckets(width, (), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64), stats, zero)


def from_arrays(width: float, lanes: Sequence[Sequence[Any]], arrays: Mapping[str, npt.NDArray[Any]]) -> GpuBuckets:
    """Rebuild what :meth:`GpuBuckets.arrays` gave (checked: a cache entry is not trusted)."""
    lane = arrays["lane"].astype(np.int32)
    cells = len(lane)
    stats = {f"{f}.{s}": arrays[f"{f}.{s}"].astype(np.float64) for f in FIELDS for s in STATS}
    last_seen = arrays["last_seen"].astype(np.float64)
    if any(len(a) != cells for a in (arrays["bucket"], arrays["samples"], *stats.values())):
        raise ValueError("bucket arrays of different lengths")
    if len(last_seen) != len(lanes) or (cells and not 0 <= lane.min() <= lane.max() < len(lanes)):
        raise ValueError("bucket lanes out of range")
    pairs = tuple((node, gpu) for node, gpu in lanes)
    return GpuBuckets(
        width, pairs, lane, arrays["bucket"].astype(np.int64), arrays["samples"].astype(np.int64), stats, last_seen
    )


def _reduce(
    order: npt.NDArray[np.int64], starts: npt.NDArray[np.int64], values: FloatArray, ok: npt.NDArray[np.bool_]
) -> dict[str, FloatArray]:
    """n, sum, min, max of ``values[ok]`` per group (groups: ``order`` cut at ``starts``)."""
    v = values[order]
    k = ok[order]
    n = np.add.reduceat(k.astype(np.float64), starts)
    total = np.add.reduceat(np.where(k, v, 0.0), starts)
    low = np.minimum.reduceat(np.where(k, v, np.inf), starts)
    high = np.maximum.reduceat(np.where(k, v, -np.inf), starts)
    none = n == 0
    low[none], high[none] = np.nan, np.nan
    return {"n": n, "sum": total, "min": low, "max": high}


TABLE_LIMIT: Final = 1 << 22
"""Codes below this are made distinct through a table (one pass) rather than a sort."""


def _distinct(values: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``np.unique(values, return_inverse=True)`` of non-negative codes, in one pass while they are small."""
    top = int(values.max())
    if int(values.min()) < 0 or top >= TABLE_LIMIT:
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.ravel()
    seen = np.zeros(top + 1, bool)
    seen[values] = True
    distinct = np.flatnonzero(seen)
    index = np.zeros(top + 1, np.int64)
    index[distinct] = np.arange(len(distinct))
    return distinct.astype(np.int64), index[values]


def _stable_order(keys: npt.NDArray[np.int64], bound: int) -> npt.NDArray[np.int64]:
    """A stable argsort of non-negative ``keys`` below ``bound``: numpy radix-sorts 16-bit keys (most hours: 64
    lanes × 61 minutes), else its merge sort."""
    if bound <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    return np.argsort(keys, kind="stable")


def gpu_buckets(columns: Columns, width: float) -> GpuBuckets:
    """One partition's (or any) ``gpu_util`` columns in buckets of ``width`` seconds."""
    if not columns.size:
        return empty(width)
    node, gpu = columns.codes["node"].astype(np.int64), columns.codes["gpu"].astype(np.int64)
    pair = node * (int(gpu.max()) + 1) + gpu
    pairs, lane = _distinct(pair)
    ts = columns.numbers["ts"]
    bucket = np.floor(ts / width).astype(np.int64)
    span = int(bucket.max() - bucket.min()) + 1
    cell = lane.astype(np.int64) * span + (bucket - bucket.min())
    order = _stable_order(cell, len(pairs) * span)
    sorted_cells = cell[order]
    starts = np.flatnonzero(np.r_[True, sorted_cells[1:] != sorted_cells[:-1]])
    firsts = order[starts]
    stats: dict[str, FloatArray] = {}
    for field in FIELDS:
        values, tags = columns.numbers[field], columns.tags[field]
        ok = (tags <= TAG_INT) & np.isfinite(values)
        for stat, array in _reduce(order, starts, values, ok).items():
            stats[f"{field}.{stat}"] = array
    samples = np.diff(np.r_[starts, len(order)]).astype(np.int64)
    last_seen = np.full(len(pairs), -np.inf)
    np.maximum.at(last_seen, lane, ts)
    codes = columns.values
    divisor = int(gpu.max()) + 1
    lanes = tuple((codes[int(p) // divisor], codes[int(p) % divisor]) for p in pairs.tolist())
    return GpuBuckets(width, lanes, lane[firsts].astype(np.int32), bucket[firsts], samples, stats, last_seen)


def coarsen(fine: GpuBuckets, width: float) -> GpuBuckets:
    """``fine``'s cells in buckets of ``width``, a whole multiple of ``fine.width`` (else ValueError)."""
    factor = round(width / fine.width)
    if factor < 1 or factor * fine.width != width:
        raise ValueError(f"{width} s is not a multiple of {fine.width} s")
    if not fine.cells:
        return GpuBuckets(width, fine.lanes, fine.lane, fine.bucket, fine.samples, fine.stats, fine.last_seen)
    bucket = fine.bucket // factor
    lane = fine.lane.astype(np.int64)
    # the fine cells are ordered by lane then bucket, so each coarse cell's fine cells are adjacent already
    starts = np.flatnonzero(np.r_[True, (lane[1:] != lane[:-1]) | (bucket[1:] != bucket[:-1])])
    stats: dict[str, FloatArray] = {}
    for name, array in fine.stats.items():
        stat = name.rsplit(".", 1)[1]
        if stat in ("n", "sum"):
            stats[name] = np.add.reduceat(array, starts)
        else:  # NaN (no value) is skipped unless the whole coarse cell has none
            reduce = np.fmin if stat == "min" else np.fmax
            stats[name] = reduce.reduceat(array, starts)
    samples = np.add.reduceat(fine.samples, starts)
    return GpuBuckets(width, fine.lanes, fine.lane[starts], bucket[starts], samples, stats, fine.last_seen)


def hour_buckets(columns: Columns) -> dict[float, GpuBuckets]:
    """Every width of :data:`WIDTHS`: the first from the samples, each other from the one before it."""
    out: dict[float, GpuBuckets] = {}
    finer: GpuBuckets | None = None
    for width in WIDTHS:
        multiple = finer is not None and round(width / finer.width) * finer.width == width
        finer = coarsen(finer, width) if finer is not None and multiple else gpu_buckets(columns, width)
        out[width] = finer
    return out


def merge(parts: Iterable[GpuBuckets], width: float) -> GpuBuckets:
    """Cells of several partitions as one, lanes united (a lane's cells of one bucket added up)."""
    parts = [p for p in parts if p.cells or p.lanes]
    if not parts:
        return empty(width)
    if len(parts) == 1:
        return parts[0]
    table: dict[tuple[Any, Any], int] = {}
    lanes: list[tuple[Any, Any]] = []
    lane_parts, last_parts = [], []
    for part in parts:
        codes = []
        for one in part.lanes:
            key = _lane_key(one)
            if key not in table:
                table[key] = len(lanes)
                lanes.append(one)
            codes.append(table[key])
        remap = np.array(codes, np.int32)
        lane_parts.append(remap[part.lane] if part.cells else np.zeros(0, np.int32))
        last_parts.append((remap, part.last_seen))
    lane = np.concatenate(lane_parts).astype(np.int64)
    bucket = np.concatenate([p.bucket for p in parts])
    samples = np.concatenate([p.samples for p in parts])
    last_seen = np.full(len(lanes), -np.inf)
    for remap, seen in last_parts:
        np.maximum.at(last_seen, remap, seen)
    low = int(bucket.min()) if len(bucket) else 0
    span = (int(bucket.max()) - low + 1) if len(bucket) else 1
    cell = lane * span + (bucket - low)
    order = np.argsort(cell, kind="stable")
    sorted_cells = cell[order]
    starts = np.flatnonzero(np.r_[True, sorted_cells[1:] != sorted_cells[:-1]]) if len(order) else np.zeros(0, np.int64)
    stats: dict[str, FloatArray] = {}
    for name in parts[0].stats:
        values = np.concatenate([p.stats[name] for p in parts])[order]
        stat = name.rsplit(".", 1)[1]
        if not len(order):
            stats[name] = values
        elif stat in ("n", "sum"):
            stats[name] = np.add.reduceat(values, starts)
        elif stat == "min":
            stats[name] = np.fmin.reduceat(values, starts)
        else:
            stats[name] = np.fmax.reduceat(values, starts)
    firsts = order[starts] if len(order) else order
    summed = np.add.reduceat(samples[order], starts) if len(order) else samples
    return GpuBuckets(width, tuple(lanes), lane[firsts].astype(np.int32), bucket[firsts], summed, stats, last_seen)


def _lane_key(lane: tuple[Any, Any]) -> tuple[Any, Any]:
    node, gpu = lane
    return node, (type(gpu).__name__, gpu)
