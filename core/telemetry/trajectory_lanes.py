"""Each sample's lifecycle lane from the ``trajectories/`` events, by miles' rules (``store.trajectory_lanes``).

miles' rollout writes six event kinds per attempt of a sample: ``attempt_start`` (the sample waits for the
rollout's semaphore: queued), ``gen_start``/``gen_end`` (a generation turn, ``turn`` 1-based; -1 for the coarse
attempt-level span of a single-turn sample, which has no ``gen_end``), ``tool_start``/``tool_end`` (agent-side
work between two chat calls) and ``attempt_end`` (generation over, ``detail`` the sample's status; the reward is
computed after it). The rules, as miles applies them:

- start and end events pair by (kind, turn); an end with no start is a segment with no start, a start with no
  end one with no end (still running, or its end outside the events read);
- an attempt ending closes every span it left open, at its time, and lends its weight version to a span that
  had none;
- when a sample has per-turn generation spans (turn > 0), its coarse attempt-level span (turn < 0) is dropped.

Every event is checked before it is used (the stream is a file anyone could write): a kind miles does not
write, a sample index that is not a 64-bit int, a time that is not finite, is skipped and counted; a turn must
be a small int, a weight version and a status a short string (longer ones are cut). A sample keeps at most
:data:`MAX_EVENTS_PER_SAMPLE` events (the rest are counted, never held), so the work is O(events log events)
and the memory O(events) whatever the file holds. :func:`lane_cells` paints a lane onto ``width`` columns of a
time axis with bytes (one per column), each segment a slice: O(segments + width) per lane.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Final

from miles_tui.core.telemetry.stream_records import TrajectoryEvent

KINDS: Final = ("attempt_start", "gen_start", "gen_end", "tool_start", "tool_end", "attempt_end")
"""The event kinds miles writes (``TrajectoryEventKind``)."""
GEN: Final = "gen"
TOOL: Final = "tool"
_SPANS: Final = {
    "gen_start": (GEN, True),
    "gen_end": (GEN, False),
    "tool_start": (TOOL, True),
    "tool_end": (TOOL, False),
}

MAX_EVENTS_PER_SAMPLE: Final = 4096
"""Events one sample's lane is built from; more are counted in ``dropped`` and never held."""
MAX_SHORT_TEXT: Final = 40
"""A weight version or a status is cut to this many characters."""
MAX_TURN: Final = 1 << 20
"""A turn is an int of magnitude under this; anything else reads as -1 (no turn)."""
_INT64: Final = 1 << 63
_VERSION: Final = re.compile(r"[0-9]{1,18}")

# The state of a column of a lane, lowest first: a later state paints over an earlier one (miles paints the
# attempt underlay first so generation and tool spans win the shared buckets).
EMPTY: Final = 0
"""Nothing recorded: before the first event or after the consuming step."""
WAITING: Final = 1
"""After the last attempt ended and before the train step consumed the sample: reward, then the buffer."""
QUEUE_STATE: Final = 2
"""Inside an attempt but neither generating nor in a tool: waiting for the rollout's semaphore (or an engine)."""
TOOL_STATE: Final = 3
"""A tool call or other agent-side work between two chat calls."""
STALE_GENERATING: Final = 4
"""A generation turn on an engine whose weights were older than the newest version asked about."""
GENERATING: Final = 5
"""A generation turn on an engine."""


@dataclass(frozen=True)
class Segment:
    """One generation turn or tool call of a sample."""

    kind: str
    """:data:`GEN` or :data:`TOOL`."""
    t0: float | None
    """Its start (None: its start event was not read)."""
    t1: float | None
    """Its end (None: still running, or its end event not read)."""
    turn: int
    """The turn, 1-based; -1 for the coarse attempt-level span."""
    weight_version: str
    """The engine's weight version ("" when not recorded)."""


@dataclass(frozen=True)
class Attempt:
    """One attempt at a sample: from the wait for the semaphore to the end of generation."""

    t0: float | None
    """Its start (None: not read)."""
    t1: float | None
    """Its end (None: still running)."""


