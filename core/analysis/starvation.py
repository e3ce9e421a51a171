"""Is training starved or slow: MFU, the bubble per step and the data-buffer depth, as miles' dashboard has them.

Contract:

- :func:`step_bubbles` is miles' bubble strip (its ``MetricStore.bubbles``): one point per
  ``rollout/step`` record of ``metrics.jsonl`` that logs ``perf/step_time`` or ``perf/wait_time_ratio``,
  with its step, time, step time and wait ratio, the fraction of the step training waited for rollout
  data. The ratio is ``perf/wait_time_ratio`` as logged (miles: ``train_wait_time / (train_wait_time +
  train_time)``); a record that lacks it gets that formula from ``perf/train_wait_time`` and
  ``perf/train_time``, else ``1 - train_time / step_time`` (miles logs ``perf/step_time`` as that same
  sum). :attr:`StepBubbles.derived` marks the computed points; a record with neither stays NaN, never 0.
- :func:`buffer_depth` is the ``data_buffer.jsonl`` stream (one ``{ts, length}`` a rollout, the groups
  waiting in ``RolloutDataSourceWithBuffer``; miles' dashboard shows only the latest): every record with
  a number ts and a non-negative whole length, in file order; the others are counted in ``skipped``.
- :func:`starvation` joins both with the run's MFU (:func:`~.stream_advisories.run_mfu`, the same
  summary the ``low_mfu`` advisory reads: latest and mean without the warm-up step, against the peak
  TFLOP/s miles logs) and its MFU per step.
- ``since``/``until`` keep the points whose time is in that window; :func:`binned_starvation` puts the
  wait per step and the buffer depth on a window's time bins (the largest of each bin), reading only
  what is already in memory. Pure: values in, frozen values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.analysis.stream_advisories import MFU_KEY, MFU_PEAK_KEY, MfuSummary, run_mfu
from miles_tui.core.telemetry import MetricStore, StreamRecord, TimeBins
from miles_tui.core.telemetry.stream_records import Snapshot

FloatArray = npt.NDArray[np.float64]

STEP_KEY: Final = "rollout/step"
"""The step key miles logs its perf figures against."""
WAIT_RATIO_KEY: Final = "perf/wait_time_ratio"
STEP_TIME_KEY: Final = "perf/step_time"
TRAIN_TIME_KEY: Final = "perf/train_time"
TRAIN_WAIT_KEY: Final = "perf/train_wait_time"
KEYS: Final = frozenset({WAIT_RATIO_KEY, STEP_TIME_KEY, TRAIN_TIME_KEY, TRAIN_WAIT_KEY, MFU_KEY, MFU_PEAK_KEY})
"""The metrics this module reads: a poll that brings none of them changes nothing here."""


@dataclass(frozen=True, eq=False)
class StepBubbles:
    """Per ``rollout/step`` record with a step time or a wait ratio, in file order."""

    step: FloatArray
    ts: FloatArray
    step_time: FloatArray
    """Seconds (NaN: not logged)."""
    wait_ratio: FloatArray
    """Fraction of the step training waited for data (NaN: neither logged nor derivable)."""
    derived: npt.NDArray[np.bool_]
    """True where the ratio was computed from the logged times, not logged itself."""


@dataclass(frozen=True, eq=False)
class BufferDepth:
    """``data_buffer.jsonl``: groups waiting in the rollout data buffer over time."""

    ts: FloatArray
    length: FloatArray
    skipped: int = 0
    """Records without a number ts or a non-negative whole length."""


@dataclass(frozen=True, eq=False)
class Starvation:
    """What the monitor shows of starvation: the three figures of miles' dashboard."""

    mfu: MfuSummary | None
    """The run's MFU summary (None: ``perf/actor_train_mfu`` not logged)."""
    mfu_steps: FloatArray
    """MFU per rollout step as a fraction, in log order (the warm-up step included)."""
    bubbles: StepBubbles
    buffer: BufferDepth | None
    """None: the run wrote no ``data_buffer.jsonl`` record."""


def _column(store: MetricStore, key: str, records: npt.NDArray[np.int64]) -> FloatArray:
    """``key``'s value at each of ``records`` (NaN where that record does not log it)."""
    out = np.full(len(records), np.nan)
    series = store.series(key, STEP_KEY)
    if series is not None and len(records):
        where = np.searchsorted(records, series.record)
        hit = (where < len(records)) & (records[np.minimum(where, len(records) - 1)] == series.record)
        out[where[hit]] = series.value[hit]
    return out


