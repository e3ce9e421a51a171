"""The compute view: GPU lanes and the fleet over a time window, binned for drawing, with the phases beside them.

Contract:

- Input is columnar: :class:`~miles_tui.core.telemetry.gpu_samples.GpuSamples` and
  :class:`~miles_tui.core.telemetry.phase_bands.PhaseSpans` (built from records by those modules,
  kept up to date for a live run by :mod:`miles_tui.core.telemetry.telemetry_columns`), and the
  window's :class:`~miles_tui.core.telemetry.time_bins.TimeBins`.
- :func:`bin_lanes` gives the mean utilisation and memory of each lane in each
  bin, NaN where a bin holds no sample (never 0: "no data" and "idle" differ).
  :func:`fleet_summary` gives the median and p10/p90 of utilisation across lanes
  per bin and how many lanes went silent. :func:`lane_health` says how long ago
  each lane was last sampled and whether it lags the rest of the fleet (a dead
  node) or the whole fleet is quiet. :func:`select_lanes` picks the lanes to list
  (all, one node's, the worst N). :func:`compute_view` does all of it, phases too: the
  bands across ranks, and each lane's own phase per bin
  (:func:`~miles_tui.core.telemetry.lane_phases.lane_phases`). The window comes
  resolved (:class:`~miles_tui.core.telemetry.time_window.Frame`: live or panned).
- Pure: arrays in, frozen values out; everything that depends on the clock takes
  ``now``. Never reads files, never formats.
"""

from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry import (
    FloatArray,
    Frame,
    GpuSamples,
    IntArray,
    Lane,
    LanePhases,
    PhaseBand,
    PhaseSpans,
    TimeBins,
    TimeWindow,
    lane_key,
    natural_key,
    phase_time,
)
from miles_tui.core.telemetry.lane_phases import lane_phases
from miles_tui.core.telemetry.phase_bands import PhaseTime, phase_bands

FLEET_LANES: Final = 64
"""Above this many lanes the fleet summary replaces the full lane list."""

DEAD_MIN_SECONDS: Final = 60.0
"""A lane is never called dead or stale before this long without a sample..."""

DEAD_INTERVALS: Final = 3.0
"""...nor before this many sampling intervals."""


# -- lanes ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LaneGrid:
    """Lanes × bins of one window."""

    bins: TimeBins
    """The bins."""
    lanes: tuple[Lane, ...]
    """Rows, in display order (node, then gpu)."""
    util: FloatArray
    """(lanes, bins): mean utilisation, NaN where the bin holds no sample."""
    mem_mb: FloatArray
    """(lanes, bins): mean memory used, NaN where none."""
    samples: IntArray
    """(lanes, bins): samples per bin."""
    mean_util: FloatArray
    """Per lane: mean utilisation over every sample of the window (NaN: none)."""
    power_w: FloatArray | None = None
    """(lanes, bins): mean power draw, NaN where none (None: the samples carried no power column)."""

    def latest(self, values: FloatArray) -> FloatArray:
        """Per lane: the value of its last bin with data (NaN: none)."""
        present = ~np.isnan(values)
        last = values.shape[1] - 1 - np.argmax(present[:, ::-1], axis=1)
        picked = values[np.arange(values.shape[0]), last] if values.shape[1] else np.full(values.shape[0], np.nan)
        return np.where(present.any(axis=1), picked, np.nan)

    def peak(self, values: FloatArray) -> FloatArray:
        """Per lane: the largest value of its bins (NaN: none)."""
        present = ~np.isnan(values)
        top = np.where(present, values, -np.inf).max(axis=1, initial=-np.inf)
        return np.where(present.any(axis=1), top, np.nan)


@lru_cache(maxsize=8)
def display_order(lanes: tuple[Lane, ...]) -> tuple[int, ...]:
    """Positions of ``lanes`` in display order (node, then gpu; both natural)."""
    return tuple(sorted(range(len(lanes)), key=lambda i: lane_key(lanes[i])))