@dataclass(frozen=True)
class SampleLane:
    """One sample's lifecycle."""

    sample_index: int
    """The run-global sample index (the dump's ``sample_index``)."""
    group_index: int | None
    """Its group (None when the events carry none)."""
    first_ts: float
    """Its first event."""
    last_ts: float
    """Its last event."""
    segments: tuple[Segment, ...]
    """Generation and tool spans, by start."""
    attempts: tuple[Attempt, ...]
    """Its attempts, in order (more than one: it was retried)."""
    status: str
    """The last ended attempt's status ("" before any ended)."""
    versions: tuple[int, ...]
    """The numeric weight versions its events carry, ascending."""
    dropped: int = 0
    """Events of this sample beyond :data:`MAX_EVENTS_PER_SAMPLE`, not read."""

    @property
    def finished(self) -> float | None:
        """When its last attempt ended (None while one runs or none ended)."""
        if not self.attempts or self.attempts[-1].t1 is None:
            return None
        return self.attempts[-1].t1

    def segment_at(self, ts: float) -> Segment | None:
        """The segment running at ``ts`` (a generation turn before a tool call that shares the instant)."""
        found = [s for s in self.segments if _within(ts, s.t0, s.t1, self.first_ts, self.last_ts)]
        return min(found, key=lambda s: s.kind != GEN) if found else None


@dataclass(frozen=True)
class SampleLanes:
    """The lanes of some samples and what was skipped building them."""

    lanes: tuple[SampleLane, ...]
    """By first event."""
    skipped: int
    """Events that were not miles' (an unknown kind, a sample index or time that is not one)."""


def _within(ts: float, t0: float | None, t1: float | None, low: float, high: float) -> bool:
    return (low if t0 is None else t0) <= ts <= (high if t1 is None else t1)


def short_text(value: Any) -> str:
    """A version or status as a short string ("" for null); numbers become their decimal digits."""
    if value is None:
        return ""
    if type(value) is int and -_INT64 < value < _INT64:
        return str(value)
    if type(value) is not str:
        return ""
    return value[:MAX_SHORT_TEXT]


def _turn(value: Any) -> int:
    return value if type(value) is int and -MAX_TURN < value < MAX_TURN else -1


