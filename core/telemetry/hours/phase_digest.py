"""What the stall rule needs of one ``phases`` partition, small enough to read for every hour of a long run.

Contract: :func:`phase_digest` reduces a partition's columns to its open
markers that no closing record *in that partition* closes, the keys (name,
host, rank, start) of its closing records that close no marker in it, and
each closed phase's name, start and end. miles writes a phase's open marker
into the hour it started and its closing record into the hour it ended, so
a marker and its closing record are in one partition unless the phase crossed
an hour: the two key lists stay a few hundred a day. The digest round-trips
through JSON and arrays (:meth:`PhaseDigest.to_cache`, :func:`from_cache`).
Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.hours.columns import Columns, dense_keys

OpenRow = tuple[str, float, Any, Any, Any, Any]
"""(name, t0, host, rank, role, GPU list) of an open marker."""
CloseKey = tuple[str, Any, Any, float]
"""(name, host, rank, t0) of a closing record."""


@dataclass(frozen=True, eq=False)
class PhaseDigest:
    """See the module docstring."""

    opens: tuple[OpenRow, ...]
    """Open markers no closing record of the partition closes, in file order."""
    closes: tuple[CloseKey, ...]
    """Closing records that close no marker of the partition."""
    names: tuple[str, ...]
    """Code -> phase name, for :attr:`closed_name`."""
    closed_name: npt.NDArray[np.int32]
    """Per closed record: its name's code."""
    closed_t0: npt.NDArray[np.float64]
    """Per closed record: start."""
    closed_t1: npt.NDArray[np.float64]
    """Per closed record: end."""

    def to_cache(self) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
        arrays: dict[str, npt.NDArray[Any]] = {
            "closed_name": self.closed_name,
            "closed_t0": self.closed_t0,
            "closed_t1": self.closed_t1,
        }
        return arrays, {"opens": [list(r) for r in self.opens], "closes": [list(k) for k in self.closes],
                        "names": list(self.names)}  # fmt: skip


def from_cache(arrays: Mapping[str, npt.NDArray[Any]], meta: Mapping[str, Any]) -> PhaseDigest:
    """Rebuild a digest (checked: a cache entry is not trusted)."""
    names = tuple(str(n) for n in meta["names"])
    name = arrays["closed_name"].astype(np.int32)
    t0, t1 = arrays["closed_t0"].astype(np.float64), arrays["closed_t1"].astype(np.float64)
    if not len(name) == len(t0) == len(t1) or (len(name) and not 0 <= name.min() <= name.max() < len(names)):
        raise ValueError("phase digest arrays do not fit")
    opens = tuple((str(r[0]), float(r[1]), r[2], r[3], r[4], r[5]) for r in meta["opens"])
    closes = tuple((str(k[0]), k[1], k[2], float(k[3])) for k in meta["closes"])
    return PhaseDigest(opens, closes, names, name, t0, t1)


def _unpaired(columns: Columns, is_open: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Per record: whether no record of the other kind (open marker or closing record) has its (name, host, rank,
    start). One sort of the records by that key (codes, and the start's float value as ``==`` compares it)."""
    codes, t0 = columns.codes, columns.numbers["t0"]
    key = dense_keys(codes["name"], codes["node"], codes["rank"], compact=False)
    order = np.lexsort((key, t0))
    key, start, opened = key[order], t0[order], is_open[order]
    first = np.ones(len(order), bool)
    first[1:] = (key[1:] != key[:-1]) | (start[1:] != start[:-1])
    group = np.cumsum(first) - 1
    opens = np.bincount(group, weights=opened)
    closes = np.bincount(group, weights=~opened)
    lone = np.where(opened, closes[group] == 0, opens[group] == 0)
    out = np.empty(len(order), bool)
    out[order] = lone
    return out


def phase_digest(columns: Columns) -> PhaseDigest:
    """See the module docstring."""
    if not columns.size:
        empty = np.zeros(0)
        return PhaseDigest((), (), (), np.zeros(0, np.int32), empty, empty)
    t0, t1 = columns.numbers["t0"], columns.numbers["t1"]
    is_open = t1 == -1
    lone = _unpaired(columns, is_open)
    closed = np.flatnonzero(~is_open)
    lone_opens = np.flatnonzero(is_open & lone)
    lone_closes = np.flatnonzero(~is_open & lone)
    value = columns.value_of
    opens = tuple(
        (value("name", r), float(t0[r]), value("node", r), value("rank", r), value("role", r), value("gpus", r))
        for r in lone_opens.tolist()
    )
    closes = tuple((value("name", r), value("node", r), value("rank", r), float(t0[r])) for r in lone_closes.tolist())
    codes = columns.codes["name"][closed]
    used = np.flatnonzero(np.bincount(codes, minlength=1))  # the names closed records have, in code order
    local = np.zeros(max(len(columns.values), 1), np.int32)
    local[used] = np.arange(len(used), dtype=np.int32)
    names = tuple(columns.values[int(c)] for c in used.tolist())
    return PhaseDigest(opens, closes, names, local[codes], t0[closed].copy(), t1[closed].copy())


def key_part(value: Any) -> Any:
    """A JSON value as part of a dict key (a list or object, never expected, by its repr)."""
    return repr(value) if isinstance(value, (list, dict)) else value


def open_markers(digests: Sequence[PhaseDigest], attempt_start: float | None) -> list[OpenRow]:
    """The open markers no closing record anywhere closes, of the current attempt (started at or after
    ``attempt_start``), one per key (its last record), in order of first sight."""
    closes = {(k[0], key_part(k[1]), key_part(k[2]), k[3]) for d in digests for k in d.closes}
    current = attempt_start if attempt_start is not None else -math.inf
    unique: dict[tuple[Any, ...], OpenRow] = {}
    for digest in digests:
        for r in digest.opens:
            key = (r[0], key_part(r[2]), key_part(r[3]), r[1])
            if r[1] >= current and key not in closes:
                unique[key] = r
    return list(unique.values())