def step_bubbles(store: MetricStore, since: float | None = None, until: float | None = None) -> StepBubbles:
    """See the module docstring."""
    found = [s for key in (STEP_TIME_KEY, WAIT_RATIO_KEY) if (s := store.series(key, STEP_KEY)) is not None]
    every = np.concatenate([s.record for s in found] or [np.zeros(0, np.int64)])
    records, first = np.unique(every, return_index=True)
    step = np.concatenate([s.step for s in found] or [np.zeros(0)])[first]
    ts = np.concatenate([s.ts for s in found] or [np.zeros(0)])[first]
    inside = np.ones(len(records), bool)
    if since is not None:
        inside &= ts >= since
    if until is not None:
        inside &= ts <= until
    records, step, ts = records[inside], step[inside], ts[inside]
    logged = _column(store, WAIT_RATIO_KEY, records)
    step_time = _column(store, STEP_TIME_KEY, records)
    train = _column(store, TRAIN_TIME_KEY, records)
    wait = _column(store, TRAIN_WAIT_KEY, records)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        from_wait = np.where(wait + train > 0, wait / (wait + train), np.nan)
        from_step = np.where(step_time > 0, 1.0 - train / step_time, np.nan)
    derived_value = np.where(np.isfinite(from_wait), from_wait, from_step)
    ratio = np.where(np.isfinite(logged), logged, derived_value)
    ratio = np.where((ratio >= 0) & (ratio <= 1), ratio, np.nan)  # a clock that went backwards is no ratio
    derived = ~np.isfinite(logged) & np.isfinite(ratio)
    return StepBubbles(step, ts, step_time, ratio, derived)


def buffer_depth(
    records: Iterable[StreamRecord], since: float | None = None, until: float | None = None
) -> BufferDepth | None:
    """See the module docstring (None: no record at all)."""
    ts: list[float] = []
    length: list[float] = []
    skipped = seen = 0
    for record in records:
        if not isinstance(record, Snapshot):
            continue
        seen += 1
        value = record.data.get("length")
        if record.ts is None or not math.isfinite(record.ts) or type(value) is not int or value < 0:
            skipped += 1
            continue
        if (since is None or record.ts >= since) and (until is None or record.ts <= until):
            ts.append(float(record.ts))
            length.append(float(value))
    if not seen:
        return None
    return BufferDepth(np.array(ts, np.float64), np.array(length, np.float64), skipped)


def mfu_steps(store: MetricStore) -> FloatArray:
    """``perf/actor_train_mfu`` per step as fractions (a series logged in percent is divided by 100)."""
    series = store.series(MFU_KEY)
    if series is None:
        return np.zeros(0)
    finite = series.value[np.isfinite(series.value)]
    scale = 100.0 if len(finite) and float(finite.max()) > 1.0 else 1.0
    return series.value / scale


def starvation(store: MetricStore, buffer_records: Iterable[StreamRecord], args: Mapping[str, Any]) -> Starvation:
    """The whole run's starvation figures (see the module docstring)."""
    return Starvation(run_mfu(store, args), mfu_steps(store), step_bubbles(store), buffer_depth(buffer_records))


@dataclass(frozen=True, eq=False)
class BinnedStarvation:
    """The wait per step and the buffer depth over one time window's bins (the GPU view's rows)."""

    wait: FloatArray
    """Per bin: the largest wait ratio among the steps logged in it (NaN: no step ended there)."""
    steps: int
    """Steps with a wait ratio in the window."""
    buffer: FloatArray | None
    """Per bin: the deepest buffer report in it (NaN: none); None: the run writes no data_buffer.jsonl."""


def binned_starvation(figures: Starvation, bins: TimeBins) -> BinnedStarvation:
    """Each step's wait ratio at its record's time and each buffer report at its ts, over ``bins``."""
    bubbles = figures.bubbles
    where = bins.index(bubbles.ts)
    hit = (where >= 0) & np.isfinite(bubbles.wait_ratio)
    wait = np.full(bins.count, np.nan)
    np.fmax.at(wait, where[hit], bubbles.wait_ratio[hit])
    buffer = None
    if figures.buffer is not None:
        buffer = np.full(bins.count, np.nan)
        at = bins.index(figures.buffer.ts)
        np.fmax.at(buffer, at[at >= 0], figures.buffer.length[at >= 0])
    return BinnedStarvation(wait, int(hit.sum()), buffer)
