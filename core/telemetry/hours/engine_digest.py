"""What miles' engine rules read of one ``engine_series`` hour, small enough to read for every hour of a long run.

Contract: :func:`engine_digest` reduces one partition's
:class:`~miles_tui.core.telemetry.engine_series.EngineTable` to the engines
and metric names seen; for the gauges the rules average or peak (running
requests, KV token usage, prefix-cache hit rate), the sum, count and max of
their engine-level values; each DP rank's running-requests sum and count; and
the engine-level series of the cumulative request and abort counters, whole
(a few hundred points an hour), so that counter increases across hours and in
any window are computed exactly as over the whole table. A scrape's DP ranks
share its time and so its hour: engine-level values fold within a partition.
Round-trips through the cache as arrays and JSON. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.engine_series import (
    ABORTED,
    CACHE_HIT_RATE,
    REQUESTS,
    RUNNING,
    TOKEN_USAGE,
    EngineTable,
    LabelKey,
    flat_values,
)

GAUGES: Final = (RUNNING, TOKEN_USAGE, CACHE_HIT_RATE)
COUNTERS: Final = (*REQUESTS, *ABORTED)


@dataclass(frozen=True, eq=False)
class EngineDigest:
    """See the module docstring."""

    addrs: tuple[str | None, ...]
    """Engines seen."""
    metrics: tuple[str, ...]
    """Metric names seen (normalized)."""
    gauges: Mapping[str, tuple[float, int, float]]
    """Gauge -> (sum, count, max) of its engine-level values."""
    dp_running: tuple[tuple[str | None, LabelKey, str, float, int], ...]
    """(engine, labels, DP rank, sum, count) of running requests per DP rank."""
    counter_keys: tuple[tuple[str, str | None, LabelKey], ...]
    """(metric, engine, labels) of each counter series, in :attr:`counter_lengths` order."""
    counter_lengths: npt.NDArray[np.int64]
    """Points of each counter series."""
    counter_ts: npt.NDArray[np.float64]
    """Their times, series after series (each ascending)."""
    counter_values: npt.NDArray[np.float64]
    """Their values."""

    def to_cache(self) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
        arrays: dict[str, npt.NDArray[Any]] = {
            "lengths": self.counter_lengths, "ts": self.counter_ts, "values": self.counter_values
        }  # fmt: skip
        meta = {
            "addrs": list(self.addrs),
            "metrics": list(self.metrics),
            "gauges": {k: list(v) for k, v in self.gauges.items()},
            "dp_running": [[a, [list(p) for p in lab], r, s, n] for a, lab, r, s, n in self.dp_running],
            "counter_keys": [[m, a, [list(p) for p in lab]] for m, a, lab in self.counter_keys],
        }
        return arrays, meta


def _labels(value: Any) -> LabelKey:
    return tuple((str(k), str(v)) for k, v in value)


def from_cache(arrays: Mapping[str, npt.NDArray[Any]], meta: Mapping[str, Any]) -> EngineDigest:
    """Rebuild a digest (checked: a cache entry is not trusted)."""
    lengths = arrays["lengths"].astype(np.int64)
    ts, values = arrays["ts"].astype(np.float64), arrays["values"].astype(np.float64)
    keys = tuple((str(m), a, _labels(lab)) for m, a, lab in meta["counter_keys"])
    if len(lengths) != len(keys) or int(lengths.sum()) != len(ts) or len(ts) != len(values) or (lengths < 0).any():
        raise ValueError("engine digest arrays do not fit")
    gauges = {str(k): (float(v[0]), int(v[1]), float(v[2])) for k, v in meta["gauges"].items()}
    dp = tuple((a, _labels(lab), str(r), float(s), int(n)) for a, lab, r, s, n in meta["dp_running"])
    return EngineDigest(
        tuple(meta["addrs"]), tuple(str(m) for m in meta["metrics"]), gauges, dp, keys, lengths, ts, values
    )


def engine_digest(table: EngineTable) -> EngineDigest:
    """See the module docstring."""
    gauges = {}
    for metric in GAUGES:
        flat = flat_values(table.series(metric))
        if len(flat):
            gauges[metric] = (float(flat.sum()), len(flat), float(flat.max()))
    dp = tuple(
        (one.addr, one.labels, one.dp_rank, float(one.value.sum()), len(one.value))
        for one in table.series(RUNNING, per_dp_rank=True)
        if one.dp_rank is not None and len(one.value)
    )
    keys: list[tuple[str, str | None, LabelKey]] = []
    lengths: list[int] = []
    ts: list[npt.NDArray[np.float64]] = []
    values: list[npt.NDArray[np.float64]] = []
    for metric in COUNTERS:
        for one in table.series(metric):
            keys.append((metric, one.addr, one.labels))
            lengths.append(len(one.ts))
            ts.append(one.ts)
            values.append(one.value)
    return EngineDigest(
        table.addrs(),
        table.metrics(),
        gauges,
        dp,
        tuple(keys),
        np.array(lengths, np.int64),
        np.concatenate(ts) if ts else np.zeros(0),
        np.concatenate(values) if values else np.zeros(0),
    )
