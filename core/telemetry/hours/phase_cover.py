"""The seconds each rank spent in each phase, per fixed time bucket, of one ``phases`` hour: a zoomed-out phase row.

Contract: :func:`phase_cover` reduces a partition's closed phases to one cell
per (rank and phase, bucket) with time in it: the seconds of the bucket
``[k·width, (k+1)·width)`` the rank spent in the phase. A phase is filed by its
end, so an hour's cells may reach back before it; no span counts for more than
:data:`MAX_SPAN_SECONDS` before its end (a record claiming years costs a
bounded table), and an hour holds at most :data:`MAX_CELLS` cells. Summed over
hours, a bucket's seconds are exactly those of its phases (up to float addition)
while every hour is within that budget. Keys are values (role, name; host, rank, GPU
list) so hours join by value. Round-trips through the cache. Pure.
:func:`coarsen_cover` gives a multiple of a width from that width's cells (seconds added), so an hour's
10 min cover costs its 1 min cells, not its phases again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.hours.columns import Columns, dense_keys
from miles_tui.core.telemetry.phase_bands import binned_cover
from miles_tui.core.telemetry.time_bins import time_bins

MAX_SPAN_SECONDS: Final = 7 * 86400.0
"""Time before its end a closed phase counts for, at most."""

PairKey = tuple[Any, Any, Any, Any, tuple[Any, ...]]
"""(role, name, host, rank, GPUs) of one rank in one phase."""


@dataclass(frozen=True, eq=False)
class PhaseCover:
    """See the module docstring."""

    width: float
    """Bucket width, seconds."""
    pairs: tuple[PairKey, ...]
    """Pair index -> its key."""
    pair: npt.NDArray[np.int32]
    """Per cell: its pair."""
    bucket: npt.NDArray[np.int64]
    """Per cell: its bucket (start = bucket × width)."""
    seconds: npt.NDArray[np.float64]
    """Per cell: seconds in the phase."""

    def to_cache(self) -> tuple[dict[str, npt.NDArray[Any]], list[Any]]:
        arrays: dict[str, npt.NDArray[Any]] = {"pair": self.pair, "bucket": self.bucket, "seconds": self.seconds}
        return arrays, [[r, n, h, k, list(g)] for r, n, h, k, g in self.pairs]


def from_cache(width: float, arrays: Mapping[str, npt.NDArray[Any]], pairs: list[Any]) -> PhaseCover:
    """Rebuild a cover (checked: a cache entry is not trusted)."""
    keys = tuple((r, n, h, k, tuple(g or ())) for r, n, h, k, g in pairs)
    pair = arrays["pair"].astype(np.int32)
    bucket, seconds = arrays["bucket"].astype(np.int64), arrays["seconds"].astype(np.float64)
    if not len(pair) == len(bucket) == len(seconds) or (len(pair) and not 0 <= pair.min() <= pair.max() < len(keys)):
        raise ValueError("phase cover arrays do not fit")
    return PhaseCover(width, keys, pair, bucket, seconds)


def phase_cover(columns: Columns, width: float) -> PhaseCover:
    """See the module docstring."""
    t0, t1 = columns.numbers["t0"], columns.numbers["t1"]
    closed = np.flatnonzero((t1 != -1) & (t1 >= t0))
    if not len(closed):
        return PhaseCover(width, (), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0))
    codes, values = columns.codes, columns.values
    fields = [codes[name][closed] for name in ("role", "name", "node", "rank", "gpus")]
    _, firsts, inverse = np.unique(dense_keys(*fields), return_index=True, return_inverse=True)
    pairs = [
        (values[role], values[name], values[node], values[rank], tuple(values[gpus] or ()))
        for role, name, node, rank, gpus in zip(*(f[firsts].tolist() for f in fields), strict=True)
    ]
    hi = t1[closed]
    lo = np.maximum(t0[closed], hi - MAX_SPAN_SECONDS)
    key = inverse.ravel().astype(np.int64)
    first, last = int(np.floor(lo.min() / width)), int(np.floor(hi.max() / width)) + 1
    if len(firsts) * (last - first) <= DENSE_CELLS:  # the usual hour: one table of pairs × buckets
        bins = time_bins(first * width, last * width, last - first)
        cover = binned_cover(key, lo - bins.since, hi - bins.since, len(firsts), bins)
        pair, bucket = np.nonzero(cover > 0)
        return PhaseCover(
            width, tuple(pairs), pair.astype(np.int32), (bucket + first).astype(np.int64), cover[pair, bucket]
        )
    return PhaseCover(width, tuple(pairs), *_sparse_cover(key, lo, hi, width))


DENSE_CELLS: Final = 1 << 22
"""Pairs × buckets up to which an hour's cover is one table (32 MiB); past it (many ranks and phases, or spans
strewn over years) only the cells a span touches are made."""
MAX_CELLS: Final = 1 << 22
"""Cells an hour's cover holds at most: past it each span counts for its last buckets only, as many as keep the
hour within this (a flood of week-long phases of distinct ranks costs a bounded table, not a week of buckets
per line)."""


def _sparse_cover(
    key: npt.NDArray[np.int64], lo: npt.NDArray[np.float64], hi: npt.NDArray[np.float64], width: float
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(pair, bucket, seconds) of the cells the spans ``[lo, hi)`` touch, summed per pair and bucket, ordered by
    pair then bucket (as the table's nonzero cells are); at most :data:`MAX_CELLS` (see there)."""
    b0, b1 = np.floor(lo / width).astype(np.int64), np.floor(hi / width).astype(np.int64)
    crossed = b1 - b0 + 1
    if int(crossed.sum()) > MAX_CELLS:  # the largest per-span count that keeps the hour within the budget
        allowed = max(1, MAX_CELLS // len(crossed))
        b0 = np.maximum(b0, b1 - allowed + 1)
        lo = np.maximum(lo, b0 * width)
        crossed = b1 - b0 + 1
    span = np.repeat(np.arange(len(crossed)), crossed)
    bucket = b0[span] + (np.arange(len(span)) - np.repeat(np.cumsum(crossed) - crossed, crossed))
    seconds = np.minimum(hi[span], (bucket + 1) * width) - np.maximum(lo[span], bucket * width)
    cell = key[span] * (int(bucket.max() - bucket.min()) + 1) + (bucket - bucket.min())
    cells, where = np.unique(cell, return_inverse=True)
    summed = np.bincount(where.ravel(), weights=seconds, minlength=len(cells))
    firsts = np.zeros(len(cells), np.int64)
    firsts[where.ravel()] = np.arange(len(span))
    keep = summed > 0
    return (
        key[span][firsts][keep].astype(np.int32),
        bucket[firsts][keep].astype(np.int64),
        summed[keep].astype(np.float64),
    )


def coarsen_cover(fine: PhaseCover, width: float) -> PhaseCover:
    """``fine``'s cells in buckets of ``width``, a whole multiple of ``fine.width`` (else ValueError)."""
    factor = round(width / fine.width)
    if factor < 1 or factor * fine.width != width:
        raise ValueError(f"{width} s is not a multiple of {fine.width} s")
    if not len(fine.pair):
        return PhaseCover(width, fine.pairs, fine.pair, fine.bucket, fine.seconds)
    bucket = fine.bucket // factor
    # the fine cells are ordered by pair then bucket, so each coarse cell's fine cells are adjacent already
    starts = np.flatnonzero(np.r_[True, (fine.pair[1:] != fine.pair[:-1]) | (bucket[1:] != bucket[:-1])])
    return PhaseCover(width, fine.pairs, fine.pair[starts], bucket[starts], np.add.reduceat(fine.seconds, starts))


def hour_covers(columns: Columns, widths: tuple[float, ...]) -> dict[float, PhaseCover]:
    """A cover of every width: the first from the phases, each other from the one before it when a multiple."""
    out: dict[float, PhaseCover] = {}
    finer: PhaseCover | None = None
    for width in widths:
        multiple = finer is not None and round(width / finer.width) * finer.width == width
        finer = coarsen_cover(finer, width) if finer is not None and multiple else phase_cover(columns, width)
        out[width] = finer
    return out
