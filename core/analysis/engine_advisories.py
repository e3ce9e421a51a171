"""Inference-engine advisories with miles' thresholds and tiers: alarms first, tuning advice only on a healthy run.

Contract:

- :func:`engine_figures` reduces an :class:`~miles_tui.core.telemetry.engine_series.EngineTable`
  to the few numbers miles' engine rules read (:class:`EngineFigures`), over
  everything the table holds: peak running requests (engine level, DP ranks
  summed), mean KV token usage and mean prefix-cache hit rate (DP ranks
  averaged, then over every scrape of every engine), the request and abort
  counters' increase in the last :data:`ABORT_WINDOW_S` before the newest
  counter scrape and over the run (an interval with a counter reset is
  dropped), and each DP rank's mean running requests.
- The rules are pure functions of those figures and the run's arguments
  (``meta.json`` ``args``), each returning zero or more
  :class:`~miles_tui.core.analysis.advisories.Advisory`. :func:`engine_alarms` are alarms;
  :func:`engine_tuning` is tuning advice. :func:`tiered` applies miles' rule:
  tuning advice is reported only while no alarm is active (the same low
  concurrency is headroom on a healthy run and a symptom on a starved one).
  Advisories about the data itself (unreadable files, no new data) are
  neither: they are always reported and suppress nothing.
- Never reads files, never reads the clock.

| code | tier | level | fires when |
|---|---|---|---|
| ``engine_abort_storm`` | alarm | warning | > 5 % of ≥ 100 requests aborted in the last 30 min of scrapes |
| ``kv_cache_pool_bound`` | alarm | warning | mean KV usage > 90 %, peak concurrency < ½ the request cap |
| ``kv_cache_high`` | alarm | warning | otherwise, mean KV usage > 95 % |
| ``low_concurrency`` | tuning | info | peak concurrency < 30 % of the request cap |
| ``low_prefix_cache_hit`` | tuning | info | mean prefix-cache hit rate < 10 % (not with ``--colocate``) |
| ``dp_imbalance`` | tuning | warning | busiest DP rank of an engine ≥ 1 running, idlest < ¼ of it (means) |

The request cap is ``--sglang-max-running-requests`` from ``meta.json``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from miles_tui.core.analysis.advisories import Advisory, Level
from miles_tui.core.telemetry import (
    ABORTED,
    CACHE_HIT_RATE,
    REQUESTS,
    RUNNING,
    TOKEN_USAGE,
    EngineSeries,
    EngineTable,
    FloatArray,
    counter_delta,
    flat_values,
    natural_key,
)
from miles_tui.core.telemetry.engine_series import LabelKey, normalize
from miles_tui.core.telemetry.hours.engine_digest import EngineDigest

ABORT_WINDOW_S: Final = 1800.0
"""The abort storm is judged over this many seconds before the newest request-counter scrape (not the wall
clock: when the engines die the window must not slide past their data, nor latch on an old storm)."""
ABORT_RATIO: Final = 0.05
"""Aborted requests above this fraction of the window's requests are a storm ..."""
ABORT_MIN_REQUESTS: Final = 100.0
"""... once the window holds at least this many requests (1 of 12 aborted is no storm)."""

KV_BOUND_USAGE: Final = 0.90
"""Mean KV token usage above which the pool may bind concurrency ..."""
KV_BOUND_RUNNING_RATIO: Final = 0.5
"""... when peak concurrency stays under this fraction of ``--sglang-max-running-requests``."""
KV_HIGH_USAGE: Final = 0.95
"""Mean KV token usage called consistently high (a throughput bottleneck)."""

LOW_CONCURRENCY_RATIO: Final = 0.3
"""Peak concurrency under this fraction of the request cap leaves most request slots unused."""
LOW_CACHE_HIT_RATE: Final = 0.10
"""Mean prefix-cache hit rate called low."""
DP_IMBALANCE_MIN_RUNNING: Final = 1.0
"""The busiest DP rank must carry at least this many running requests on average ..."""
DP_IMBALANCE_RATIO: Final = 0.25
"""... and the idlest under this fraction of it, for the load to be called imbalanced."""

ALARM_CODES: Final = frozenset({"stalled_phase", "engine_abort_storm", "kv_cache_pool_bound", "kv_cache_high"})
"""Advisories that are alarms: while one is active, tuning advice is not reported."""
TUNING_CODES: Final = frozenset({"low_mfu", "low_concurrency", "low_prefix_cache_hit", "dp_imbalance"})
"""Advisories that are tuning advice."""


