"""Phases (``phases/``) as columns, and the share of each time bin each (role, phase) took.

Contract: :func:`phase_spans` pairs open markers (``t1 == -1``) with their
closing records; a marker never closed is open (NaN end) unless it started
before ``attempt_start`` (an attempt that died). :func:`phase_bands` gives, per
(role, name) and bin, the fraction of the bin its ranks spent in that phase,
averaged over the ranks, an open phase counting up to ``now``; the sums are
taken relative to the window start so that short spans survive epoch-sized
times. :func:`lane_phases` gives, per GPU lane (the ranks whose phases name
that node and GPU), the phase that took most of each bin (none when it spent
longer in no phase) and the share of the window each phase took. Pure; takes ``now``; never reads files, never formats.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.gpu_samples import FloatArray, IntArray, Lane, key_ids, lane_key, natural_key
from miles_tui.core.telemetry.stream_records import OPEN_T1, Phase, StreamRecord
from miles_tui.core.telemetry.time_bins import TimeBins

BoolArray: TypeAlias = npt.NDArray[np.bool_]
BandKey: TypeAlias = tuple[str | None, str]
"""(role, phase name)."""
Actor: TypeAlias = tuple[str | None, Any, tuple[Any, ...]]
"""(node, rank, gpus) of a phase's writer."""

SHARE_EPSILON: Final = 1e-6
"""A phase share below this is rounding noise of the span sums, not time spent: it counts as none."""


@dataclass(frozen=True, eq=False)
class PhaseSpans:
    """Phases as columns: one row per span; an open phase has ``t1`` NaN (it runs until now)."""

    bands: tuple[BandKey, ...]
    """Band id -> (role, name), in order of first sight."""
    actors: tuple[Actor, ...]
    """Actor id -> (node, rank, gpus)."""
    band: IntArray
    """Band id of each span."""
    actor: IntArray
    """Actor id of each span."""
    t0: FloatArray
    """Start."""
    t1: FloatArray
    """End (NaN while open)."""


def phase_columns(
    phases: Iterable[Phase], bands: dict[BandKey, int], actors: dict[Actor, int]
) -> tuple[IntArray, IntArray, FloatArray, FloatArray]:
    """(band id, actor id, t0, t1) of the phases, an open one's t1 NaN; new keys are added to the tables."""
    rows = list(phases)
    band = key_ids(zip(map(attrgetter("role"), rows), map(attrgetter("name"), rows), strict=True), bands)
    where = zip(
        map(attrgetter("node"), rows), map(attrgetter("rank"), rows), map(attrgetter("gpus"), rows), strict=True
    )
    actor = key_ids(where, actors)
    t0 = np.array(list(map(attrgetter("t0"), rows)), dtype=np.float64)
    t1 = np.array(list(map(attrgetter("t1"), rows)), dtype=np.float64)
    t1[t1 == OPEN_T1] = np.nan
    return band, actor, t0, t1


def open_phases(records: Iterable[StreamRecord], attempt_start: float | None = None) -> list[Phase]:
    """Open markers not closed later in ``records`` (nor left by an attempt before ``attempt_start``)."""
    open_: dict[tuple[object, ...], Phase] = {}
    for record in records:
        if isinstance(record, Phase):
            if record.is_open:
                open_[record.key] = record
            else:
                open_.pop(record.key, None)
    return [p for p in open_.values() if attempt_start is None or p.t0 >= attempt_start]


def phase_spans(records: Sequence[StreamRecord], attempt_start: float | None = None) -> PhaseSpans:
    """Closed phases plus the markers still open (see :func:`open_phases`) as columns."""
    rows = [r for r in records if isinstance(r, Phase) and not r.is_open]
    rows += open_phases(records, attempt_start)
    bands: dict[BandKey, int] = {}
    actors: dict[Actor, int] = {}
    band, actor, t0, t1 = phase_columns(rows, bands, actors)
    return PhaseSpans(tuple(bands), tuple(actors), band, actor, t0, t1)


@dataclass(frozen=True, eq=False)
class PhaseBand:
    """One (role, phase name) over the window."""

    role: str | None
    """Role of the ranks (``train``, ``rollout_manager`` ...)."""
    name: str
    """Phase name."""
    share: FloatArray
    """Per bin: the fraction of the bin the band's ranks spent in this phase, averaged over them (0..1)."""
    ranks: tuple[Any, ...]
    """Ranks seen in it during the window."""
    nodes: tuple[str, ...]
    """Their nodes, in natural order."""
    open: int
    """Ranks in it right now (open phases)."""


