"""Inference-engine telemetry (``engine_series/``) as time series: per engine, per label set, per DP rank.

Contract:

- :class:`EngineTable` takes :class:`~miles_tui.core.telemetry.stream_records.EngineSample`
  records once (one pass) and answers :meth:`EngineTable.series` for any
  metric. Metric names are normalized: ``sglang:x`` (a raw engine) equals
  ``sglang_x`` (the router aggregation), as miles' scraper writes both.
  A value that is not a finite number (a bool, a string, NaN, ±inf) is
  skipped and counted in :attr:`EngineTable.skipped`, never read as 0.
- Engine level, as miles aggregates it: the samples of every DP rank of one
  engine (``dp_rank`` label; dp-attention engines export one per rank) that
  share a scrape time fold into one value, summed, or averaged for the
  intensive metrics of :data:`MEAN_AGGREGATED` (token usage, cache hit
  rate). ``per_dp_rank=True`` keeps the ranks apart. Label sets other than
  ``dp_rank`` stay separate series; labels whose value is null are ignored.
- Cumulative counters (``*_total``): :func:`counter_delta` sums the increase of
  each interval and drops an interval whose counter fell (the engine
  restarted and counts from 0 again: miles' rule, which neither invents nor
  double-counts requests); :func:`interval_rates` gives the per-interval rate
  with those intervals left out; :func:`restart_times` says when they happened.
- A table does not change once built (series are computed once per metric and
  cached). Pure: records in, arrays out. Never reads files, never formats,
  reads no clock.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.gpu_samples import natural_key
from miles_tui.core.telemetry.stream_records import EngineSample, StreamRecord

FloatArray: TypeAlias = npt.NDArray[np.float64]
LabelKey: TypeAlias = tuple[tuple[str, str], ...]
"""A label set without ``dp_rank``: sorted (name, JSON of value) pairs."""

RUNNING: Final = "sglang_num_running_reqs"
"""Requests running on an engine (gauge)."""
QUEUED: Final = "sglang_num_queue_reqs"
"""Requests waiting in an engine's queue (gauge)."""
TOKEN_USAGE: Final = "sglang_token_usage"
"""Used fraction of the KV token pool (gauge)."""
CACHE_HIT_RATE: Final = "sglang_cache_hit_rate"
"""Prefix-cache hit rate (gauge, a fraction)."""
GEN_THROUGHPUT: Final = "sglang_gen_throughput"
"""Generated tokens per second (gauge)."""
REQUESTS: Final = ("sglang_num_requests_total", "sglang_num_requests")
"""Cumulative finished requests (``_total`` may be stripped by a Prometheus parser), in order of preference."""
ABORTED: Final = ("sglang_num_aborted_requests_total", "sglang_num_aborted_requests")
"""Cumulative aborted requests, likewise."""

MEAN_AGGREGATED: Final = frozenset({TOKEN_USAGE, CACHE_HIT_RATE, "sglang_kv_transfer_latency_ms"})
"""Intensive metrics: DP ranks are averaged into the engine's value; every other metric is summed."""

DP_RANK_LABEL: Final = "dp_rank"


def normalize(metric: str) -> str:
    """``sglang:token_usage`` -> ``sglang_token_usage`` (both spellings are the same metric)."""
    return metric.replace(":", "_")


@dataclass(frozen=True, eq=False)
class EngineSeries:
    """One metric of one engine (and label set, and DP rank when kept apart), ordered by time."""

    addr: str | None
    """Engine address."""
    labels: LabelKey
    """Its other labels."""
    dp_rank: str | None
    """The DP rank (None: engine level, or an engine without DP attention)."""
    ts: FloatArray
    """Scrape times, ascending."""
    value: FloatArray
    """Values (finite)."""


def _label_key(labels: Any) -> tuple[LabelKey, str | None]:
    if not isinstance(labels, Mapping) or not labels:
        return (), None
    rank = labels.get(DP_RANK_LABEL)
    pairs = tuple(
        sorted(
            (str(k), json.dumps(v, sort_keys=True, default=str))
            for k, v in labels.items()
            if k != DP_RANK_LABEL and v is not None
        )
    )
    return pairs, None if rank is None else str(rank)


_Key = tuple[str | None, LabelKey, str | None]