@dataclass(frozen=True)
class CounterWindow:
    """Requests and aborts counted over a span of counter scrapes."""

    since: float
    """Intervals ending at or after this count (-inf: the whole run)."""
    edge: float | None
    """The newest counter scrape (None: no counter)."""
    requests: float
    """Increase of the finished-requests counters, summed over engines."""
    aborted: float
    """Increase of the aborted-requests counters."""
    aborted_by_engine: Mapping[str | None, float]
    """The aborted increase per engine."""


@dataclass(frozen=True)
class EngineFigures:
    """What miles' engine rules read, over everything the table holds."""

    engines: tuple[str | None, ...]
    """Engine addresses."""
    peak_running: float | None
    """Most requests one engine ran at one scrape (DP ranks summed)."""
    token_usage_mean: float | None
    """Mean KV token usage (a fraction; a percent series is scaled)."""
    cache_hit_rate_mean: float | None
    """Mean prefix-cache hit rate (a fraction)."""
    abort_window: CounterWindow
    """The last :data:`ABORT_WINDOW_S` of counter scrapes."""
    abort_run: CounterWindow
    """The whole run."""
    dp_rank_running_means: Mapping[str | None, Mapping[str, float]]
    """Per engine with DP ranks: each rank's mean running requests."""


def _fraction_mean(table: EngineTable, metric: str) -> float | None:
    values = flat_values(table.series(metric))
    if not len(values):
        return None
    scale = 100.0 if float(values.max()) > 1.0 else 1.0  # a percent series (sglang writes fractions)
    return float(values.mean()) / scale


def _counters(table: EngineTable, since_window: float | None) -> CounterWindow:
    requests = table.series(table.first_present(REQUESTS) or REQUESTS[0])
    aborts = table.series(table.first_present(ABORTED) or ABORTED[0])
    ends = [float(one.ts[-1]) for one in (*requests, *aborts) if len(one.ts)]
    edge = max(ends) if ends else None
    since = -math.inf if since_window is None or edge is None else edge - since_window
    by_engine: dict[str | None, float] = {}
    for one in aborts:
        by_engine[one.addr] = by_engine.get(one.addr, 0.0) + counter_delta([one], since)
    return CounterWindow(since, edge, counter_delta(requests, since), counter_delta(aborts, since), by_engine)


def engine_figures(table: EngineTable) -> EngineFigures:
    """The inputs of the engine rules."""
    running = flat_values(table.series(RUNNING))
    means: dict[str | None, dict[str, float]] = {}
    for one in table.series(RUNNING, per_dp_rank=True):
        if one.dp_rank is not None and len(one.value):
            means.setdefault(one.addr, {})[one.dp_rank] = float(one.value.mean())
    return EngineFigures(
        engines=table.addrs(),
        peak_running=float(running.max()) if len(running) else None,
        token_usage_mean=_fraction_mean(table, TOKEN_USAGE),
        cache_hit_rate_mean=_fraction_mean(table, CACHE_HIT_RATE),
        abort_window=_counters(table, ABORT_WINDOW_S),
        abort_run=_counters(table, None),
        dp_rank_running_means=means,
    )


class _Counters:
    """The counter series of a run rebuilt from hourly digests: what :func:`_counters` reads of a table."""

    def __init__(self, present: set[str], series: Mapping[str, tuple[EngineSeries, ...]]) -> None:
        self._present = present
        self._series = series

    def series(self, metric: str) -> tuple[EngineSeries, ...]:
        return self._series.get(normalize(metric), ())

    def first_present(self, names: Iterable[str]) -> str | None:
        return next((name for name in names if normalize(name) in self._present), None)