def _covered(t0: FloatArray, t1: FloatArray, edges: FloatArray) -> FloatArray:
    """Total time the spans cover in each bin: differences of F(e) = sum clip(e - t0, 0, t1 - t0)."""

    def ramp(starts: FloatArray) -> FloatArray:
        ordered = np.sort(starts)
        sums = np.concatenate([[0.0], np.cumsum(ordered)])
        k = np.searchsorted(ordered, edges, side="left")
        area: FloatArray = edges * k - sums[k]
        return area

    integral = ramp(t0) - ramp(t1)
    return np.maximum(np.diff(integral), 0.0)


def _relative(spans: PhaseSpans, bins: TimeBins, now: float) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Each span clipped to the window, in seconds since its start (an open one runs to ``now``), and which
    spans have any time in it."""
    # Seconds since the window start: epoch seconds summed over many spans would lose the small ones.
    t1 = np.where(np.isnan(spans.t1), np.maximum(now, spans.t0), spans.t1)
    lo = np.clip(spans.t0, bins.since, bins.until) - bins.since
    hi = np.clip(t1, bins.since, bins.until) - bins.since
    return lo, hi, hi > lo


def phase_bands(spans: PhaseSpans, bins: TimeBins, now: float) -> tuple[PhaseBand, ...]:
    """The share of each bin spent in each (role, name); bands with no time in the window are left out."""
    lo, hi, inside = _relative(spans, bins, now)
    edges = bins.edges() - bins.since
    out = []
    order = sorted(range(len(spans.bands)), key=lambda b: _band_order(spans.bands, b))
    for band_id in order:
        mine = inside & (spans.band == band_id)
        if not mine.any():
            continue
        actor_ids = np.unique(spans.actor[mine])
        actors = [spans.actors[i] for i in actor_ids.tolist()]
        share = _covered(lo[mine], hi[mine], edges) / (bins.width * len(actors))
        now_open = mine & np.isnan(spans.t1)
        role, name = spans.bands[band_id]
        out.append(
            PhaseBand(
                role=role,
                name=name,
                share=np.where(share < SHARE_EPSILON, 0.0, np.minimum(share, 1.0)),
                ranks=_sorted({a[1] for a in actors}),
                nodes=tuple(sorted({str(a[0]) for a in actors if a[0] is not None}, key=natural_key)),
                open=len(np.unique(spans.actor[now_open])),
            )
        )
    return tuple(out)


def _sorted(values: Iterable[Any]) -> tuple[Any, ...]:
    """Ranks in order: plain order when they compare (ints), natural order of their text otherwise."""
    values = list(values)
    try:
        return tuple(sorted(values))
    except TypeError:
        return tuple(sorted(values, key=natural_key))


def _band_order(bands: Sequence[BandKey], band_id: int) -> tuple[int, int]:
    """Bands of one role together (roles in order of first sight), phases in order of first sight."""
    role = bands[band_id][0]
    first_of_role = next(i for i, (r, _) in enumerate(bands) if r == role)
    return first_of_role, band_id


def lanes_of_rank(spans: PhaseSpans, rank: Any) -> tuple[Lane, ...]:
    """The (node, gpu) lanes a rank ran on, from its phases."""
    found = {(node, gpu) for node, r, gpus in spans.actors if r == rank and node is not None for gpu in gpus}
    return tuple(sorted(found, key=lane_key))


# -- per lane ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LanePhases:
    """The phases of each GPU lane over the window."""

    bands: tuple[BandKey, ...]
    """Band id -> (role, name), the ids of the spans the lanes were computed from."""
    dominant: IntArray
    """(lanes, bins): id of the band that took most of the bin on the lane; -1: none did, or the lane spent
    longer in no phase at all (a bin with a sliver of training is not a training bin)."""
    share: FloatArray
    """(lanes, bands): fraction of the window each band took on the lane, averaged over the lane's ranks."""