class EngineTable:
    """Every engine sample of a run (or a window), grouped by metric, engine, labels and DP rank."""

    def __init__(self, samples: Iterable[StreamRecord]) -> None:
        self.skipped = 0
        """Samples left out because their value is not a finite number."""
        # One pass keyed on the raw (metric, addr, labels) as logged; the keys are normalized after, once each.
        raw: dict[Any, tuple[list[float], list[float]]] = {}
        odd: list[tuple[EngineSample, float]] = []  # labels that are not a mapping of hashable values
        isfinite = math.isfinite
        for sample in samples:
            if type(sample) is not EngineSample:
                continue
            value = sample.value
            kind = type(value)
            if (kind is not float and kind is not int) or not isfinite(value):
                self.skipped += 1
                continue
            labels = sample.labels
            try:
                key = (sample.metric, sample.addr, tuple(labels.items()) if labels else ())
                columns = raw.get(key)
            except (TypeError, AttributeError):
                odd.append((sample, float(value)))
                continue
            if columns is None:
                columns = raw[key] = ([], [])
            columns[0].append(sample.ts)
            columns[1].append(value)
        self._group({key: ([_floats(ts)], [_floats(values)]) for key, (ts, values) in raw.items()}, odd)

    @classmethod
    def from_groups(
        cls,
        groups: Iterable[tuple[str, str | None, Mapping[str, Any] | None, FloatArray, FloatArray]],
        skipped: int,
    ) -> EngineTable:
        """A table from samples already grouped by (metric, addr, labels) as logged, each group's times and
        finite values in file order (what a columnar reader has), equal to one built from the records."""
        table = cls(())
        table.skipped = skipped
        raw: dict[Any, tuple[list[FloatArray], list[FloatArray]]] = {}
        odd: list[tuple[EngineSample, float]] = []
        for metric, addr, labels, ts, values in groups:
            try:
                key = (metric, addr, tuple(labels.items()) if labels else ())
                into = raw.setdefault(key, ([], []))
            except (TypeError, AttributeError):
                odd += [
                    (EngineSample(t, addr, metric, labels or {}, v), float(v))
                    for t, v in zip(ts.tolist(), values.tolist(), strict=True)
                ]
                continue
            into[0].append(ts)
            into[1].append(values)
        table._group(raw, odd)
        return table

    def _group(
        self, raw: dict[Any, tuple[list[FloatArray], list[FloatArray]]], odd: list[tuple[EngineSample, float]]
    ) -> None:
        """Samples into (normalized metric) -> (engine, labels, DP rank) -> (time chunks, value chunks), each
        group's chunks in the order the samples came (a group is built by concatenating them, once)."""
        groups: dict[str, dict[_Key, tuple[list[FloatArray], list[FloatArray]]]] = {}

        def add(metric: str, addr: str | None, labels: Any, ts: list[FloatArray], values: list[FloatArray]) -> None:
            label_key, rank = _label_key(labels)
            into = groups.setdefault(normalize(metric), {}).setdefault((addr, label_key, rank), ([], []))
            into[0].extend(ts)
            into[1].extend(values)

        for (metric, addr, pairs), (ts, values) in raw.items():
            add(metric, addr, dict(pairs), ts, values)
        for sample, value in odd:
            add(sample.metric, sample.addr, sample.labels, [_floats([sample.ts])], [_floats([value])])
        self._groups = groups
        self._series: dict[tuple[str, bool], tuple[EngineSeries, ...]] = {}
        self._by_addr: dict[tuple[str, bool], dict[str | None, tuple[EngineSeries, ...]]] = {}
        self._ranks: dict[str | None, set[str]] | None = None
        self._metrics_of: dict[str | None, tuple[str, ...]] | None = None

    def metrics(self) -> tuple[str, ...]:
        """Metric names seen (normalized), sorted."""
        return tuple(sorted(self._groups))

    def addrs(self) -> tuple[str | None, ...]:
        """Engines seen, in natural order."""
        seen = {key[0] for parts in self._groups.values() for key in parts}
        return tuple(sorted(seen, key=lambda addr: natural_key(addr or "")))

    def metrics_of(self, addr: str | None) -> tuple[str, ...]:
        """The metrics (normalized, sorted) an engine has samples of: one pass for every engine, so a view's work
        follows the (engine, metric) pairs there are, not engines × metrics."""
        if self._metrics_of is None:
            index: dict[str | None, set[str]] = {}
            for metric, parts in self._groups.items():
                for key in parts:
                    index.setdefault(key[0], set()).add(metric)
            self._metrics_of = {a: tuple(sorted(names)) for a, names in index.items()}
        return self._metrics_of.get(addr, ())

    def dp_ranks(self, addr: str | None) -> tuple[str, ...]:
        """The DP ranks an engine labelled, in natural order (empty: no DP attention)."""
        if self._ranks is None:  # one pass for every engine: a view asks once per engine, and engines are many
            self._ranks = {}
            for parts in self._groups.values():
                for key in parts:
                    ranks = self._ranks.setdefault(key[0], set())
                    if key[2] is not None:
                        ranks.add(key[2])
        return tuple(sorted(self._ranks.get(addr, ()), key=natural_key))

    def time_range(self) -> tuple[float, float] | None:
        """Earliest and latest scrape time held."""
        times = [t for parts in self._groups.values() for ts, _ in parts.values() for t in _extremes(ts)]
        return (min(times), max(times)) if times else None

    def first_present(self, names: Iterable[str]) -> str | None:
        """The first of ``names`` that has samples."""
        return next((name for name in names if name in self._groups), None)

    def series(self, metric: str, *, per_dp_rank: bool = False) -> tuple[EngineSeries, ...]:
        """``metric`` per engine and label set (engine level: DP ranks folded), by engine then labels."""
        key = (normalize(metric), per_dp_rank)
        cached = self._series.get(key)
        if cached is None:
            cached = self._series[key] = self._build(*key)
        return cached

    def engine_series(self, metric: str, addr: str | None, *, per_dp_rank: bool = False) -> tuple[EngineSeries, ...]:
        """:meth:`series` of one engine, from an index built once per metric (not a scan of every engine's)."""
        key = (normalize(metric), per_dp_rank)
        index = self._by_addr.get(key)
        if index is None:
            grouped: dict[str | None, list[EngineSeries]] = {}
            for one in self.series(metric, per_dp_rank=per_dp_rank):
                grouped.setdefault(one.addr, []).append(one)
            index = self._by_addr[key] = {a: tuple(series) for a, series in grouped.items()}
        return index.get(addr, ())

    def _build(self, metric: str, per_dp_rank: bool) -> tuple[EngineSeries, ...]:
        parts = self._groups.get(metric, {})
        out: list[EngineSeries] = []
        if per_dp_rank:
            for (addr, labels, rank), (ts, values) in parts.items():
                t, v = _joined(ts), _joined(values)
                order = np.argsort(t, kind="stable")
                out.append(EngineSeries(addr, labels, rank, t[order], v[order]))
        else:
            folded: dict[tuple[str | None, LabelKey], tuple[list[FloatArray], list[FloatArray]]] = {}
            for (addr, labels, _), (ts, values) in parts.items():
                into = folded.setdefault((addr, labels), ([], []))
                into[0].extend(ts)
                into[1].extend(values)
            mean = metric in MEAN_AGGREGATED
            for (addr, labels), (ts, values) in folded.items():
                times, inverse = np.unique(_joined(ts), return_inverse=True)
                sums = np.bincount(inverse.ravel(), weights=_joined(values), minlength=len(times)).astype(np.float64)
                if mean:
                    sums = sums / np.bincount(inverse.ravel(), minlength=len(times))
                out.append(EngineSeries(addr, labels, None, times.astype(np.float64), sums))
        out.sort(key=lambda s: (natural_key(s.addr or ""), s.labels, natural_key(s.dp_rank or "")))
        return tuple(out)