def figures_from_digests(digests: Sequence[EngineDigest]) -> EngineFigures | None:
    """:func:`engine_figures` of a whole run from its hours' digests (:mod:`.hours.engine_digest`).

    The same figures, up to the order of float additions, at a cost of hours, not scrapes. None when two
    hours hold one counter series at overlapping times (an old flat file beside hourly ones): then the caller
    reads the table.
    """
    gauges: dict[str, list[float]] = {}
    for digest in digests:
        for metric, (total, count, top) in digest.gauges.items():
            known = gauges.setdefault(metric, [0.0, 0, -math.inf])
            known[0], known[1], known[2] = known[0] + total, known[1] + count, max(known[2], top)
    points: dict[tuple[str, str | None, LabelKey], list[tuple[FloatArray, FloatArray]]] = {}
    for digest in digests:
        bounds = np.concatenate([[0], np.cumsum(digest.counter_lengths)])
        for i, key in enumerate(digest.counter_keys):
            a, b = int(bounds[i]), int(bounds[i + 1])
            points.setdefault(key, []).append((digest.counter_ts[a:b], digest.counter_values[a:b]))
    series: dict[str, list[EngineSeries]] = {}
    for (metric, addr, labels), parts in points.items():
        ts = np.concatenate([p[0] for p in parts])
        if len(ts) > 1 and not (np.diff(ts) > 0).all():
            return None
        series.setdefault(metric, []).append(
            EngineSeries(addr, labels, None, ts, np.concatenate([p[1] for p in parts]))
        )
    ordered_series = {
        m: tuple(sorted(v, key=lambda s: (natural_key(s.addr or ""), s.labels))) for m, v in series.items()
    }
    counters = _Counters({m for d in digests for m in d.metrics}, ordered_series)
    dp: dict[tuple[str | None, LabelKey, str], list[float]] = {}
    for digest in digests:
        for addr, labels, rank, total, count in digest.dp_running:
            known = dp.setdefault((addr, labels, rank), [0.0, 0])
            known[0], known[1] = known[0] + total, known[1] + count
    means: dict[str | None, dict[str, float]] = {}
    for (addr, _, rank), (summed, scrapes) in sorted(
        dp.items(), key=lambda item: (natural_key(item[0][0] or ""), item[0][1], natural_key(item[0][2]))
    ):
        means.setdefault(addr, {})[rank] = summed / scrapes

    def mean(metric: str) -> float | None:
        total, count, top = gauges.get(metric, (0.0, 0, 0.0))
        return None if not count else (total / count) / (100.0 if top > 1.0 else 1.0)

    running = gauges.get(RUNNING)
    return EngineFigures(
        engines=tuple(sorted({a for d in digests for a in d.addrs}, key=lambda addr: natural_key(addr or ""))),
        peak_running=running[2] if running and running[1] else None,
        token_usage_mean=mean(TOKEN_USAGE),
        cache_hit_rate_mean=mean(CACHE_HIT_RATE),
        abort_window=_counters(counters, ABORT_WINDOW_S),  # type: ignore[arg-type]
        abort_run=_counters(counters, None),  # type: ignore[arg-type]
        dp_rank_running_means=means,
    )


def _number(value: Any) -> float | None:
    """A finite int/float argument (never a bool), else None."""
    if type(value) not in (int, float) or not math.isfinite(value):
        return None
    return float(value)


def _cap(args: Mapping[str, Any]) -> float | None:
    cap = _number(args.get("sglang_max_running_requests"))
    return cap if cap is not None and cap > 0 else None


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}min"


def abort_storm(figures: EngineFigures, args: Mapping[str, Any]) -> list[Advisory]:
    """Many engine requests aborted in the last :data:`ABORT_WINDOW_S` of counter scrapes."""
    window, run = figures.abort_window, figures.abort_run
    total, aborted = window.requests, window.aborted
    if total < ABORT_MIN_REQUESTS or aborted / total <= ABORT_RATIO:
        return []
    message = (
        f"{aborted:.0f} of {total:.0f} engine requests ({aborted / total:.0%}) were aborted in the "
        f"{_minutes(ABORT_WINDOW_S)} up to the newest engine scrape"
    )
    if run.requests > 0:
        message += f" ({run.aborted / run.requests:.0%} over the run)"
    hit = {addr: n for addr, n in window.aborted_by_engine.items() if n > 0}
    if len(hit) > 1:
        worst = max(hit, key=lambda addr: hit[addr])
        message += f", {hit[worst]:.0f} of them on {worst}"
    message += ": requests are timing out or being cancelled, and their samples are lost"
    group = _number(args.get("n_samples_per_prompt"))
    if group is not None and group > 1:
        message += f" (with {group:g} samples per prompt one abort discards a whole group)"
    message += "; check engine health and the request timeout before tuning anything else"
    return [Advisory(Level.WARNING, "engine_abort_storm", message)]


