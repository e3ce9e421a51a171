"""The engines view: each inference engine's load, KV cache, cache hits, throughput and aborts over a window.

Contract:

- Input is an :class:`~miles_tui.core.telemetry.engine_series.EngineTable` (every engine sample
  the caller holds), the window (``since``/``until``, see
  :func:`~miles_tui.core.telemetry.time_bins.window_bounds`) and its ``TimeBins``.
- Per engine, :func:`engine_view` gives one :class:`EnginePanel` per chart of
  :data:`PANELS`: the gauges binned to the mean of the scrapes in each bin
  (NaN where a bin holds none, never 0), one line per DP rank where the
  engine labels ranks (engine level, as miles folds them, otherwise), and
  the abort rate (aborted requests per second over the counter intervals
  ending in each bin; an interval with a counter reset is left out).
- Engine restarts are the scrapes at which any cumulative counter
  (``*_total``/``_sum``/``_count``) of the engine fell; the view lists those in
  the window. Per engine it also gives the latest value of each gauge in the
  window, and the requests and aborts counted in the window.
- Pure: never reads files, never formats, reads no clock (``now`` is passed in).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np

from miles_tui.core.telemetry import (
    ABORTED,
    CACHE_HIT_RATE,
    GEN_THROUGHPUT,
    QUEUED,
    REQUESTS,
    RUNNING,
    TOKEN_USAGE,
    EngineSeries,
    EngineTable,
    FloatArray,
    TimeBins,
    counter_delta,
    restart_times,
)

ABORT_RATE: Final = "aborted_per_s"
"""The derived panel: aborted requests per second."""

PANELS: Final = (RUNNING, QUEUED, TOKEN_USAGE, CACHE_HIT_RATE, GEN_THROUGHPUT, ABORT_RATE)
"""The charts of each engine, in display order."""

CUMULATIVE_SUFFIXES: Final = ("_total", "_sum", "_count")
"""Cumulative counters: a fall in any of them means the engine restarted."""


@dataclass(frozen=True, eq=False)
class EngineLine:
    """One line of a chart: an engine, or one DP rank of it."""

    dp_rank: str | None
    """The rank (None: the engine as a whole)."""
    value: FloatArray
    """Per bin: the mean of the scrapes in it (NaN: none)."""
    latest: float | None
    """The newest scrape's value in the window."""


@dataclass(frozen=True, eq=False)
class EnginePanel:
    """One chart: a metric of one engine, per DP rank where labelled."""

    metric: str
    """One of :data:`PANELS`."""
    lines: tuple[EngineLine, ...]
    """By rank; empty when the engine exports no such metric."""
    latest: float | None
    """The engine-level newest value in the window (ranks folded as miles folds them)."""


@dataclass(frozen=True, eq=False)
class EngineBlock:
    """Everything drawn for one engine."""

    addr: str | None
    """Engine address."""
    dp_ranks: tuple[str, ...]
    """Its DP ranks (empty: no DP attention labels)."""
    panels: Mapping[str, EnginePanel]
    """By metric, every entry of :data:`PANELS`."""
    restarts: tuple[float, ...]
    """Times in the window at which a counter fell (the engine restarted)."""
    requests: float
    """Requests finished in the window (counter increase, reset intervals dropped)."""
    aborted: float
    """Requests aborted in the window, likewise."""
    last_seen: float | None
    """Its newest scrape (any metric, any time)."""


@dataclass(frozen=True, eq=False)
class EngineView:
    """The engines view of one window."""

    now: float
    """The ``now`` it was computed at."""
    span: float | None
    """Window length asked for (None: the whole run)."""
    anchored_to_data: bool
    """Whether the window ends at the newest scrape (the data stopped) rather than at ``now``."""
    bins: TimeBins
    """The window and its bins."""
    interval: float | None
    """Scrape interval (median gap)."""
    engines: tuple[EngineBlock, ...]
    """Per engine, natural order."""
    skipped: int
    """Samples left out because their value is not a number."""


def scrape_interval(table: EngineTable) -> float | None:
    """Median gap between consecutive scrapes of one engine (its running-requests gauge, else any metric)."""
    metric = RUNNING if RUNNING in table.metrics() else next(iter(table.metrics()), None)
    if metric is None:
        return None
    gaps = [g for one in table.series(metric) for g in np.diff(one.ts).tolist() if g > 0]
    return float(statistics.median(gaps)) if gaps else None


