"""The slowest-phase pick: lanes ranked by how long one phase took on them, as miles' web dashboard picks them.

Contract (miles' ``outliers("slowest_phase:<name>")``, the quick pick "slowest update_weights"):

- :func:`slowest_phase` takes the closed spans of one phase name that overlap the window, gives each lane the
  phase ran on (the span's node and each of its GPUs) the mean duration of those spans, and ranks the lanes
  longest first (ties: display order), the first ``top`` of them. Open spans are left out (no duration yet).
- :func:`phase_names` lists the phase names with a closed span in the window, miles' default
  (:data:`DEFAULT_PHASE`) first; :func:`pick_expression` writes lanes as the lane grammar's ``gpu:`` selectors,
  which is how miles hands a pick to its lane selection.
- Pure: columns in, values out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from miles_tui.core.telemetry import Lane, PhaseSpans, lane_key
from miles_tui.core.telemetry.phase_bands import Actor, PhaseTime

DEFAULT_PHASE: Final = "update_weights"
"""The phase miles' quick pick ranks by."""

PICK_COUNT: Final = 8
"""Lanes a pick keeps (miles' ``QUICK_PICK_K``)."""


@dataclass(frozen=True)
class SlowLane:
    """One lane of a slowest-phase pick."""

    lane: Lane
    """(node, gpu)."""
    mean: float
    """Mean duration of the phase's spans on it, seconds."""
    spans: int
    """Spans counted."""


def _closed_in(spans: PhaseSpans, since: float | None, until: float | None) -> np.ndarray:
    keep = np.isfinite(spans.t1)
    if since is not None:
        keep &= spans.t1 >= since
    if until is not None:
        keep &= spans.t0 <= until
    return keep


def phase_names(spans: PhaseSpans, since: float | None = None, until: float | None = None) -> tuple[str, ...]:
    """Names of the phases with a closed span on a GPU in the window: :data:`DEFAULT_PHASE` first, then by first
    sight (a phase no GPU ran, like the rollout manager's, ranks no lane)."""
    on_gpus = np.array([bool(gpus) for _, _, gpus in spans.actors], dtype=bool)
    keep = _closed_in(spans, since, until)
    if len(on_gpus):
        keep &= on_gpus[spans.actor]
    seen = np.unique(spans.band[keep]).tolist()
    names: list[str] = []
    for band in sorted(seen):
        name = spans.bands[band][1]
        if isinstance(name, str) and name not in names:
            names.append(name)
    return tuple(sorted(names, key=lambda n: n != DEFAULT_PHASE))


def slowest_phase(
    spans: PhaseSpans, phase: str, since: float | None = None, until: float | None = None, top: int = PICK_COUNT
) -> tuple[SlowLane, ...]:
    """The ``top`` lanes with the longest mean ``phase`` span in the window, longest first."""
    bands = [i for i, (_, name) in enumerate(spans.bands) if name == phase]
    keep = _closed_in(spans, since, until) & np.isin(spans.band, bands)
    totals: dict[Lane, list[float]] = {}
    durations = (spans.t1 - spans.t0)[keep].tolist()
    for actor, seconds in zip(spans.actor[keep].tolist(), durations, strict=True):
        node, _, gpus = spans.actors[actor]
        for gpu in gpus or ():
            try:
                entry = totals.setdefault((node, gpu), [0.0, 0.0])
            except TypeError:  # a JSON list where a GPU index belongs: no lane
                continue
            entry[0] += seconds
            entry[1] += 1
    ranked = sorted(totals.items(), key=lambda item: (-item[1][0] / item[1][1], lane_key(item[0])))
    return tuple(SlowLane(lane, total / count, int(count)) for lane, (total, count) in ranked[: max(top, 0)])


def pick_expression(lanes: Sequence[Lane]) -> str:
    """The lanes as the lane grammar's selectors (``gpu:10.0.0.1:3, gpu:10.0.0.2:0``)."""
    return ", ".join(f"gpu:{node}:{gpu}" for node, gpu in lanes)


def train_actors(spans: PhaseSpans, time: PhaseTime | None = None) -> list[Actor]:
    """(node, rank, gpus) of every writer of a ``train`` phase in ``spans`` or ``time`` (the zoomed-out view's
    seconds per rank and band, over the same tables): what ``rank:`` and ``role:train`` select by."""
    train = [i for i, (role, _) in enumerate(spans.bands) if role == "train"]
    if not train:
        return []
    found = spans.actor[np.isin(spans.band, train)]
    if time is not None:
        found = np.concatenate([found, time.actor[np.isin(time.band, train)]])
    return [spans.actors[a] for a in np.unique(found).tolist()]