def kv_cache(figures: EngineFigures, args: Mapping[str, Any]) -> list[Advisory]:
    """KV pool-bound (usage high while few requests run) or, failing that, consistently high usage."""
    usage, peak, cap = figures.token_usage_mean, figures.peak_running, _cap(args)
    if usage is None or usage <= KV_BOUND_USAGE:
        return []
    if cap is not None and peak is not None and peak < KV_BOUND_RUNNING_RATIO * cap:
        mem = _number(args.get("sglang_mem_fraction_static"))
        message = (
            f"KV cache usage averaged {usage:.0%} while peak concurrency ({peak:.0f}) stayed under half of "
            f"--sglang-max-running-requests ({cap:g}): concurrency is bound by the KV pool, not by the request cap. "
            f"Raise --sglang-mem-fraction-static{f' (now {mem:g})' if mem is not None else ''}, shorten the "
            "contexts or add engines; lowering the request cap will not help"
        )
        return [Advisory(Level.WARNING, "kv_cache_pool_bound", message)]
    if usage > KV_HIGH_USAGE:
        message = (
            f"KV cache usage averaged {usage:.1%}, consistently high: the engines are likely the throughput "
            "bottleneck; consider more engines (GPUs) or a smaller rollout batch"
        )
        return [Advisory(Level.WARNING, "kv_cache_high", message)]
    return []


def low_concurrency(figures: EngineFigures, args: Mapping[str, Any]) -> list[Advisory]:
    """Peak concurrency far below the request cap: slots (and their memory) never used."""
    peak, cap = figures.peak_running, _cap(args)
    if cap is None or peak is None or peak >= LOW_CONCURRENCY_RATIO * cap:
        return []
    message = (
        f"Peak concurrency ({peak:.0f}) stayed under {LOW_CONCURRENCY_RATIO:.0%} of "
        f"--sglang-max-running-requests ({cap:g}); consider lowering it"
    )
    if args.get("colocate") is True:
        message += ", which frees memory for training (colocated)"
    return [Advisory(Level.INFO, "low_concurrency", message)]


def low_prefix_cache_hit(figures: EngineFigures, args: Mapping[str, Any]) -> list[Advisory]:
    """Prompts rarely reuse cached prefixes (judged only when the engines are not colocated with training)."""
    hit = figures.cache_hit_rate_mean
    if args.get("colocate") is True or hit is None or hit >= LOW_CACHE_HIT_RATE:
        return []
    mem = _number(args.get("sglang_mem_fraction_static"))
    message = f"Prefix cache hit rate is low ({hit:.1%})"
    if mem is not None:
        message += f"; a bigger KV cache (--sglang-mem-fraction-static, now {mem:g}) keeps more prefixes"
    return [Advisory(Level.INFO, "low_prefix_cache_hit", message)]


def _spread_hint(args: Mapping[str, Any]) -> str:
    """Which setting decides how requests spread over an engine's DP ranks."""
    if args.get("use_miles_router"):
        return "the miles router routes per engine and --sglang-load-balance-method picks the rank"
    if not args.get("router_dp_aware"):
        return "the router sees one worker per engine; --router-dp-aware makes it route per rank"
    policy = args.get("sglang_router_policy") or args.get("router_policy")
    return f"--router-policy ({policy}) picks the rank"


def dp_imbalance(figures: EngineFigures, args: Mapping[str, Any]) -> list[Advisory]:
    """Requests pile onto a few DP ranks of an engine while the others idle."""
    out = []
    for addr in sorted(figures.dp_rank_running_means, key=lambda a: natural_key(a or "")):
        means = figures.dp_rank_running_means[addr]
        if len(means) < 2:
            continue
        busiest, idlest = max(means.values()), min(means.values())
        if busiest < DP_IMBALANCE_MIN_RUNNING or idlest >= DP_IMBALANCE_RATIO * busiest:
            continue
        detail = ", ".join(f"dp{rank}={means[rank]:.1f}" for rank in sorted(means, key=natural_key))
        message = (
            f"{addr}: DP ranks are imbalanced (mean running requests {detail}): requests pile onto few ranks "
            f"while others idle; {_spread_hint(args)}"
        )
        out.append(Advisory(Level.WARNING, "dp_imbalance", message))
    return out


def engine_alarms(figures: EngineFigures, args: Mapping[str, Any]) -> list[Advisory]:
    """The engine rules of the alarm tier."""
    return [*abort_storm(figures, args), *kv_cache(figures, args)]


def engine_tuning(figures: EngineFigures, args: Mapping[str, Any]) -> list[Advisory]:
    """The engine rules of the tuning tier."""
    return [*low_concurrency(figures, args), *low_prefix_cache_hit(figures, args), *dp_imbalance(figures, args)]


def tiered(alarms: Iterable[Advisory], tuning: Iterable[Advisory], always: Iterable[Advisory] = ()) -> list[Advisory]:
    """miles' rule: alarms, the advisories that are always reported, and tuning advice only without an alarm."""
    raised = list(alarms)
    return [*raised, *always, *([] if raised else tuning)]
