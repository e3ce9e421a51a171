"""What the metrics view draws, computed headless: groups, filters, smoothing, downsampling, lookups.

Contract:

- Keys are grouped by their prefix category (``train/``, ``rollout/``,
  ``perf/``, ``eval/``, ``dump/``, everything else ``other``) and filtered by
  a pattern: a glob when it holds ``*``, ``?`` or ``[``, else a substring;
  case-insensitive; several space-separated terms match when any does.
- Series are :class:`~miles_tui.core.telemetry.metrics.metric_store.MetricSeries` (a run without
  ``metrics.jsonl`` gets ``dump/...`` series built from its step aggregates,
  against ``rollout_id``). :func:`in_step_order` makes a series plottable:
  points without a numeric step dropped, stably sorted by step (a resumed run
  logs some steps twice: both points are kept, the later one last).
- :func:`ema` smooths (NaN and ±inf skipped: they stay gaps and do not move
  the average); :func:`downsample` keeps each bucket's min and max (spikes
  survive) and their own x; :func:`log_safe` turns non-positive values into
  gaps; :func:`plot_data` chains them into what one chart draws.
- :func:`value_at` is the inspector's lookup: the last point at or before a
  step, raw as the store holds it; :func:`move_cursor` walks a step cursor
  over the steps the shown series have (:func:`step_union`).

Never reads files, never formats a number, never touches the clock.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.base.pacing import Pacer
from miles_tui.core.dump import StepAggregate
from miles_tui.core.telemetry import MetricSeries, MetricStore

FloatArray = npt.NDArray[np.float64]

CATEGORIES: Final = ("train", "rollout", "perf", "eval", "dump", "other")
"""Category names in display order; a key's category is its prefix before ``/`` when listed here."""

TRAINER_ROLLOUT_KEYS: Final = frozenset(
    {"rollout/log_probs", "rollout/ref_log_probs", "rollout/rollout_log_probs", "rollout/teacher_log_probs"}
)
"""Keys miles logs under ``rollout/`` that the train step computes (the policy's, the reference's, the rollout
engine's and a teacher's log-probs of the responses, averaged by the trainer): charted under train, as miles'
dashboard shows them."""

DUMP_X_KEY: Final = "rollout_id"
"""The x key of the series built from step aggregates."""

DUMP_FIELDS: Final = (
    "reward_mean",
    "zero_std_group_frac",
    "truncated_frac",
    "avg_staleness",
    "mean_abs_lp_diff",
    "mean_entropy",
    "response_length_mean",
    "reward_std",
    "mixed_version_frac",
)
"""StepAggregate fields charted as ``dump/{field}`` (train steps) when a run has no metrics.jsonl."""

DUMP_EVAL_FIELDS: Final = ("reward_mean", "reward_std")
"""StepAggregate fields of eval steps, charted as ``dump/eval_{field}``."""

SMOOTHING_LEVELS: Final = (0.0, 0.6, 0.9)
"""The view's smoothing weights (TensorBoard's convention: the weight of the past; 0 is off)."""

_GLOB_CHARS: Final = frozenset("*?[")
_MAX_CHUNK: Final = 1024


# -- keys ----------------------------------------------------------------------------


def category(key: str) -> str:
    """The category a key is grouped under: its prefix when it is a known one, else ``other`` (the trainer's
    log-probs logged under ``rollout/`` are ``train``: :data:`TRAINER_ROLLOUT_KEYS`)."""
    if key in TRAINER_ROLLOUT_KEYS:
        return "train"
    prefix, slash, _rest = key.partition("/")
    return prefix if slash and prefix in CATEGORIES else "other"


