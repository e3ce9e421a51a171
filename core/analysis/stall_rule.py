"""The stall rule (miles' ``stalled_phase``): a phase open far beyond its usual duration, one advisory per phase.

Contract: a phase of the current attempt (started at or after meta.json's
``start_ts``) whose open marker no closing record closes, open for longer than
max(:data:`STALL_FACTOR` × the median duration of its closed runs,
:data:`STALL_MIN_OPEN_S`), judged at the newest data timestamp (never the wall
clock), is stalled; a phase with fewer than :data:`STALL_MIN_CLOSED` closed runs
is not judged. :func:`stalled_phases` takes records, :func:`stalled_phase_columns`
columns, :func:`stalled_phase_arrays` numpy arrays (a long run's phases every
few seconds), :func:`stalled_from_digests` the per-hour digests of
:mod:`~miles_tui.core.telemetry.hours.phase_digest` (a month of phases, reading
durations only for a phase that has a marker open long enough): one answer.
Pure; never reads files or the clock.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.analysis.advisories import Advisory, Level
from miles_tui.core.analysis.phase_markers import PHASE_FIELDS
from miles_tui.core.analysis.phase_markers import open_and_closed as _open_and_closed
from miles_tui.core.telemetry import OPEN_T1, TAG_INT, TAG_NONE, TAG_OTHER, Phase, TableArrays
from miles_tui.core.telemetry.hours.phase_digest import PhaseDigest, open_markers
from miles_tui.core.telemetry.hours.phase_digest import key_part as _key_part

FloatArray = npt.NDArray[np.float64]


def duration_text(seconds: float) -> str:
    """An advisory's duration in its two largest units, as the monitor writes ages: ``45s``, ``7min``,
    ``3h20m``, ``106d06h`` (a stopped run's ``9181595s`` and ``2550.4h`` read as nothing)."""
    total = max(0, round(seconds)) if math.isfinite(seconds) else 0
    if total < 60:
        return f"{total}s"
    minutes = round(total / 60)
    if minutes < 60:
        return f"{minutes}min"
    if minutes < 48 * 60:
        hours, rest = divmod(minutes, 60)
        return f"{hours}h{rest:02d}m" if rest else f"{hours}h"
    days, rest = divmod(round(total / 3600), 24)
    return f"{days}d{rest:02d}h" if rest else f"{days}d"


STALL_FACTOR: Final = 6.0
"""An open phase is stalled past this many times the median duration of its closed runs ..."""
STALL_MIN_OPEN_S: Final = 1800.0
"""... and never before it has been open this long (short phases would false-positive)."""
STALL_MIN_CLOSED: Final = 3
"""Closed runs of a phase needed for a baseline; phases open by design never close and are not judged."""

_STALL_HINTS: Final = {
    "train_wait": "training is starved of rollout data: check the engines and the data buffer",
    "rollout": "check the inference engines (aborts, KV cache) and the reward / agent side",
    "actor_train": "check the training ranks for a hung collective, an OOM or a lost node",
    "update_weights": "weight sync is hanging: check the engines and the NCCL group between them and the trainer",
}


def _where(node: Any, rank: Any, role: Any) -> str:
    node = node or "?"
    if rank is None or rank == -1:
        return f"{node} ({role})" if role else node
    return f"{node} rank {rank}"


def stalled_phases(phases: Iterable[Phase], attempt_start: float | None, at: float) -> list[Advisory]:
    """Phases open far beyond their usual duration at time ``at``, one critical advisory per phase name.

    ``at`` is the newest data timestamp of the run (as miles judges it), not the
    wall clock: a run that stopped an hour ago is not "stalled for an hour" in a
    phase that was open for a minute when it stopped (``no_new_data`` says that).
    ``phases`` are raw records: open markers (``t1 == -1``) and closing records.
    A marker whose closing record (same name, node, rank, t0) is present is not
    open. Only the current attempt counts: records that start before
    ``attempt_start`` (meta.json's ``start_ts``) belong to an attempt that died
    and are neither open nor part of the baseline.
    """
    rows = list(phases)
    columns = tuple([getattr(p, name) for p in rows] for name in PHASE_FIELDS)
    return stalled_phase_columns(columns, attempt_start, at)


def stalled_phase_columns(columns: Sequence[Sequence[Any]], attempt_start: float | None, at: float) -> list[Advisory]:
    """:func:`stalled_phases` over the records as columns (:data:`PHASE_FIELDS`, one list each): what a
    reader holding a long run's phases as columns hands over without building a record per phase."""
    rows = zip(*columns, strict=True)  # (name, t0, t1, node, rank, role)
    current = list(rows) if attempt_start is None else [r for r in rows if r[1] >= attempt_start]
    try:
        durations, open_markers = _open_and_closed(current)
    except TypeError:  # a node or rank that is a JSON list or object: keyed by its repr
        current = [(r[0], r[1], r[2], _key_part(r[3]), _key_part(r[4]), r[5]) for r in current]
        durations, open_markers = _open_and_closed(current)
    out = []
    for phase in sorted({r[0] for r in open_markers.values()}):
        closed = durations.get(phase, [])
        if len(closed) < STALL_MIN_CLOSED:
            continue
        usual = statistics.median(closed)
        limit = max(STALL_FACTOR * usual, STALL_MIN_OPEN_S)
        stuck = sorted((r for r in open_markers.values() if r[0] == phase and at - r[1] > limit), key=itemgetter(1))
        if stuck:
            out.append(
                _stall(phase, len(closed), usual, at - stuck[0][1], [(r[3], r[4], r[5]) for r in stuck[:3]], len(stuck))
            )
    return out


def _stall(
    phase: str, closed: int, usual: float, age: float, where: Sequence[tuple[Any, Any, Any]], stuck: int
) -> Advisory:
    """The advisory for ``stuck`` open markers of ``phase``, the oldest ``age`` seconds old; ``where`` is
    (node, rank, role) of the first three."""
    places = ", ".join(_where(*w) for w in where) + (f" and {stuck - 3} more" if stuck > 3 else "")
    times = f", {age / usual:.0f}× its usual {duration_text(usual)}" if usual > 0 else ""
    message = (
        f"phase '{phase}' has been open for {duration_text(age)} on {places}{times} "
        f"(median of {closed} closed this attempt): the run is stalled there, not slow"
    )
    if phase in _STALL_HINTS:
        message += f"; {_STALL_HINTS[phase]}"
    return Advisory(Level.CRITICAL, "stalled_phase", message)


PHASE_NUMBERS: Final = ("t0", "t1", "rank")
PHASE_SHARED: Final = ("name", "node", "role")


def stalled_phase_arrays(arrays: TableArrays, attempt_start: float | None, at: float) -> list[Advisory]:
    """:func:`stalled_phases` over the phases as numpy arrays (:data:`PHASE_NUMBERS`, :data:`PHASE_SHARED`).

    The rule runs every few seconds over every phase of a long run; built as Python objects, its
    keys, tuples and floats (~10 a phase) were churn that fragmented the allocator's arenas (a live
    demo held ~14 KB more per step with it). Here the records are matched as rows of float64 keys.
    Records a float64 key cannot stand for exactly (a huge int, a NaN, a name that is not a string,
    a rank that is a list) go through :func:`stalled_phase_columns` instead, with the same result.
    """
    t0, t0_tags, _ = arrays.numbers["t0"]
    t1, t1_tags, _ = arrays.numbers["t1"]
    rank, rank_tags, _ = arrays.numbers["rank"]
    names, nodes, roles = arrays.codes["name"], arrays.codes["node"], arrays.codes["role"]
    values = arrays.values
    used_names = np.unique(names).tolist()
    used_nodes = np.unique(nodes).tolist()
    exact = (
        bool((t0_tags <= TAG_INT).all() and (t1_tags <= TAG_INT).all() and (rank_tags != TAG_OTHER).all())
        and bool(np.isfinite(t0).all() and np.isfinite(t1).all() and np.isfinite(rank).all())
        and all(type(values[c]) is str for c in used_names)
        and all(values[c] is None or type(values[c]) is str for c in used_nodes)
    )
    if not exact:
        return stalled_phase_columns(tuple(arrays.column(name) for name in PHASE_FIELDS), attempt_start, at)
    current = np.ones(arrays.size, bool) if attempt_start is None else t0 >= attempt_start
    is_open = t1 == OPEN_T1
    closed, opened = current & ~is_open, current & is_open
    if not opened.any():
        return []
    none_rank = rank_tags == TAG_NONE
    keys = np.column_stack([names, nodes, np.where(none_rank, 0.0, rank + 0.0), none_rank, t0 + 0.0]).astype(np.float64)
    rows = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.shape[1] * 8))).ravel()
    markers = np.flatnonzero(opened)
    markers = markers[~np.isin(rows[markers], rows[closed])]
    if not len(markers):
        return []
    # one marker per key, in order of first sight, holding its last record (what a dict of markers keeps)
    _, first, inverse = np.unique(rows[markers], return_index=True, return_inverse=True)
    last = np.zeros(len(first), np.int64)
    np.maximum.at(last, inverse.ravel(), np.arange(len(markers)))
    markers = markers[last[np.argsort(first, kind="stable")]]
    durations = np.maximum(t1[closed] - t0[closed], 0.0)
    closed_names = names[closed]
    out = []
    for code in sorted(set(names[markers].tolist()), key=values.__getitem__):
        spans = durations[closed_names == code]
        if len(spans) < STALL_MIN_CLOSED:
            continue
        usual = float(np.median(spans))
        limit = max(STALL_FACTOR * usual, STALL_MIN_OPEN_S)
        mine = markers[names[markers] == code]
        stuck = mine[at - t0[mine] > limit]
        if not len(stuck):
            continue
        stuck = stuck[np.argsort(t0[stuck], kind="stable")]
        where = [(values[nodes[i]], _rank(rank[i], rank_tags[i]), values[roles[i]]) for i in stuck[:3].tolist()]
        out.append(_stall(values[code], len(spans), usual, at - float(t0[stuck[0]]), where, len(stuck)))
    return out


