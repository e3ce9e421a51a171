"""Open phase markers: which phases of a run's current attempt were opened and not (yet) closed.

Contract: a phase record with ``t1 == -1`` opens a phase (its marker); a record with the same name,
node, rank and ``t0`` and a real ``t1`` closes it. Pure functions over phase rows, a reader's
columns or per-partition digests; the stall rule (:mod:`.stream_advisories`) and the run's end
(:mod:`.run_state`) both count markers this one way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from miles_tui.core.telemetry import OPEN_T1, TableArrays
from miles_tui.core.telemetry.hours.phase_digest import PhaseDigest, key_part, open_markers

PHASE_FIELDS: Final = ("name", "t0", "t1", "node", "rank", "role")
"""A phase row's fields, in the order the rules read them."""


def open_and_closed(
    rows: Sequence[tuple[Any, ...]],
) -> tuple[dict[str, list[float]], dict[tuple[Any, ...], tuple[Any, ...]]]:
    """(closed durations by phase name, open markers without a closing record) of (name, t0, t1, node,
    rank, role) rows."""
    closed_keys = {(r[0], r[3], r[4], r[1]) for r in rows if r[2] != OPEN_T1}
    durations: dict[str, list[float]] = {}
    open_markers: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in rows:
        if r[2] != OPEN_T1:
            durations.setdefault(r[0], []).append(max(r[2] - r[1], 0.0))
        elif (marker := (r[0], r[3], r[4], r[1])) not in closed_keys:
            open_markers[marker] = r
    return durations, open_markers


def open_phase_count(phases: TableArrays | Sequence[PhaseDigest], attempt_start: float | None) -> int:
    """Phases of the current attempt (started at or after ``attempt_start``) opened and not closed."""
    if isinstance(phases, TableArrays):
        columns = tuple(phases.column(name) for name in PHASE_FIELDS)
        rows = zip(*columns, strict=True)
        current = [r for r in rows if attempt_start is None or r[1] >= attempt_start]
        current = [(r[0], r[1], r[2], key_part(r[3]), key_part(r[4]), r[5]) for r in current]
        return len(open_and_closed(current)[1])
    return len(open_markers(phases, attempt_start))