def group_keys(keys: Iterable[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(category, its keys sorted) in :data:`CATEGORIES` order; empty categories left out."""
    groups: dict[str, list[str]] = {name: [] for name in CATEGORIES}
    for key in keys:
        groups[category(key)].append(key)
    return tuple((name, tuple(sorted(members))) for name, members in groups.items() if members)


def is_glob(term: str) -> bool:
    """Whether a filter term is a glob (holds ``*``, ``?`` or ``[``) rather than a substring."""
    return not _GLOB_CHARS.isdisjoint(term)


def key_matches(key: str, pattern: str) -> bool:
    """Whether ``key`` matches any space-separated term of ``pattern`` (an empty pattern matches all)."""
    terms = pattern.lower().split()
    if not terms:
        return True
    lowered = key.lower()
    return any(fnmatch.fnmatchcase(lowered, term) if is_glob(term) else term in lowered for term in terms)


def filter_keys(keys: Iterable[str], pattern: str) -> tuple[str, ...]:
    """The keys matching ``pattern``, in their given order."""
    return tuple(key for key in keys if key_matches(key, pattern))


def chart_keys(store: MetricStore) -> tuple[str, ...]:
    """The store's metric names worth a chart: every key except the step counters themselves (x = y lines)."""
    step_keys = set(store.step_keys())
    names = store.keys()
    return tuple(key for key in names if key not in step_keys)


# -- series --------------------------------------------------------------------------


def _series(key: str, x_key: str, step: FloatArray, value: FloatArray) -> MetricSeries:
    count = len(step)
    return MetricSeries(
        key=key,
        x_key=x_key,
        record=np.arange(count, dtype=np.int64),
        step=step,
        value=value,
        ts=np.full(count, np.nan),
    )


def in_step_order(series: MetricSeries) -> MetricSeries:
    """The points with a numeric step, stably sorted by step (already-sorted series are returned as they are)."""
    keep = np.isfinite(series.step)
    if keep.all() and (len(series.step) < 2 or bool(np.all(np.diff(series.step) >= 0))):
        return series
    order = np.flatnonzero(keep)
    order = order[np.argsort(series.step[order], kind="stable")]
    return MetricSeries(
        key=series.key,
        x_key=series.x_key,
        record=series.record[order],
        step=series.step[order],
        value=series.value[order],
        ts=series.ts[order],
    )


def dump_series(aggregates: Iterable[StepAggregate]) -> dict[str, MetricSeries]:
    """``dump/{field}`` series of train steps (and ``dump/eval_{field}`` of eval steps) against rollout id.

    A step whose field is None gives a NaN point (a gap). Series with no value at
    all are left out; so is an eval series when the run has no eval steps.
    """
    ordered = sorted(aggregates, key=lambda a: (a.rollout_id, a.evaluation))
    out: dict[str, MetricSeries] = {}
    for evaluation, fields, prefix in ((False, DUMP_FIELDS, "dump/"), (True, DUMP_EVAL_FIELDS, "dump/eval_")):
        steps = [a for a in ordered if a.evaluation == evaluation]
        if not steps:
            continue
        x = np.array([a.rollout_id for a in steps], dtype=np.float64)
        for name in fields:
            raw = [getattr(a, name) for a in steps]
            if all(v is None for v in raw):
                continue
            values = np.array([math.nan if v is None else float(v) for v in raw], dtype=np.float64)
            out[prefix + name] = _series(prefix + name, DUMP_X_KEY, x, values)
    return out


# -- smoothing, downsampling, log ----------------------------------------------------


def smoothing_alpha(weight: float) -> float:
    """The EMA ``alpha`` (weight of the new point) of a TensorBoard-style smoothing weight (weight of the past)."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    return 1.0 - weight


def _ema_dense(values: FloatArray, alpha: float) -> FloatArray:
    """EMA of finite values, ``s_0 = x_0``, ``s_t = (1-alpha) s_{t-1} + alpha x_t``, in chunks.

    Within a chunk ``s_j = d^(j+1) (s_prev + alpha Σ_{k<=j} x_k d^-(k+1))`` with
    ``d = 1 - alpha``; a chunk is short enough that ``d^-chunk`` stays far from overflow.
    """
    decay = 1.0 - alpha
    if decay <= 0.0 or len(values) == 0:
        return values.astype(np.float64, copy=True)
    chunk = int(min(_MAX_CHUNK, max(1.0, 250.0 / -math.log10(decay))))
    exponents = np.arange(1, chunk + 1, dtype=np.float64)
    grow = decay**-exponents
    shrink = decay**exponents
    out = np.empty(len(values), dtype=np.float64)
    state = float(values[0])
    for start in range(0, len(values), chunk):
        segment = values[start : start + chunk]
        count = len(segment)
        weighted = np.cumsum(segment * grow[:count])
        out[start : start + count] = shrink[:count] * (state + alpha * weighted)
        state = float(out[start + count - 1])
    return out


def ema(values: FloatArray, alpha: float | None = None, *, span: float | None = None) -> FloatArray:
    """Exponential moving average (``alpha`` = weight of the new point, or ``span``: alpha = 2/(span+1)).

    NaN and ±inf positions stay NaN in the result and leave the average where it
    was; the first finite value starts it (no bias towards zero).
    """
    if (alpha is None) == (span is None):
        raise ValueError("give exactly one of alpha and span")
    if span is not None:
        if span < 1:
            raise ValueError(f"span must be >= 1, got {span}")
        alpha = 2.0 / (span + 1.0)
    assert alpha is not None
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    out = np.full(len(values), np.nan)
    out[finite] = _ema_dense(values[finite], alpha)
    return out


def _kept(y: FloatArray, max_points: int) -> npt.NDArray[np.intp]:
    """Indices of at most ``max_points`` points of ``y``: consecutive buckets, each its min and max point
    (in order); a bucket with no value (all NaN) keeps its first point, so a gap stays a gap."""
    if max_points < 2:
        raise ValueError(f"max_points must be >= 2, got {max_points}")
    count = len(y)
    if count <= max_points:
        return np.arange(count)
    size = math.ceil(count / (max_points // 2))
    rows = math.ceil(count / size)
    padded = np.full(rows * size, np.nan)
    padded[:count] = y
    grid = padded.reshape(rows, size)
    present = ~np.isnan(grid)
    low = np.where(present, grid, np.inf).argmin(axis=1)
    high = np.where(present, grid, -np.inf).argmax(axis=1)
    base = np.arange(rows) * size
    first = base + np.minimum(low, high)
    second = base + np.maximum(low, high)
    pairs = np.stack([first, second], axis=1)
    keep = np.ones_like(pairs, dtype=bool)
    keep[:, 1] = second != first
    index: npt.NDArray[np.intp] = pairs[keep]
    return index


def downsample(x: FloatArray, y: FloatArray, max_points: int) -> tuple[FloatArray, FloatArray]:
    """At most ``max_points`` points: consecutive buckets, each kept as its min and max point, at their own x.

    Fewer points than that come back unchanged (copies). A bucket with no value
    (all NaN) keeps one NaN point, so a gap stays a gap; ±inf count as extremes.
    """
    index = _kept(y, max_points)
    return x[index].astype(np.float64), y[index].astype(np.float64)


CHART_POINTS: Final = 4_096
"""A chart keeps at most this many points of a series: ten times what the widest chart draws, so a
2,000,000-point series costs a chart 128 KB instead of 64 MB."""


@dataclass(frozen=True, eq=False)
class ChartSeries:
    """A series as a chart keeps it: real points only, and its smoothed line computed on every point."""

    series: MetricSeries
    """The points kept, in step order: all of them, or each bucket's lowest and highest point (exact values
    at their own steps: the cursor and the inspector read them)."""
    total: int
    """Points of the whole series."""
    smooth: Mapping[float, FloatArray]
    """Of a reduced series, for each weight of :data:`SMOOTHING_LEVELS`: the EMA of the *whole* series at
    the kept points (an EMA of the kept points would differ). Empty when every point is kept."""


def chart_series(series: MetricSeries, max_points: int = CHART_POINTS) -> ChartSeries:
    """``series`` in step order, reduced to at most ``max_points`` real points when longer."""
    ordered = in_step_order(series)
    total = len(ordered.value)
    if total <= max_points:
        return ChartSeries(ordered, total, {})
    index = _kept(ordered.value, max_points)
    smooth = {w: ema(ordered.value, smoothing_alpha(w))[index] for w in SMOOTHING_LEVELS if w > 0}
    kept = MetricSeries(
        key=ordered.key,
        x_key=ordered.x_key,
        record=ordered.record[index],
        step=ordered.step[index],
        value=ordered.value[index],
        ts=ordered.ts[index],
    )
    return ChartSeries(kept, total, smooth)


def store_chart_series(
    store: MetricStore,
    x_keys: Mapping[str, str | None],
    max_points: int = CHART_POINTS,
    cancelled: Callable[[], bool] = lambda: False,
    pause_share: float = 0.0,
) -> dict[str, ChartSeries] | None:
    """Each key's :func:`chart_series` against its x key (None: the key's default); keys without one left
    out. Key by key under the store's lock (a thread may call it while another appends), so at most one
    whole series is held at a time; None as soon as ``cancelled()`` says so (checked between keys).

    ``pause_share``: after each key, sleep this many times as long as the key took (at most
    :data:`MAX_PAUSE` s), so a thread reading a long run's series leaves the GIL to a UI's thread."""
    out: dict[str, ChartSeries] = {}
    pacer = Pacer(pause_share, MAX_PAUSE)
    for key, x_key in x_keys.items():
        if cancelled():
            return None
        series = store.series(key, x_key)
        if series is not None:
            out[key] = chart_series(series, max_points)
        pacer.pause()
    return out


MAX_PAUSE: Final = 0.1


def log_safe(values: FloatArray) -> FloatArray:
    """``values`` for a log axis: non-positive values (and NaN) become NaN gaps."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(values > 0, values, np.nan)


# -- what one chart draws ------------------------------------------------------------


@dataclass(frozen=True)
class PointAt:
    """A series' point found for a step."""

    step: float
    """The point's own step (at or before the step asked for)."""
    value: float
    """Its value as the store holds it (NaN: logged, but not a number)."""


def value_at(series: MetricSeries, step: float) -> PointAt | None:
    """The last point of ``series`` (in step order) at or before ``step``; None before its first point."""
    ordered = in_step_order(series)
    position = int(np.searchsorted(ordered.step, step, side="right")) - 1
    if position < 0:
        return None
    return PointAt(float(ordered.step[position]), float(ordered.value[position]))


def values_at(series: Mapping[str, MetricSeries], step: float) -> dict[str, PointAt | None]:
    """:func:`value_at` of every series, by key."""
    return {key: value_at(one, step) for key, one in series.items()}


def move_cursor(stops: FloatArray, cursor: float | None, delta: int) -> float | None:
    """The step ``delta`` stops from ``cursor`` among ``stops`` (ascending), clamped to the ends.

    From no cursor, any move lands on the last stop (the newest step); a cursor
    between stops counts from the stop it passes first. None without stops.
    """
    if not len(stops):
        return None
    if cursor is None:
        index = len(stops) - 1
    elif delta > 0:
        index = int(np.searchsorted(stops, cursor, side="right")) + delta - 1
    else:
        index = int(np.searchsorted(stops, cursor, side="left")) + delta
    return float(stops[min(max(index, 0), len(stops) - 1)])


def same_points(a: MetricSeries, b: MetricSeries) -> bool:
    """Whether two series hold the same steps and values (NaN equal to NaN)."""
    return bool(np.array_equal(a.step, b.step) and np.array_equal(a.value, b.value, equal_nan=True))


def step_union(series: Iterable[MetricSeries]) -> FloatArray:
    """Every distinct numeric step of the given series, ascending (where a step cursor can stop)."""
    steps = [one.step[np.isfinite(one.step)] for one in series]
    if not steps:
        return np.zeros(0, dtype=np.float64)
    return np.unique(np.concatenate(steps))


@dataclass(frozen=True, eq=False)
class PlotData:
    """One chart's points, downsampled, in plot space (log10 of the values when ``log_y``)."""

    key: str
    """The metric name."""
    x_key: str
    """The step key it is plotted against."""
    x: FloatArray
    """Step of each drawn point."""
    raw: FloatArray
    """Raw value of each drawn point in plot space (NaN: gap)."""
    smooth_x: FloatArray
    """Step of each drawn point of the smoothed line (empty without smoothing; at most half as many points)."""
    smooth: FloatArray
    """Smoothed value of each of those points in plot space (empty without smoothing)."""
    lo: float | None
    """Smallest finite plot-space value drawn (None: nothing to draw)."""
    hi: float | None
    """Largest finite plot-space value drawn."""
    x_lo: float | None
    """First step of the series (None without points)."""
    x_hi: float | None
    """Last step of the series."""
    log_y: bool
    """Whether plot space is log10 of the values."""
    smoothing: float
    """The smoothing weight applied (0: none)."""
    points: int
    """Points of the full series (before downsampling)."""
    window: tuple[float, float] | None = None
    """The step window drawn (None: the whole series); :attr:`x_lo` and :attr:`x_hi` are its ends then."""
    hidden: int = 0
    """Points of the window that are not drawn: not positive on a log axis (a log axis has no place for them)."""


def _finite_range(arrays: Sequence[FloatArray]) -> tuple[float | None, float | None]:
    finite = [a[np.isfinite(a)] for a in arrays]
    finite = [a for a in finite if len(a)]
    if not finite:
        return None, None
    return float(min(a.min() for a in finite)), float(max(a.max() for a in finite))


def plot_data(
    series: MetricSeries | ChartSeries,
    max_points: int,
    smoothing: float = 0.0,
    log_y: bool = False,
    steps: tuple[float, float] | None = None,
) -> PlotData:
    """What one chart draws: step order, smoothing (on the linear values, over the whole series), log safety, the
    step window (``steps``: first and last step shown, None for all), then downsampling.

    A reduced :class:`ChartSeries` brings its smoothed line (computed on the whole series) and its count.
    """
    chart = series if isinstance(series, ChartSeries) else chart_series(series, max_points=2**62)
    ordered = chart.series
    x, raw = ordered.step, ordered.value
    smooth = np.zeros(0)
    if smoothing > 0 and len(raw):
        given = chart.smooth.get(smoothing)
        smooth = given if given is not None else ema(raw, smoothing_alpha(smoothing))
    if steps is not None:
        keep = (x >= steps[0]) & (x <= steps[1])
        x, raw = x[keep], raw[keep]
        smooth = smooth[keep] if len(smooth) else smooth
    hidden = int((np.isfinite(raw) & (raw <= 0)).sum()) if log_y else 0
    if log_y:
        with np.errstate(divide="ignore"):
            raw = np.log10(log_safe(raw))
            smooth = np.log10(log_safe(smooth))
    drawn_x, drawn_raw = downsample(x, raw, max_points)
    # A smoothed line has no spikes to keep: half the points (one per plot column) draw it as well.
    half = max(2, max_points // 2)
    smooth_x, drawn_smooth = downsample(x, smooth, half) if len(smooth) else (np.zeros(0), np.zeros(0))
    lo, hi = _finite_range([drawn_raw, drawn_smooth])
    x_lo, x_hi = (float(x[0]), float(x[-1])) if len(x) else (None, None)
    return PlotData(
        key=ordered.key,
        x_key=ordered.x_key,
        x=drawn_x,
        raw=drawn_raw,
        smooth_x=smooth_x,
        smooth=drawn_smooth,
        lo=lo,
        hi=hi,
        x_lo=steps[0] if steps is not None else x_lo,
        x_hi=steps[1] if steps is not None else x_hi,
        log_y=log_y,
        smoothing=smoothing,
        points=chart.total,
        window=steps,
        hidden=hidden,
    )
