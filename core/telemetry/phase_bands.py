"""Phases (``phases/``) as columns, and the share of each time bin each (role, phase) took.

Contract: :func:`phase_spans` pairs open markers (``t1 == -1``) with their
closing records; a marker never closed is open (NaN end) unless it started
before ``attempt_start`` (an attempt that died). :func:`phase_bands` gives, per
(role, name) and bin, the fraction of the bin its ranks spent in that phase,
averaged over the ranks, an open phase counting up to ``now``; the sums are
taken relative to the window start so that short spans survive epoch-sized
times. :func:`phase_time` holds the seconds per (rank, band) pair and bin, one
row per pair present, computed once for the bands and the lanes
(:mod:`miles_tui.core.telemetry.lane_phases`); work and memory follow the
number of spans, never ranks × bands. Pure; takes ``now``; never reads files,
never formats.
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


def binned_cover(key: IntArray, lo: FloatArray, hi: FloatArray, keys: int, bins: TimeBins) -> FloatArray:
    """(keys, bins): the seconds of the spans ``[lo, hi)`` (seconds since the window start) in each bin,
    summed per ``key``: the partial first and last bins of a span directly, the whole bins between them
    through a running sum, so a span costs the same however many bins it crosses."""
    count, width = bins.count, bins.width
    size = keys * count
    # In place where it can be: at 100k+ spans every temporary is megabytes the allocator maps afresh.
    b0 = (lo / width).astype(np.int64)
    np.minimum(b0, count - 1, out=b0)
    b1 = (hi / width).astype(np.int64)
    np.minimum(b1, count - 1, out=b1)
    first = key * count
    first += b0
    same = b0 == b1
    head = (b0 + 1) * width
    np.copyto(head, hi, where=same)
    head -= lo
    total = np.bincount(first, weights=head, minlength=size).astype(np.float64, copy=False)  # none: int zeros
    crossing = np.flatnonzero(~same)
    if len(crossing):  # spans ending in a later bin: their last bin, and the whole bins between
        start, span_bins = first[crossing], (b1 - b0)[crossing]
        total += np.bincount(start + span_bins, weights=hi[crossing] - b1[crossing] * width, minlength=size)
        full = np.flatnonzero(span_bins > 1)
        if len(full):
            steps = np.bincount(start[full] + 1, minlength=size + 1)
            steps -= np.bincount(start[full] + span_bins[full], minlength=size + 1)
            total += np.cumsum(steps)[:size].astype(np.float64) * width
    np.maximum(total, 0.0, out=total)
    return total.reshape(keys, count)


def _relative(spans: PhaseSpans, bins: TimeBins, now: float) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Each span clipped to the window, in seconds since its start (an open one runs to ``now``), and which
    spans have any time in it."""
    # Seconds since the window start: epoch seconds summed over many spans would lose the small ones.
    t1 = np.where(np.isnan(spans.t1), np.maximum(now, spans.t0), spans.t1)
    lo = np.clip(spans.t0, bins.since, bins.until) - bins.since
    hi = np.clip(t1, bins.since, bins.until) - bins.since
    return lo, hi, hi > lo


@dataclass(frozen=True, eq=False)
class PhaseTime:
    """The seconds each (rank, band) pair with time in the window spent in each bin: one row per pair present,
    so its size follows the records, never ranks × bands."""

    actor: IntArray
    """(pairs,): actor id, ascending."""
    band: IntArray
    """(pairs,): band id, ascending within an actor."""
    seconds: FloatArray
    """(pairs, bins): seconds in the band in each bin."""
    open: BoolArray
    """(pairs,): whether the rank is in the band right now (an open phase)."""


def pair_ids(keys: IntArray, space: int) -> tuple[IntArray, IntArray]:
    """(distinct keys ascending, index of each key among them), keys in ``[0, space)``: a presence table
    when the key space is small against the keys (the usual: ranks × a few phases), a sort otherwise."""
    if space <= 4 * len(keys) + 65536:
        present = np.zeros(space, dtype=bool)
        present[keys] = True
        return np.flatnonzero(present), (np.cumsum(present) - 1)[keys]
    distinct, index = np.unique(keys, return_inverse=True)
    return distinct, index.astype(np.int64)


def phase_time(spans: PhaseSpans, bins: TimeBins, now: float) -> PhaseTime:
    """Per (actor, band) pair, the seconds spent in each bin, an open phase counting up to ``now``: what
    :func:`phase_bands` and :func:`~miles_tui.core.telemetry.lane_phases.lane_phases` both sum."""
    lo, hi, inside = _relative(spans, bins, now)
    per = max(len(spans.bands), 1)
    pairs, which = pair_ids(spans.actor[inside] * per + spans.band[inside], len(spans.actors) * per)
    seconds = binned_cover(which, lo[inside], hi[inside], len(pairs), bins)
    still = np.bincount(which, weights=np.isnan(spans.t1[inside]), minlength=len(pairs)) > 0
    return PhaseTime(pairs // per, pairs % per, seconds, still)


def groups(keys: IntArray) -> tuple[IntArray, IntArray]:
    """(distinct keys, start of each) of ``keys`` sorted ascending: the runs :func:`numpy.add.reduceat` sums."""
    if not len(keys):
        return keys, keys
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[starts], starts


def phase_bands(spans: PhaseSpans, bins: TimeBins, now: float, time: PhaseTime | None = None) -> tuple[PhaseBand, ...]:
    """The share of each bin spent in each (role, name); bands with no time in the window are left out
    (``time``: :func:`phase_time` of the same arguments, when the caller has it)."""
    time = phase_time(spans, bins, now) if time is None else time
    order = np.argsort(time.band, kind="stable")  # pairs by band, actors ascending within one
    bands, starts = groups(time.band[order])
    if not len(bands):
        return ()
    cover = np.add.reduceat(time.seconds[order], starts, axis=0)
    ends = [*starts[1:].tolist(), len(order)]
    open_per_band = np.bincount(time.band[time.open], minlength=len(spans.bands))
    first_of_role: dict[str | None, int] = {}
    for band_id, (role, _) in enumerate(spans.bands):
        first_of_role.setdefault(role, band_id)
    out = []
    for j in sorted(range(len(bands)), key=lambda j: (first_of_role[spans.bands[bands[j]][0]], int(bands[j]))):
        band_id, begin, end = int(bands[j]), int(starts[j]), ends[j]
        actors = [spans.actors[i] for i in time.actor[order[begin:end]].tolist()]
        share = cover[j] / (bins.width * len(actors))
        role, name = spans.bands[band_id]
        out.append(
            PhaseBand(
                role=role,
                name=name,
                share=np.where(share < SHARE_EPSILON, 0.0, np.minimum(share, 1.0)),
                ranks=_sorted({a[1] for a in actors}),
                nodes=tuple(sorted({str(a[0]) for a in actors if a[0] is not None}, key=natural_key)),
                open=int(open_per_band[band_id]),
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


def lanes_of_rank(spans: PhaseSpans, rank: Any) -> tuple[Lane, ...]:
    """The (node, gpu) lanes a rank ran on, from its phases."""
    found = {(node, gpu) for node, r, gpus in spans.actors if r == rank and node is not None for gpu in gpus}
    return tuple(sorted(found, key=lane_key))
