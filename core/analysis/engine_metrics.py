"""Every scraped engine metric as a series: gauges as scraped, counters as rates, histograms as interval means.

Contract (miles' ``Store.engine_metric_names`` / ``Store.engine_series`` /
``Store._derived_series``, in ``miles/dashboard/store.py``):

- :func:`metric_catalog` names what a table can chart: every scraped name that
  is not cumulative is a gauge; every cumulative counter (``*_total``, and a
  ``*_sum`` or ``*_count`` without its partner) is a rate; every ``X_sum`` with
  its ``X_count`` is a latency (or size) mean. miles' own derived names are
  used where it has one (``sglang_prompt_tokens_per_s``, ``sglang_ttft_mean_s``,
  ...); any other counter reads ``<name>_per_s``, any other pair ``X_mean``.
- :func:`rate_points`: over adjacent scrapes of one series, the increase per
  second; an interval whose counter fell (a reset: the engine restarted) or
  that has no length is left out, never 0 and never the new value.
- :func:`mean_points`: the ``_sum`` and ``_count`` series are joined on their
  scrape times; over adjacent joined scrapes, Δsum/Δcount; an interval whose
  sum fell (a reset) or whose count did not grow (no completion, or a reset)
  is left out.
- Each point keeps its numerator and denominator (:class:`Points`), so a time
  bin over several points is Σnum/Σden: the rate over the bin's seconds, the
  mean over the bin's completions (a gauge's denominator is 1: the mean).
- :func:`metric_series` gives these per engine (DP ranks folded as miles folds
  them: summed, the intensive gauges averaged) or per DP rank.
- Pure: tables in, arrays out; never reads files, never formats.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np

from miles_tui.core.telemetry import EngineSeries, EngineTable, FloatArray

Kind = Literal["gauge", "counter", "latency"]

METRIC_KINDS: Final[tuple[Kind, ...]] = ("gauge", "counter", "latency")
"""The groups of the catalog, in display order."""

RATE_NAMES: Final = {
    "sglang_prompt_tokens_total": "sglang_prompt_tokens_per_s",
    "sglang_generation_tokens_total": "sglang_generation_tokens_per_s",
    "sglang_num_requests_total": "sglang_requests_per_s",
    "sglang_num_aborted_requests_total": "sglang_aborted_requests_per_s",
}
"""miles' names of the rates of its counters (``Store.ENGINE_RATE_METRICS``, inverted)."""

MEAN_NAMES: Final = {
    "sglang_time_to_first_token_seconds": "sglang_ttft_mean_s",
    "sglang_inter_token_latency_seconds": "sglang_inter_token_latency_mean_s",
    "sglang_time_per_output_token_seconds": "sglang_time_per_output_token_mean_s",
    "sglang_e2e_request_latency_seconds": "sglang_e2e_latency_mean_s",
}
"""miles' names of its histogram means (``Store.ENGINE_MEAN_METRICS``, inverted)."""

CUMULATIVE_SUFFIXES: Final = ("_total", "_sum", "_count")
"""Names miles stores raw and serves only as derived series."""


@dataclass(frozen=True)
class EngineMetric:
    """One chartable metric."""

    name: str
    """What it is called (miles' derived name for a rate or a mean)."""
    kind: Kind
    """Gauge (as scraped), counter (per second) or latency (interval mean)."""
    sources: tuple[str, ...]
    """The scraped names it is computed from: the gauge, the counter, or (``_sum``, ``_count``)."""


@dataclass(frozen=True, eq=False)
class Points:
    """A derived series: value = num / den at each time."""

    ts: FloatArray
    """Point times (a derived point is stamped at its interval's end), ascending."""
    num: FloatArray
    """Numerators (a gauge's value, a counter's increase, a sum's increase)."""
    den: FloatArray
    """Denominators (1, the interval's seconds, the count's increase); all > 0."""

    @property
    def value(self) -> FloatArray:
        """num / den."""
        return self.num / self.den


@dataclass(frozen=True, eq=False)
class MetricLine:
    """One engine's (or DP rank's) points of a metric."""

    addr: str | None
    """Engine address."""
    labels: tuple[tuple[str, str], ...]
    """Its other labels (``engine_type`` of a PD engine)."""
    dp_rank: str | None
    """The DP rank (None: engine level)."""
    points: Points
    """Its points."""


def _counter_name(raw: str) -> str:
    return RATE_NAMES.get(raw, f"{raw.removesuffix('_total')}_per_s")


def metric_catalog(raw_names: Iterable[str]) -> tuple[EngineMetric, ...]:
    """Every metric ``raw_names`` (normalized scraped names) can chart: gauges, then counters, then latencies,
    each sorted by name."""
    raw = set(raw_names)
    out: list[EngineMetric] = []
    paired = {name.removesuffix("_sum") for name in raw if name.endswith("_sum") and name[:-4] + "_count" in raw}
    for name in sorted(raw):
        if not name.endswith(CUMULATIVE_SUFFIXES):
            out.append(EngineMetric(name, "gauge", (name,)))
        elif name.removesuffix("_sum").removesuffix("_count") not in paired or name.endswith("_total"):
            out.append(EngineMetric(_counter_name(name), "counter", (name,)))
    for base in sorted(paired):
        out.append(EngineMetric(MEAN_NAMES.get(base, f"{base}_mean"), "latency", (base + "_sum", base + "_count")))
    order = {kind: index for index, kind in enumerate(METRIC_KINDS)}
    return tuple(sorted(out, key=lambda m: (order[m.kind], m.name)))


def gauge_points(ts: FloatArray, values: FloatArray) -> Points:
    """A gauge as scraped (denominator 1)."""
    return Points(ts, values, np.ones(len(ts)))