def bin_lanes(samples: GpuSamples, bins: TimeBins) -> LaneGrid:
    """Mean utilisation and memory per lane and bin; every known lane gets a row, with or without data.

    Each row counts for its weight (:attr:`GpuSamples.weight`; a sample: one, or none where its value is
    not a number): a bin of bucket summaries holds the mean of their samples (exact when the bins are whole
    buckets), a bin of samples their mean.
    """
    order = display_order(samples.lanes)
    row_of = np.empty(len(order), dtype=np.int64)
    row_of[list(order)] = np.arange(len(order))
    where = bins.index(samples.ts)
    inside = where >= 0
    rows = row_of[samples.lane[inside]]
    flat = rows * bins.count + where[inside]
    size = len(order) * bins.count
    shape = (len(order), bins.count)
    util, mem = samples.util[inside], samples.mem_mb[inside]
    if samples.weight is None:
        util_n, mem_n = (~np.isnan(util)).astype(np.float64), (~np.isnan(mem)).astype(np.float64)
        per_bin = np.bincount(flat, minlength=size)
    else:
        util_n, mem_n, count = (w[inside] for w in samples.weight)
        per_bin = np.bincount(flat, weights=count, minlength=size)
    return LaneGrid(
        bins=bins,
        lanes=tuple(samples.lanes[i] for i in order),
        util=_weighted(flat, util, util_n, size).reshape(shape),
        mem_mb=_weighted(flat, mem, mem_n, size).reshape(shape),
        samples=per_bin.reshape(shape).astype(np.int64),
        mean_util=_weighted(rows, util, util_n, len(order)),
        power_w=_binned_power(samples, inside, flat, size, shape),
    )


def _binned_power(
    samples: GpuSamples, inside: npt.NDArray[np.bool_], flat: IntArray, size: int, shape: tuple[int, int]
) -> FloatArray | None:
    """Mean power per lane and bin (as utilisation is binned), None when the samples have no power column."""
    if samples.power_w is None:
        return None
    power = samples.power_w[inside]
    weight = (~np.isnan(power)).astype(np.float64) if samples.power_n is None else samples.power_n[inside]
    return _weighted(flat, power, weight, size).reshape(shape)


def _weighted(flat: IntArray, means: FloatArray, counts: FloatArray, size: int) -> FloatArray:
    """Mean per ``flat`` index of rows that are each the mean of ``counts`` values (rows counting none, NaN
    values among them, are left out)."""
    ok = counts > 0
    totals = np.bincount(flat[ok], weights=means[ok] * counts[ok], minlength=size)
    n = np.bincount(flat[ok], weights=counts[ok], minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, totals / n, np.nan)


def sampling_interval(samples: GpuSamples, recent: float = 600.0) -> float | None:
    """Median gap between consecutive samples of a lane, over the last ``recent`` seconds of data."""
    if not len(samples.ts):
        return None
    newest = float(samples.ts.max())  # these samples' newest: a window in the past has no recent ones
    keep = samples.ts >= newest - recent
    lane, ts = samples.lane[keep], samples.ts[keep]
    order = np.lexsort((ts, lane))
    lane, ts = lane[order], ts[order]
    gaps = np.diff(ts)[(np.diff(lane) == 0)]
    gaps = gaps[gaps > 0]
    return float(np.median(gaps)) if len(gaps) else None


def dead_after(interval: float | None) -> float:
    """Seconds without a sample after which a lane is called dead (or the fleet quiet)."""
    return max(DEAD_MIN_SECONDS, DEAD_INTERVALS * interval) if interval else DEAD_MIN_SECONDS


class Liveness(enum.Enum):
    """Whether a lane is still being sampled."""

    LIVE = "live"
    """Sampled recently."""
    STALE = "stale"
    """Nothing recent, but neither from any other lane: the sampler or the run is quiet."""
    DEAD = "dead"
    """Other lanes are still sampled and this one is not: its node (or GPU) is gone."""
    NEVER = "never"
    """No sample known any more (its file was rewritten): treated like dead."""