def _floats(values: Any) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def _joined(chunks: list[FloatArray]) -> FloatArray:
    """Chunks end to end (no copy for one)."""
    return chunks[0] if len(chunks) == 1 else np.concatenate(chunks) if chunks else np.empty(0)


def _extremes(chunks: list[FloatArray]) -> tuple[float, ...]:
    joined = _joined(chunks)
    return (float(joined.min()), float(joined.max())) if len(joined) else ()


def _kept_intervals(series: EngineSeries, since: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(end time, increase, duration) of each interval ending at or after ``since`` whose counter did not fall."""
    if len(series.ts) < 2:
        empty = np.empty(0)
        return empty, empty, empty
    ends, deltas, spans = series.ts[1:], np.diff(series.value), np.diff(series.ts)
    keep = (ends >= since) & (deltas >= 0)
    return ends[keep], deltas[keep], spans[keep]


def counter_delta(series: Iterable[EngineSeries], since: float = -math.inf) -> float:
    """How much cumulative counters grew over the intervals ending at or after ``since``, summed over series.

    An interval whose counter fell (a restart) is dropped: the increase inside
    it is unknown, and neither 0 nor the new value is right (miles' rule).
    """
    return float(sum(float(_kept_intervals(one, since)[1].sum()) for one in series))


def restart_times(series: EngineSeries) -> FloatArray:
    """Scrape times at which a cumulative counter was lower than at the previous scrape (the engine restarted)."""
    if len(series.ts) < 2:
        return np.empty(0)
    return series.ts[1:][np.diff(series.value) < 0]


def interval_rates(series: EngineSeries) -> tuple[FloatArray, FloatArray]:
    """(end time, increase per second) of each interval of a counter; restarts and zero-length intervals left out."""
    ends, deltas, spans = _kept_intervals(series, -math.inf)
    keep = spans > 0
    return ends[keep], deltas[keep] / spans[keep]


def flat_values(series: Iterable[EngineSeries]) -> FloatArray:
    """Every value of every series, as one array."""
    parts = [one.value for one in series]
    return np.concatenate(parts) if parts else np.empty(0)
