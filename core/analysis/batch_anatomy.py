"""A step's batch anatomy: each of its samples' lifecycle lanes on one time axis, ending where the train step
consumed them (miles' ``/api/rollout/{id}/trajectories`` and ``anatomy.js``).

The consume anchor is miles' too: the time of the ``rollout/step`` metrics record of the step that carries
``perf/step_time`` (the last one, when a resumed run logged it twice); without one, the newest event read.
Events are read from :data:`LOOKBACK_SECONDS` before the anchor (miles scans one viewport, 4 h). The axis
runs from the earliest event of the step's samples to the anchor. A sample with no event is listed with no
lane ("no trajectory recorded"); the dump's rows add what the events do not carry (the reward; the turns
and tool calls of a sample without a lane). Sorting is by a named key (:data:`SORTS`), ties by submit order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from miles_tui.core.dump import SampleRow
from miles_tui.core.telemetry import MetricStore
from miles_tui.core.telemetry.trajectory_lanes import SampleLane, SampleLanes, lane_totals, trajectory_lanes

LOOKBACK_SECONDS: Final = 4 * 3600.0
"""How far before the consume anchor a step's events are read (miles' ``MAX_WINDOW_S``)."""
CONSUME_KEY: Final = "perf/step_time"
"""The metric whose ``rollout/step`` record marks the step consumed (miles' bubble strip)."""
SORTS: Final = ("submit", "wall span", "reward", "turns", "staleness", "sample")
"""The orders the anatomy can be sorted by (miles' sort chips, and the sample index)."""


@dataclass(frozen=True)
class AnatomyRow:
    """One sample of the step."""

    sample_index: int
    """The sample."""
    lane: SampleLane | None
    """Its lifecycle (None: no trajectory recorded for it)."""
    row: SampleRow | None
    """Its dump row (None: not in the step's rows)."""

    @property
    def turns(self) -> int | None:
        """Generation turns: the lane's generation spans (what its lane draws), else the dump's count."""
        if self.lane is not None:
            return lane_totals(self.lane).turns
        return None if self.row is None else self.row.turns

    @property
    def tool_calls(self) -> int | None:
        """Tool calls: the lane's tool spans (what its lane draws), else the dump's count (the prompt's tool
        messages, which an agent's calls between chat turns need not match)."""
        if self.lane is not None:
            return lane_totals(self.lane).tool_calls
        return None if self.row is None else self.row.tool_calls

    @property
    def reward(self) -> float | None:
        """The raw reward as dumped (the reward when no raw one was)."""
        if self.row is None:
            return None
        return self.row.raw_reward if self.row.raw_reward is not None else self.row.reward


@dataclass(frozen=True)
class BatchAnatomy:
    """One step's samples on one time axis."""

    rollout_id: int
    """The step."""
    rows: tuple[AnatomyRow, ...]
    """Every sample of the step, by submit order (samples with no lane last, by index)."""
    start: float | None
    """The axis' start: the earliest event (None: no sample has a lane)."""
    end: float | None
    """The axis' end: the consume anchor, else the newest event."""
    consumed: float | None
    """When the train step consumed the batch (None: no ``perf/step_time`` record for the step)."""
    skipped: int
    """Events read that were not miles' (see :func:`~miles_tui.core.telemetry.trajectory_lanes.trajectory_lanes`)."""
    dropped: int
    """Events beyond a sample's cap, not read."""

    @property
    def newest_version(self) -> int | None:
        """The newest numeric weight version any sample's events carry (None: none does)."""
        return max((row.lane.versions[-1] for row in self.rows if row.lane and row.lane.versions), default=None)

    @property
    def lanes(self) -> int:
        """Samples with a lane."""
        return sum(1 for row in self.rows if row.lane is not None)


def consume_time(metrics: MetricStore, rollout_id: int) -> float | None:
    """When step ``rollout_id`` was consumed: its last ``rollout/step`` record carrying ``perf/step_time``."""
    series = metrics.series(CONSUME_KEY, "rollout/step")
    if series is None:
        return None
    found = [float(ts) for step, ts in zip(series.step, series.ts, strict=True) if step == rollout_id]
    found = [ts for ts in found if math.isfinite(ts)]
    return found[-1] if found else None


def event_window(consumed: float | None) -> tuple[float | None, float | None]:
    """The [since, until] a step's events are read from (everything when the anchor is not known)."""
    if consumed is None:
        return None, None
    return consumed - LOOKBACK_SECONDS, consumed


def batch_anatomy(
    rollout_id: int,
    events: Iterable[Any],
    rows: Sequence[SampleRow],
    consumed: float | None,
) -> BatchAnatomy:
    """The anatomy of step ``rollout_id`` from the run's trajectory events and the step's rows."""
    by_index: Mapping[int, SampleRow] = {row.sample_index: row for row in rows}
    since, until = event_window(consumed)
    found: SampleLanes = trajectory_lanes(events, by_index.keys(), since, until)
    lanes = {lane.sample_index: lane for lane in found.lanes}
    ordered = [AnatomyRow(lane.sample_index, lane, by_index.get(lane.sample_index)) for lane in found.lanes]
    ordered += [AnatomyRow(index, None, row) for index, row in sorted(by_index.items()) if index not in lanes]
    start = min((lane.first_ts for lane in found.lanes), default=None)
    newest = max((lane.last_ts for lane in found.lanes), default=None)
    end = consumed if consumed is not None and start is not None and consumed > start else newest
    return BatchAnatomy(
        rollout_id=rollout_id,
        rows=tuple(ordered),
        start=start,
        end=end,
        consumed=consumed,
        skipped=found.skipped,
        dropped=sum(lane.dropped for lane in found.lanes),
    )


def sample_lane(events: Iterable[Any], sample_index: int, consumed: float | None) -> SampleLane | None:
    """One sample's lane (the sample screen's), read as its step's anatomy reads it; None: no event."""
    since, until = event_window(consumed)
    found = trajectory_lanes(events, {sample_index}, since, until).lanes
    return found[0] if found else None


def _sort_value(row: AnatomyRow, key: str) -> tuple[int, float]:
    """(missing, value): rows without the value go last; larger spans, turns and staleness first."""
    lane = row.lane
    value: float | None
    if key == "submit":
        value = None if lane is None else lane.first_ts
    elif key == "wall span":
        value = None if lane is None else -(lane.last_ts - lane.first_ts)
    elif key == "reward":
        value = row.reward
    elif key == "turns":
        value = None if row.turns is None else -row.turns
    elif key == "staleness":
        value = None if lane is None or not lane.versions else -(lane.versions[-1] - lane.versions[0])
        if row.row is not None and row.row.staleness is not None:
            value = -row.row.staleness
    else:
        value = row.sample_index
    if value is None or not math.isfinite(value):
        return (1, 0.0)
    return (0, float(value))


def sorted_rows(anatomy: BatchAnatomy, key: str) -> tuple[AnatomyRow, ...]:
    """The anatomy's rows ordered by ``key`` (one of :data:`SORTS`), ties in submit order."""
    if key not in SORTS:
        raise ValueError(f"unknown sort {key!r}; one of {', '.join(SORTS)}")
    position = {row.sample_index: n for n, row in enumerate(anatomy.rows)}
    return tuple(sorted(anatomy.rows, key=lambda row: (_sort_value(row, key), position[row.sample_index])))