def _binned(bins: TimeBins, ts: FloatArray, values: FloatArray, weights: FloatArray | None = None) -> FloatArray:
    """Sum(values) / sum(weights) per bin (weights None: the mean), NaN where a bin holds nothing."""
    where = bins.index(ts)
    inside = where >= 0
    idx = where[inside]
    totals = np.bincount(idx, weights=values[inside], minlength=bins.count).astype(np.float64)
    if weights is None:
        counts = np.bincount(idx, minlength=bins.count).astype(np.float64)
    else:
        counts = np.bincount(idx, weights=weights[inside], minlength=bins.count).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, totals / np.where(counts > 0, counts, 1.0), np.nan)


def _latest(one: EngineSeries, bins: TimeBins) -> float | None:
    inside = (one.ts >= bins.since) & (one.ts <= bins.until)
    return float(one.value[inside][-1]) if inside.any() else None


def _gauge(table: EngineTable, metric: str, addr: str | None, ranks: tuple[str, ...], bins: TimeBins) -> EnginePanel:
    engine = table.engine_series(metric, addr)
    per_rank = table.engine_series(metric, addr, per_dp_rank=True)
    split = bool(ranks) and all(one.dp_rank is not None for one in per_rank)
    shown = per_rank if split else engine
    lines = tuple(EngineLine(one.dp_rank, _binned(bins, one.ts, one.value), _latest(one, bins)) for one in shown)
    latest = next((value for one in engine if (value := _latest(one, bins)) is not None), None)
    return EnginePanel(metric, lines, latest)


def _abort_rate(table: EngineTable, addr: str | None, bins: TimeBins) -> EnginePanel:
    name = table.first_present(ABORTED)
    engine = table.engine_series(name, addr) if name else ()
    lines = []
    for one in engine:
        if len(one.ts) < 2:
            continue
        deltas, spans = np.diff(one.value), np.diff(one.ts)
        keep = (deltas >= 0) & (spans > 0)  # a restart's interval (and a repeated scrape) is left out
        ends, deltas, spans = one.ts[1:][keep], deltas[keep], spans[keep]
        value = _binned(bins, ends, deltas, spans)
        inside = (ends >= bins.since) & (ends <= bins.until)
        latest = float(deltas[inside][-1] / spans[inside][-1]) if inside.any() else None
        lines.append(EngineLine(None, value, latest))
    return EnginePanel(ABORT_RATE, tuple(lines), lines[0].latest if lines else None)


def _restarts(table: EngineTable, addr: str | None, bins: TimeBins) -> tuple[float, ...]:
    counters = [m for m in table.metrics_of(addr) if m.endswith(CUMULATIVE_SUFFIXES) or m in (*REQUESTS, *ABORTED)]
    times: set[float] = set()
    for metric in counters:
        for one in table.engine_series(metric, addr, per_dp_rank=True):
            times.update(t for t in restart_times(one).tolist() if bins.since <= t <= bins.until)
    return tuple(sorted(times))


def _counted(table: EngineTable, names: tuple[str, ...], addr: str | None, since: float, until: float) -> float:
    name = table.first_present(names)
    if name is None:
        return 0.0
    series = table.engine_series(name, addr)
    clipped = [
        EngineSeries(one.addr, one.labels, one.dp_rank, one.ts[one.ts <= until], one.value[one.ts <= until])
        for one in series
    ]
    return counter_delta(clipped, since)


def engine_view(
    table: EngineTable, bins: TimeBins, *, now: float, span: float | None, anchored_to_data: bool = False
) -> EngineView:
    """Every engine's panels, restarts and counts over the window of ``bins``."""
    blocks = []
    for addr in table.addrs():
        ranks = table.dp_ranks(addr)
        panels = {metric: _gauge(table, metric, addr, ranks, bins) for metric in PANELS if metric != ABORT_RATE}
        panels[ABORT_RATE] = _abort_rate(table, addr, bins)
        seen = [float(one.ts[-1]) for m in table.metrics_of(addr) for one in table.engine_series(m, addr)]
        blocks.append(
            EngineBlock(
                addr=addr,
                dp_ranks=ranks,
                panels=panels,
                restarts=_restarts(table, addr, bins),
                requests=_counted(table, REQUESTS, addr, bins.since, bins.until),
                aborted=_counted(table, ABORTED, addr, bins.since, bins.until),
                last_seen=max(seen) if seen else None,
            )
        )
    return EngineView(now, span, anchored_to_data, bins, scrape_interval(table), tuple(blocks), table.skipped)