def _group(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value < _INT64 else None


def _usable(event: Any) -> bool:
    """Whether an event is one of miles' (a known kind, a 64-bit sample index, a finite time)."""
    if not isinstance(event, TrajectoryEvent) or event.kind not in KINDS:
        return False
    index, ts = event.sample_index, event.ts
    return type(index) is int and -_INT64 < index < _INT64 and type(ts) in (int, float) and math.isfinite(ts)


def _versions(events: Iterable[TrajectoryEvent]) -> tuple[int, ...]:
    found = {short_text(e.weight_version) for e in events}
    return tuple(sorted(int(v) for v in found if _VERSION.fullmatch(v)))


def build_lane(index: int, events: list[TrajectoryEvent], dropped: int = 0) -> SampleLane:
    """One sample's lane from its (usable, non-empty) events, by miles' rules (see the module)."""
    events = sorted(events, key=lambda e: e.ts)
    segments: list[dict[str, Any]] = []
    open_spans: dict[tuple[str, int], dict[str, Any]] = {}
    attempts: list[Attempt] = []
    attempt_t0: float | None = None
    status = ""
    for event in events:
        version = short_text(event.weight_version)
        if event.kind == "attempt_start":
            attempt_t0 = event.ts
        elif event.kind == "attempt_end":
            attempts.append(Attempt(attempt_t0, event.ts))
            attempt_t0 = None
            status = short_text(event.detail) or status
            for segment in open_spans.values():  # an attempt ending closes what it left open
                segment["t1"] = event.ts
                segment["weight_version"] = segment["weight_version"] or version
            open_spans.clear()
        else:
            base, is_start = _SPANS[event.kind]
            turn = _turn(event.turn)
            if is_start:
                segment = {"kind": base, "t0": event.ts, "t1": None, "turn": turn, "weight_version": version}
                open_spans[(base, turn)] = segment
                segments.append(segment)
                continue
            opened = open_spans.pop((base, turn), None)
            if opened is None:
                segments.append({"kind": base, "t0": None, "t1": event.ts, "turn": turn, "weight_version": version})
            else:
                opened["t1"] = event.ts
                opened["weight_version"] = version or opened["weight_version"]
    if attempt_t0 is not None:
        attempts.append(Attempt(attempt_t0, None))
    if any(s["turn"] > 0 for s in segments if s["kind"] == GEN):
        segments = [s for s in segments if not (s["kind"] == GEN and s["turn"] < 0)]
    return SampleLane(
        sample_index=index,
        group_index=_group(events[0].group_index),
        first_ts=events[0].ts,
        last_ts=events[-1].ts,
        segments=tuple(Segment(**s) for s in segments),
        attempts=tuple(attempts),
        status=status,
        versions=_versions(events),
        dropped=dropped,
    )


def trajectory_lanes(
    events: Iterable[Any],
    sample_indices: Collection[int] | None = None,
    since: float | None = None,
    until: float | None = None,
) -> SampleLanes:
    """The lanes of the samples in ``sample_indices`` (all when None) from the events in [since, until]."""
    grouped: dict[int, list[TrajectoryEvent]] = {}
    dropped: dict[int, int] = {}
    skipped = 0
    for event in events:
        if not _usable(event):
            skipped += 1
            continue
        if (since is not None and event.ts < since) or (until is not None and event.ts > until):
            continue
        index = event.sample_index
        if sample_indices is not None and index not in sample_indices:
            continue
        held = grouped.setdefault(index, [])
        if len(held) < MAX_EVENTS_PER_SAMPLE:
            held.append(event)
        else:
            dropped[index] = dropped.get(index, 0) + 1
    lanes = [build_lane(index, held, dropped.get(index, 0)) for index, held in grouped.items()]
    lanes.sort(key=lambda lane: (lane.first_ts, lane.sample_index))
    return SampleLanes(tuple(lanes), skipped)


def _column(ts: float, start: float, step: float, width: int) -> int:
    return min(width - 1, max(0, int((ts - start) / step)))


def segment_version(segment: Segment, lane: SampleLane) -> int | None:
    """A span's numeric weight version; the lane's first when the span has none (miles' fallback: older dumps
    stamp versions on some spans only); None when neither is a number."""
    if _VERSION.fullmatch(segment.weight_version):
        return int(segment.weight_version)
    return lane.versions[0] if lane.versions else None


def lane_cells(
    lane: SampleLane,
    start: float,
    end: float,
    width: int,
    consumed: float | None = None,
    newest: int | None = None,
) -> bytes:
    """The lane on ``width`` columns of [start, end]: one state byte per column (:data:`GENERATING` ...).

    A span covers the columns its [start, end) overlaps, at least one; a span with no start begins at
    ``start``, one with no end ends at ``end``; a span wholly outside the axis paints nothing. After the last
    attempt ended the sample waits (:data:`WAITING`) until ``consumed`` (or the axis' end when not known).
    A generation span on a version older than ``newest`` is :data:`STALE_GENERATING`."""
    if width <= 0:
        return b""
    cells = bytearray(width)
    start, end = float(start), float(end)  # an int time and a float one compare exactly but subtract as floats
    if not end > start:
        return bytes(cells)
    step = (end - start) / width

    def paint(t0: float | None, t1: float | None, state: int) -> None:
        a, b = (start if t0 is None else t0), (end if t1 is None else t1)
        if b < start or a > end or b < a:
            return
        first = _column(a, start, step, width)
        last = max(first, min(width, math.ceil((b - start) / step)) - 1)
        cells[first : last + 1] = bytes((state,)) * (last - first + 1)

    finished = lane.finished
    if finished is not None and (consumed is None or consumed > finished):
        paint(finished, consumed, WAITING)
    for attempt in lane.attempts:
        paint(attempt.t0, attempt.t1, QUEUE_STATE)
    for segment in lane.segments:
        if segment.kind == TOOL:
            paint(segment.t0, segment.t1, TOOL_STATE)
    for segment in lane.segments:
        if segment.kind == GEN:
            version = segment_version(segment, lane)
            stale = newest is not None and version is not None and version < newest
            paint(segment.t0, segment.t1, STALE_GENERATING if stale else GENERATING)
    return bytes(cells)


@dataclass(frozen=True)
class LaneTotals:
    """Seconds a sample spent in each part of its lifecycle (closed spans only)."""

    queued: float
    """From each attempt's start to its first span (the wait for the semaphore)."""
    generating: float
    """In generation turns."""
    tools: float
    """In tool calls."""
    turns: int
    """Generation spans."""
    tool_calls: int
    """Tool spans."""


def lane_totals(lane: SampleLane) -> LaneTotals:
    """The seconds of each part of ``lane`` (a span missing an end or a start counts for nothing)."""

    def seconds(kind: str) -> float:
        return sum(s.t1 - s.t0 for s in lane.segments if s.kind == kind and s.t0 is not None and s.t1 is not None)

    starts = sorted(s.t0 for s in lane.segments if s.t0 is not None)
    queued = 0.0
    for attempt in lane.attempts:
        if attempt.t0 is None:
            continue
        at = bisect_left(starts, attempt.t0)
        first = starts[at] if at < len(starts) else None
        end = first if first is not None and (attempt.t1 is None or first <= attempt.t1) else attempt.t1
        if end is not None:
            queued += max(end - attempt.t0, 0.0)
    return LaneTotals(
        queued=queued,
        generating=seconds(GEN),
        tools=seconds(TOOL),
        turns=sum(1 for s in lane.segments if s.kind == GEN),
        tool_calls=sum(1 for s in lane.segments if s.kind == TOOL),
    )