def _rank(value: float, tag: int) -> Any:
    return None if tag == TAG_NONE else int(value) if tag == TAG_INT else value


_last: list[tuple[tuple[PhaseDigest, ...], float | None, float, list[Advisory]]] = []
"""The last answer of :func:`stalled_from_digests` (a followed run asks again every poll, mostly the same)."""
_last_lock = threading.Lock()


def stalled_from_digests(digests: Sequence[PhaseDigest], attempt_start: float | None, at: float) -> list[Advisory]:
    """:func:`stalled_phases` over per-partition digests (:mod:`~miles_tui.core.telemetry.hours.phase_digest`),
    answered again without work when asked of the same digests (digests are immutable), start and time."""
    key = tuple(digests)
    with _last_lock:
        if _last and _last[0][1:3] == (attempt_start, at) and _same(_last[0][0], key):
            return list(_last[0][3])
    answer = _stalled_from_digests(key, attempt_start, at)
    with _last_lock:
        _last[:] = [(key, attempt_start, at, answer)]
    return list(answer)


def _same(a: tuple[PhaseDigest, ...], b: tuple[PhaseDigest, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _stalled_from_digests(digests: Sequence[PhaseDigest], attempt_start: float | None, at: float) -> list[Advisory]:
    """:func:`stalled_phases` over per-partition digests (:mod:`~miles_tui.core.telemetry.hours.phase_digest`).

    An open marker is open when no closing record anywhere has its key: the
    markers no record of their own partition closes, less those whose key is
    among the other partitions' unmatched closing records. Only when one is
    open past :data:`STALL_MIN_OPEN_S` are the closed durations of its phase
    read: the same answer as over every record.
    """
    markers = open_markers(digests, attempt_start)
    current = attempt_start if attempt_start is not None else -math.inf
    if not any(at - r[1] > STALL_MIN_OPEN_S for r in markers):
        return []
    out = []  # the markers are one per key already (open_markers)
    for phase in sorted({r[0] for r in markers}):
        spans = _closed_durations(digests, phase, current)
        if len(spans) < STALL_MIN_CLOSED:
            continue
        usual = float(np.median(spans))
        limit = max(STALL_FACTOR * usual, STALL_MIN_OPEN_S)
        stuck = sorted((r for r in markers if r[0] == phase and at - r[1] > limit), key=itemgetter(1))
        if stuck:
            where = [(r[2], r[3], r[4]) for r in stuck[:3]]
            out.append(_stall(phase, len(spans), usual, at - stuck[0][1], where, len(stuck)))
    return out


def _closed_durations(digests: Sequence[PhaseDigest], phase: str, since: float) -> FloatArray:
    """Durations of the closed records of ``phase`` that started at or after ``since``."""
    parts = []
    for digest in digests:
        for code, name in enumerate(digest.names):
            if name == phase:
                pick = (digest.closed_name == code) & (digest.closed_t0 >= since)
                parts.append(np.maximum(digest.closed_t1[pick] - digest.closed_t0[pick], 0.0))
    return np.concatenate(parts) if parts else np.zeros(0)
