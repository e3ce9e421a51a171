"""Each GPU lane's own phases over a window: the phase that took most of each bin, and each phase's share.

Contract: a lane (node, GPU) holds the phases of the ranks whose records name
that node and GPU (a rank on several GPUs counts on each; ranks sharing a GPU
are summed). :func:`lane_phases` gives, per lane and bin, the band with the most
rank-seconds, or none when the lane's ranks spent longer in no phase at all (a
bin with a sliver of training is not a training bin); and, per lane, the share
of the window each band took, averaged over the lane's ranks. It is built from
:func:`~miles_tui.core.telemetry.phase_bands.phase_time` rows (one per rank and
band present), so work and memory follow the records, never lanes × bands.
Pure; takes ``now``; never reads files, never formats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from miles_tui.core.telemetry.gpu_samples import FloatArray, IntArray, Lane
from miles_tui.core.telemetry.phase_bands import (
    SHARE_EPSILON,
    Actor,
    BandKey,
    PhaseSpans,
    PhaseTime,
    groups,
    phase_time,
)
from miles_tui.core.telemetry.time_bins import TimeBins


@dataclass(frozen=True, eq=False)
class LanePhases:
    """The phases of each GPU lane over the window."""

    bands: tuple[BandKey, ...]
    """Band id -> (role, name), the ids of the spans the lanes were computed from."""
    dominant: IntArray
    """(lanes, bins): id of the band that took most of the bin on the lane; -1: none did, or the lane spent
    longer in no phase at all."""
    starts: IntArray
    """(lanes + 1,): lane ``i``'s shares are ``share_band[starts[i]:starts[i + 1]]`` and ``share``'s."""
    share_band: IntArray
    """Band id of each share, ascending within a lane."""
    share: FloatArray
    """Fraction of the window the band took on the lane, averaged over the lane's ranks (0..1)."""

    def shares(self, lane: int) -> tuple[tuple[int, float], ...]:
        """(band id, share) of every band with time on lane ``lane``, largest share first."""
        begin, end = int(self.starts[lane]), int(self.starts[lane + 1])
        found = zip(self.share_band[begin:end].tolist(), self.share[begin:end].tolist(), strict=True)
        return tuple(sorted(((b, v) for b, v in found if v > 0), key=lambda item: (-item[1], item[0])))


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


def _on_lanes(time: PhaseTime, pair_actor: IntArray, pair_row: IntArray, actors: int) -> tuple[IntArray, IntArray]:
    """(row of ``time``, lane) for every lane of each row's actor."""
    per_actor = np.bincount(pair_actor, minlength=actors)
    first_pair = np.cumsum(per_actor) - per_actor  # pairs are listed by actor id
    repeats = per_actor[time.actor]
    source = np.repeat(np.arange(len(time.actor)), repeats)
    within = np.arange(len(source)) - np.repeat(np.cumsum(repeats) - repeats, repeats)
    return source, pair_row[first_pair[time.actor[source]] + within]


def _per_lane(
    cover: FloatArray, lane_of: IntArray, band_of: IntArray, lanes: int, bands: int
) -> tuple[IntArray, FloatArray, IntArray, FloatArray]:
    """(lanes with phases, their top band's seconds, that band, all bands' seconds) per bin, from the rows of
    ``cover`` (one per (lane, band), sorted): a lanes × bands table when that is small against the rows (the
    usual), runs of rows per lane otherwise."""
    bins = cover.shape[1]
    if lanes * bands <= 4 * len(cover) + 4096:
        flat = np.zeros((lanes * bands, bins))
        flat[lane_of * bands + band_of] = cover
        table = flat.reshape(lanes, bands, bins)
        return np.arange(lanes), table.max(axis=1), table.argmax(axis=1), table.sum(axis=1)
    on, first = groups(lane_of)
    top = np.maximum.reduceat(cover, first, axis=0)
    which = np.repeat(np.arange(len(on)), np.diff(np.append(first, len(cover))))
    best = np.minimum.reduceat(np.where(cover == top[which], band_of[:, None], bands), first, axis=0)
    return on, top, best, np.add.reduceat(cover, first, axis=0)


def lane_phases(
    spans: PhaseSpans, lanes: Sequence[Lane], bins: TimeBins, now: float, time: PhaseTime | None = None
) -> LanePhases:
    """Per lane of ``lanes``: the band that took most of each bin, and each band's share of the window
    (``time``: :func:`~miles_tui.core.telemetry.phase_bands.phase_time` of the same spans, bins and ``now``)."""
    lanes_n, per = len(lanes), max(len(spans.bands), 1)
    dominant = np.full((lanes_n, bins.count), -1, dtype=np.int64)
    time = phase_time(spans, bins, now) if time is None else time
    pair_actor, pair_row = _lane_pairs(spans.actors, lanes)
    source, row = _on_lanes(time, pair_actor, pair_row, len(spans.actors))
    order = np.argsort(row * per + time.band[source], kind="stable")
    keys, starts = groups((row * per + time.band[source])[order])
    if not len(keys):
        empty = np.zeros(0, dtype=np.int64)
        return LanePhases(spans.bands, dominant, np.zeros(lanes_n + 1, dtype=np.int64), empty, np.zeros(0))
    cover = time.seconds[source[order]]
    if len(keys) < len(order):  # ranks sharing a lane: sum their seconds
        cover = np.add.reduceat(cover, starts, axis=0)
    lane_of, band_of = keys // per, keys % per
    active = np.zeros(len(spans.actors), dtype=bool)
    active[time.actor] = True  # ranks with time in the window
    ranks = np.maximum(np.bincount(pair_row[active[pair_actor]], minlength=lanes_n), 1)
    on, top, best, total = _per_lane(cover, lane_of, band_of, lanes_n, per)
    idle = bins.width * ranks[on][:, None] - total  # rank-seconds in no phase
    dominant[on] = np.where((top > SHARE_EPSILON * bins.width) & (top >= idle), best, -1)
    share = cover.sum(axis=1) / (bins.until - bins.since) / ranks[lane_of]
    share = np.where(share < SHARE_EPSILON, 0.0, np.minimum(share, 1.0))
    lane_starts = np.searchsorted(lane_of, np.arange(lanes_n + 1))
    return LanePhases(spans.bands, dominant, lane_starts.astype(np.int64), band_of, share)