@dataclass(frozen=True)
class LaneHealth:
    """How current one lane's data is."""

    lane: Lane
    """(node, gpu)."""
    last_seen: float | None
    """Time of its newest sample."""
    age: float | None
    """``now - last_seen``."""
    lag: float | None
    """How far behind the fleet's newest sample it is."""
    liveness: Liveness
    """Live, stale (all quiet) or dead (only this one quiet)."""


def lane_health(
    samples: GpuSamples, lanes: Sequence[Lane], now: float, interval: float | None
) -> tuple[LaneHealth, ...]:
    """Health of each of ``lanes`` at ``now``, in their order."""
    ids = {lane: i for i, lane in enumerate(samples.lanes)}
    newest = samples.newest
    limit = dead_after(interval)
    out = []
    for lane in lanes:
        seen = samples.last_seen[ids[lane]] if lane in ids else math.nan
        if math.isnan(seen) or newest is None:
            out.append(LaneHealth(lane, None, None, None, Liveness.NEVER))
            continue
        age, lag = now - float(seen), newest - float(seen)
        state = Liveness.DEAD if lag > limit else Liveness.STALE if age > limit else Liveness.LIVE
        out.append(LaneHealth(lane, float(seen), age, lag, state))
    return tuple(out)


# -- fleet ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FleetSummary:
    """Utilisation across lanes, per bin."""

    bins: TimeBins
    """The bins."""
    median: FloatArray
    """Median across the lanes with data in the bin (NaN: none)."""
    p10: FloatArray
    """10th percentile."""
    p90: FloatArray
    """90th percentile."""
    reporting: IntArray
    """Lanes with at least one sample in the bin."""
    silent: IntArray
    """Lanes that went quiet: no sample in the bin although they reported earlier (in the window, or before it
    when they sent nothing in it). Lanes not started yet are not silent, and neither is anyone in a bin that
    starts after the fleet's newest sample (not written yet is not quiet)."""
    silent_now: int
    """``silent`` in the last bin that has started by the newest sample."""
    lanes: int
    """Lanes known."""