def rate_points(ts: FloatArray, values: FloatArray) -> Points:
    """A cumulative counter's increase per second over each interval between adjacent scrapes (ascending
    ``ts``); intervals whose counter fell or that have no length are left out."""
    if len(ts) < 2:
        empty = np.empty(0)
        return Points(empty, empty, empty)
    d_num, d_den = np.diff(values), np.diff(ts)
    keep = (d_num >= 0) & (d_den > 0)
    return Points(ts[1:][keep], d_num[keep], d_den[keep])


def mean_points(sum_ts: FloatArray, sums: FloatArray, count_ts: FloatArray, counts: FloatArray) -> Points:
    """Δsum/Δcount over each interval between adjacent scrapes both series share (ascending, unique times);
    intervals whose sum fell or whose count did not grow are left out."""
    shared, sum_at, count_at = np.intersect1d(sum_ts, count_ts, return_indices=True)
    if len(shared) < 2:
        empty = np.empty(0)
        return Points(empty, empty, empty)
    d_num, d_den = np.diff(sums[sum_at]), np.diff(counts[count_at])
    keep = (d_num >= 0) & (d_den > 0)
    return Points(shared[1:][keep], d_num[keep], d_den[keep])


def _key(one: EngineSeries) -> tuple[str | None, tuple[tuple[str, str], ...], str | None]:
    return one.addr, one.labels, one.dp_rank


def metric_series(table: EngineTable, metric: EngineMetric, *, per_dp_rank: bool = False) -> tuple[MetricLine, ...]:
    """``metric`` per engine and label set (or per DP rank), in the table's order; a series too short for an
    interval is still a line (with no points)."""
    first = table.series(metric.sources[0], per_dp_rank=per_dp_rank)
    if metric.kind == "gauge":
        return tuple(MetricLine(*_key(one), gauge_points(one.ts, one.value)) for one in first)
    if metric.kind == "counter":
        return tuple(MetricLine(*_key(one), rate_points(one.ts, one.value)) for one in first)
    counts = {_key(one): one for one in table.series(metric.sources[1], per_dp_rank=per_dp_rank)}
    lines = []
    for one in first:
        count = counts.get(_key(one))
        if count is not None:
            lines.append(MetricLine(*_key(one), mean_points(one.ts, one.value, count.ts, count.value)))
    return tuple(lines)


def binned(edges: FloatArray, points: Points) -> FloatArray:
    """Σnum/Σden of the points in each bin ``[edges[i], edges[i+1])`` (the last bin includes its right edge);
    NaN where a bin holds no point."""
    count = len(edges) - 1
    where = np.searchsorted(edges, points.ts, side="right") - 1
    where[points.ts == edges[-1]] = count - 1
    inside = (where >= 0) & (where < count)
    idx = where[inside]
    num = np.bincount(idx, weights=points.num[inside], minlength=count).astype(np.float64)
    den = np.bincount(idx, weights=points.den[inside], minlength=count).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def latest(points: Points, since: float, until: float) -> float | None:
    """The newest point's value in [since, until] (None: none there)."""
    inside = (points.ts >= since) & (points.ts <= until)
    if not inside.any():
        return None
    at = int(np.flatnonzero(inside)[-1])
    return float(points.num[at] / points.den[at])


def exporters(table: EngineTable, metric: EngineMetric) -> tuple[tuple[str | None, str | None], ...]:
    """(engine, DP rank) of every series that scraped ``metric``'s first source (rank None: no DP labels)."""
    seen = {(one.addr, one.dp_rank) for one in table.series(metric.sources[0], per_dp_rank=True)}
    return tuple(sorted(seen, key=lambda pair: (pair[0] or "", pair[1] or "")))


def metrics_of(catalog: Iterable[EngineMetric], table: EngineTable, addr: str | None) -> tuple[EngineMetric, ...]:
    """The metrics of ``catalog`` that engine ``addr`` scraped."""
    return tuple(m for m in catalog if any(one.addr == addr for one in table.series(m.sources[0])))


@dataclass(frozen=True, eq=False)
class ChartLine:
    """One line of a metric chart: an engine, or one DP rank of it."""

    addr: str | None
    """Engine address."""
    labels: tuple[tuple[str, str], ...]
    """Its other labels."""
    dp_rank: str | None
    """The DP rank (None: the engine as a whole)."""
    value: FloatArray
    """Per bin: Σnum/Σden of its points there (NaN: none)."""
    latest: float | None
    """Its newest point's value in the window."""


@dataclass(frozen=True, eq=False)
class MetricChart:
    """A metric over a window: every engine on one chart, or every DP rank of one engine."""

    metric: EngineMetric
    """What is charted."""
    ranks_of: str | None
    """The engine whose DP ranks are the lines (None: the lines are the engines)."""
    lines: tuple[ChartLine, ...]
    """In the table's order (engines, then labels, then ranks)."""


def metric_chart(
    table: EngineTable,
    metric: EngineMetric,
    edges: FloatArray,
    *,
    ranks_of: str | None = None,
    split: bool = False,
) -> MetricChart:
    """``metric`` binned on ``edges`` (the window is ``edges[0]..edges[-1]``): one line per engine, or with
    ``split`` one per DP rank of engine ``ranks_of`` (an engine without DP labels: its one line)."""
    since, until = float(edges[0]), float(edges[-1])
    if split:
        chosen = [line for line in metric_series(table, metric, per_dp_rank=True) if line.addr == ranks_of]
    else:
        chosen = list(metric_series(table, metric))
    lines = tuple(
        ChartLine(line.addr, line.labels, line.dp_rank, binned(edges, line.points), latest(line.points, since, until))
        for line in chosen
    )
    return MetricChart(metric, ranks_of if split else None, lines)