def _lane_pairs(actors: Sequence[Actor], lanes: Sequence[Lane]) -> tuple[IntArray, IntArray]:
    """(actor id, lane row) for every lane each actor ran on, by actor id."""
    row_of: dict[tuple[Any, Any], int] = {lane: row for row, lane in enumerate(lanes)}
    pairs: list[tuple[int, int]] = []
    for actor, (node, _, gpus) in enumerate(actors):
        for gpu in gpus:
            try:
                row = row_of.get((node, gpu))
            except TypeError:  # a JSON list or object where a GPU index belongs: no lane has it
                row = None
            if row is not None:
                pairs.append((actor, row))
    table = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return table[:, 0], table[:, 1]


def binned_cover(key: IntArray, lo: FloatArray, hi: FloatArray, keys: int, bins: TimeBins) -> FloatArray:
    """(keys, bins): the seconds of the spans ``[lo, hi)`` (seconds since the window start) in each bin,
    summed per ``key``: the partial first and last bins of a span directly, the whole bins between them
    through a running sum, so a span costs the same however many bins it crosses."""
    count, width = bins.count, bins.width
    size = keys * count
    b0 = np.minimum((lo / width).astype(np.int64), count - 1)
    b1 = np.minimum((hi / width).astype(np.int64), count - 1)
    base = key * count
    same = b0 == b1
    head = np.where(same, hi - lo, (b0 + 1) * width - lo)
    tail = np.where(same, 0.0, hi - b1 * width)
    cover = np.bincount(base + b0, head, size) + np.bincount(base + b1, tail, size)
    full = b1 - b0 > 1
    steps = np.bincount(base[full] + b0[full] + 1, minlength=size + 1)
    steps -= np.bincount(base[full] + b1[full], minlength=size + 1)
    whole: FloatArray = np.cumsum(steps)[:size].astype(np.float64) * width
    total: FloatArray = np.maximum(cover + whole, 0.0)
    return total.reshape(keys, count)


def lane_phases(spans: PhaseSpans, lanes: Sequence[Lane], bins: TimeBins, now: float) -> LanePhases:
    """Per lane of ``lanes``: the band that took most of each bin, and each band's share of the window.

    A lane's phases are those of the ranks whose records name its node and GPU (a rank on several GPUs
    counts on each). Several ranks on one lane: the bin goes to the band with the most rank-seconds. A bin
    is left blank when the lane's ranks spent more of it in no phase than in its top band.
    """
    lanes_n, bands_n = len(lanes), len(spans.bands)
    dominant = np.full((lanes_n, bins.count), -1, dtype=np.int64)
    share = np.zeros((lanes_n, bands_n))
    pair_actor, pair_row = _lane_pairs(spans.actors, lanes)
    if not len(pair_actor):
        return LanePhases(spans.bands, dominant, share)
    lo, hi, inside = _relative(spans, bins, now)
    per_actor = np.bincount(pair_actor, minlength=len(spans.actors))
    picked = np.flatnonzero(inside & (per_actor[spans.actor] > 0))
    actor = spans.actor[picked]
    if per_actor.max() == 1:  # the common case, a rank per GPU: each span lands on one lane
        span = picked
        row = np.zeros(len(spans.actors), dtype=np.int64)
        row[pair_actor] = pair_row
        row = row[actor]
    else:  # a rank on several GPUs: one entry per (span, lane of its rank)
        repeats = per_actor[actor]
        span = np.repeat(picked, repeats)
        within = np.arange(len(span)) - np.repeat(np.cumsum(repeats) - repeats, repeats)
        first_pair = np.cumsum(per_actor) - per_actor  # pairs are listed by actor id
        actor = spans.actor[span]
        row = pair_row[first_pair[actor] + within]
    cover = binned_cover(row * bands_n + spans.band[span], lo[span], hi[span], lanes_n * bands_n, bins)
    cover = cover.reshape(lanes_n, bands_n, bins.count)
    active = np.zeros(len(spans.actors), dtype=bool)
    active[actor] = True  # ranks with time in the window
    ranks = np.bincount(pair_row[active[pair_actor]], minlength=lanes_n)
    top = cover.max(axis=1)
    idle = bins.width * np.maximum(ranks, 1)[:, None] - cover.sum(axis=1)  # rank-seconds in no phase
    shown = (top > SHARE_EPSILON * bins.width) & (top >= idle)
    dominant = np.where(shown, cover.argmax(axis=1), -1).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = cover.sum(axis=2) / (bins.until - bins.since) / np.maximum(ranks, 1)[:, None]
    share = np.where(share < SHARE_EPSILON, 0.0, np.minimum(share, 1.0))
    return LanePhases(spans.bands, dominant, share)