def fleet_summary(grid: LaneGrid, newest: float | None = None) -> FleetSummary:
    """Median and p10/p90 of the lanes' binned utilisation, bin by bin, and who went silent (``newest``:
    the fleet's newest sample)."""
    has = grid.samples > 0
    reporting = has.sum(axis=0).astype(np.int64)
    started = np.logical_or.accumulate(has, axis=1) if has.size else has
    started[~has.any(axis=1)] = True  # known, but nothing in the window: quiet since before it
    silent = (started & ~has).sum(axis=0).astype(np.int64)
    reported = grid.bins.edges()[:-1] <= newest if newest is not None else np.ones(grid.bins.count, dtype=bool)
    silent[~reported] = 0
    silent_now = int(silent[reported][-1]) if reported.any() else 0
    util = grid.util
    if util.shape[0] == 0:
        blank = np.full(grid.bins.count, np.nan)
        return FleetSummary(grid.bins, blank, blank, blank, reporting, silent, silent_now, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN bin is a gap, as it should be
        p10, median, p90 = np.nanpercentile(util, [10, 50, 90], axis=0)
    return FleetSummary(grid.bins, median, p10, p90, reporting, silent, silent_now, len(grid.lanes))


# -- lane selection ------------------------------------------------------------------------------------------


def nodes_of(lanes: Iterable[Lane]) -> tuple[str, ...]:
    """Distinct nodes, natural order."""
    return tuple(sorted({lane[0] for lane in lanes}, key=natural_key))


def lanes_of_node(lanes: Sequence[Lane], node: str) -> tuple[int, ...]:
    """Positions of the lanes on ``node``."""
    return tuple(i for i, lane in enumerate(lanes) if lane[0] == node)


def worst_lanes(grid: LaneGrid, health: Sequence[LaneHealth], count: int) -> tuple[int, ...]:
    """Positions of the ``count`` worst lanes: dead ones first, then by lowest mean utilisation (none = worst)."""

    def badness(i: int) -> tuple[int, float, int]:
        dead = health[i].liveness in (Liveness.DEAD, Liveness.NEVER)
        mean = float(grid.mean_util[i])
        return (0 if dead else 1, -1.0 if math.isnan(mean) else mean, i)  # ties: display order

    return tuple(sorted(range(len(grid.lanes)), key=badness)[: max(count, 0)])


SelectionMode: TypeAlias = Literal["all", "node", "worst"]


@dataclass(frozen=True)
class LaneSelection:
    """Which lanes to list."""

    mode: SelectionMode = "all"
    """All lanes, the lanes of one node, or the worst few."""
    node: str | None = None
    """The node, in ``node`` mode."""
    count: int = 16
    """How many, in ``worst`` mode."""


def select_lanes(grid: LaneGrid, health: Sequence[LaneHealth], selection: LaneSelection) -> tuple[int, ...]:
    """Positions (into ``grid.lanes``) of the lanes the selection lists, in the order to list them."""
    if selection.mode == "node" and selection.node is not None:
        return lanes_of_node(grid.lanes, selection.node)
    if selection.mode == "worst":
        return worst_lanes(grid, health, selection.count)
    return tuple(range(len(grid.lanes)))


# -- the whole view ------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ComputeView:
    """Everything the compute screen draws for one window."""

    now: float
    """The ``now`` it was computed at."""
    frame: Frame
    """The window: asked for (live or panned, its length) and resolved (its times, the run's range)."""
    grid: LaneGrid
    """Lanes × bins."""
    health: tuple[LaneHealth, ...]
    """Per lane of ``grid.lanes``."""
    interval: float | None
    """Sampling interval (median gap)."""
    fleet: FleetSummary
    """Across lanes, per bin."""
    bands: tuple[PhaseBand, ...]
    """Phases per bin."""
    lane_phases: LanePhases
    """Per lane of ``grid.lanes``: its own phase per bin, and the share of the window each phase took."""
    resolution: float | None = None
    """Drawn from bucket summaries of this many seconds (None: from the samples themselves)."""

    @property
    def span(self) -> float | None:
        """Window length asked for (None: the whole run)."""
        return self.frame.window.span

    @property
    def anchored_to_data(self) -> bool:
        """Whether the live window ends at the newest sample (the data stopped) rather than at ``now``."""
        return self.frame.anchored_to_data

    @property
    def dead(self) -> tuple[Lane, ...]:
        """Lanes that stopped while others go on."""
        return tuple(h.lane for h in self.health if h.liveness is Liveness.DEAD)

    def dead_nodes(self) -> Mapping[str, int]:
        """Node -> dead lanes on it."""
        out: dict[str, int] = {}
        for lane in self.dead:
            out[lane[0]] = out.get(lane[0], 0) + 1
        return out


def compute_view(
    samples: GpuSamples,
    spans: PhaseSpans,
    bins: TimeBins,
    *,
    now: float,
    frame: Frame | None = None,
    interval: float | None = None,
    time: PhaseTime | None = None,
) -> ComputeView:
    """Bin the lanes and phases of a window and summarize the fleet (no ``frame``: a live window over ``bins``)."""
    interval = interval if interval is not None else sampling_interval(samples)
    grid = bin_lanes(samples, bins)
    if time is None:  # per rank, band and bin: the bands and the lanes both sum it (given: from hourly covers)
        time = phase_time(spans, bins, now)
    if frame is None:
        frame = Frame(TimeWindow(bins.until - bins.since), bins.since, bins.until, False, bins.since,
                      samples.newest, bins.until, now)  # fmt: skip
    return ComputeView(
        now=now,
        frame=frame,
        grid=grid,
        health=lane_health(samples, grid.lanes, now, interval),
        interval=interval,
        fleet=fleet_summary(grid, samples.newest),
        bands=phase_bands(spans, bins, now, time),
        lane_phases=lane_phases(spans, grid.lanes, bins, now, time),
        resolution=samples.cell,
    )
