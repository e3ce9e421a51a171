"""Advisories from the ``dashboard/`` telemetry: alarms about a live run, then tuning advice when none is active.

Contract:

- Every rule is a small pure function of already-parsed values (phase records,
  engine samples, metric values, stream problems) and, where the answer
  depends on the clock, ``now`` passed in. It returns zero or more
  :class:`~miles_tui.core.analysis.advisories.Advisory` with a stable code. Rules never read
  files, never read the clock and never poll.
- Time-based alarms are judged at the newest data timestamp of the run, never
  the wall clock (a stalled phase's age is newest data − phase start); only
  ``no_new_data`` compares with ``now``, and it too takes the data's age from
  the newest record timestamp (file times only when no record has one: see
  :mod:`.run_state`). A run that ended (:func:`.run_state.ended`) is
  information, not an alarm.
- :func:`stream_advisories` collects each rule's input from a
  :class:`~miles_tui.core.follow.RunFollower` that the caller has already polled,
  and returns alarms first, tuning advice last. It reads only what the
  follower holds in memory. The engine rules (abort storm, KV cache,
  concurrency, prefix cache, DP balance) live in :mod:`.engine_advisories`.
- Tiers, as in miles: alarms (``stalled_phase`` and the engine alarms) suppress
  tuning advice (``low_mfu`` and the engine tuning rules) while one is active;
  advisories about the data itself (no new data, malformed or rewritten
  streams) are always reported and suppress nothing.
- The thresholds are the module constants below.

| code | level | fires when |
|---|---|---|
| ``stalled_phase`` | critical | a phase of the current attempt is open > max(6 × median closed duration, 30 min) |
| ``no_new_data`` | warning / critical | data age > max(5 × median step interval, 10 min) / > max(20 ×, 2 h) |
| ``run_ended`` | info | the run logged its last step (``num_rollout``), every phase closed: no ``no_new_data`` |
| engine alarms | warning | see :mod:`.engine_advisories` (abort storm, KV cache pool-bound / high) |
| ``malformed_stream_lines`` | warning | complete stream lines that do not parse (per file: count, first byte offset) |
| ``stream_reset`` / ``stream_unreadable`` | warning | a stream file rewritten under the reader / not readable |
| ``low_mfu`` | warning | mean ``perf/actor_train_mfu`` < 15 % over ≥ 3 steps (the first, warm-up, step left out) |
| engine tuning | info / warning | see :mod:`.engine_advisories` (concurrency, prefix cache, DP balance) |

``--low-mfu-threshold`` replaces the 15 % (0 turns the rule off).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.analysis.advisories import Advisory, Level, ordered
from miles_tui.core.analysis.engine_advisories import EngineFigures, engine_alarms, engine_tuning, tiered
from miles_tui.core.analysis.engine_feed import reader_engine_figures
from miles_tui.core.analysis.phase_markers import PHASE_FIELDS
from miles_tui.core.analysis.phase_markers import key_part as _key_part
from miles_tui.core.analysis.phase_markers import open_and_closed as _open_and_closed
from miles_tui.core.analysis.run_state import STEP_KEYS, run_ended, run_has_ended
from miles_tui.core.errors import StreamError
from miles_tui.core.follow import RunFollower
from miles_tui.core.tail import MalformedLineError, StreamReset
from miles_tui.core.telemetry import OPEN_T1, TAG_INT, TAG_NONE, TAG_OTHER, MetricStore, Phase, TableArrays
from miles_tui.core.telemetry.hours.phase_digest import PhaseDigest

FloatArray = npt.NDArray[np.float64]

STALL_FACTOR: Final = 6.0
"""An open phase is stalled past this many times the median duration of its closed runs ..."""
STALL_MIN_OPEN_S: Final = 1800.0
"""... and never before it has been open this long (short phases would false-positive)."""
STALL_MIN_CLOSED: Final = 3
"""Closed runs of a phase needed for a baseline; phases open by design never close and are not judged."""

LOW_MFU: Final = 0.15
"""Mean MFU (fraction of the device peak) under which training is called slow."""
MFU_MIN_STEPS: Final = 3
"""Steps (after the warm-up step) needed before MFU is judged."""
MFU_KEY: Final = "perf/actor_train_mfu"
MFU_PEAK_KEY: Final = "perf/mfu_peak_tflops"

NO_DATA_FACTOR: Final = 5.0
NO_DATA_MIN_S: Final = 600.0
NO_DATA_CRITICAL_FACTOR: Final = 20.0
NO_DATA_CRITICAL_MIN_S: Final = 7200.0
NO_DATA_MIN_INTERVALS: Final = 3
"""Step intervals needed for a usual interval; a run with fewer is too young to judge."""

_STALL_HINTS: Final = {
    "train_wait": "training is starved of rollout data: check the engines and the data buffer",
    "rollout": "check the inference engines (aborts, KV cache) and the reward / agent side",
    "actor_train": "check the training ranks for a hung collective, an OOM or a lost node",
    "update_weights": "weight sync is hanging: check the engines and the NCCL group between them and the trainer",
}


@dataclass(frozen=True)
class MfuSummary:
    """``perf/actor_train_mfu`` over a run, without its first (warm-up) step, as fractions."""

    latest: float
    """The newest step's MFU."""
    mean: float
    """Mean over the steps counted."""
    steps: int
    """Steps counted."""
    peak_tflops: float | None
    """The device peak (TFLOP/s per GPU) the ratio is taken against, when logged."""


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h"
    if seconds >= 60:
        return f"{seconds / 60:.0f}min"
    return f"{seconds:.0f}s"


def _number(value: Any) -> float | None:
    """A finite int/float (never a bool), else None."""
    if type(value) not in (int, float) or not math.isfinite(value):
        return None
    return float(value)


"""The phase fields the stall rule reads, in the order :func:`stalled_phase_columns` takes them."""


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
    times = f", {age / usual:.0f}× its usual {_duration(usual)}" if usual > 0 else ""
    message = (
        f"phase '{phase}' has been open for {_duration(age)} on {places}{times} "
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


def mfu_summary(values: Sequence[float] | FloatArray, peak_tflops: float | None = None) -> MfuSummary | None:
    """MFU per step in log order -> its summary without the first (warm-up) step; None without steps.

    Values above 1 mean the series is in percent; the summary is in fractions.
    """
    every = np.asarray(values, dtype=np.float64)
    finite = every[np.isfinite(every)]
    steady = every[1:][np.isfinite(every[1:])]  # numpy: a long run logs MFU per step, and this runs every poll
    if not len(steady):
        return None
    scale = 100.0 if float(finite.max()) > 1.0 else 1.0
    return MfuSummary(float(steady[-1]) / scale, float(steady.mean()) / scale, len(steady), peak_tflops)


def low_mfu(summary: MfuSummary | None, threshold: float = LOW_MFU) -> list[Advisory]:
    """Training computes slowly: mean MFU under ``threshold`` over at least :data:`MFU_MIN_STEPS` steps
    (a threshold of 0 or less turns the rule off)."""
    if threshold <= 0 or summary is None or summary.steps < MFU_MIN_STEPS or summary.mean >= threshold:
        return []
    peak = summary.peak_tflops
    against = f" against a {peak:g} TFLOP/s per-GPU peak (about {summary.mean * peak:.0f} TFLOP/s)" if peak else ""
    message = (
        f"actor training ran at {summary.mean:.1%} MFU on average over {summary.steps} train steps "
        f"(latest {summary.latest:.1%}){against}, below the {threshold:.0%} this check expects. MFU counts "
        "actor train time only, so waiting for rollouts cannot lower it: the train step itself computes slowly. "
        "Look at activation recomputation, a parallel layout that leaves ranks idle, and small or uneven "
        "micro-batches"
    )
    return [Advisory(Level.WARNING, "low_mfu", message)]


def no_new_data(
    newest_write: float | None, record_times: Sequence[float] | FloatArray, now: float, step_key: str
) -> list[Advisory]:
    """Nothing written for much longer than the usual interval between ``step_key`` records.

    ``record_times`` are the record times of ``step_key``; fewer than
    :data:`NO_DATA_MIN_INTERVALS` intervals is too little history to judge. The usual interval is the median
    of the sorted finite times' differences (numpy: a long run has a million, judged after every poll).
    """
    times = np.asarray(record_times, dtype=np.float64)
    times = np.sort(times[np.isfinite(times)])
    if newest_write is None or len(times) <= NO_DATA_MIN_INTERVALS:
        return []
    usual = float(np.median(np.diff(times)))
    age = now - newest_write
    if age <= max(NO_DATA_FACTOR * usual, NO_DATA_MIN_S):
        return []
    critical = age > max(NO_DATA_CRITICAL_FACTOR * usual, NO_DATA_CRITICAL_MIN_S)
    message = (
        f"nothing new has been written for {_duration(age)}, while {step_key} records usually come every "
        f"{_duration(usual)}: the run has stopped, hung or lost its writer (expected only if it finished)"
    )
    return [Advisory(Level.CRITICAL if critical else Level.WARNING, "no_new_data", message)]


def stream_corruption(
    problems: Iterable[StreamError],
    resets: Iterable[StreamReset] = (),
    malformed_counts: Mapping[Path, int] | None = None,
) -> list[Advisory]:
    """Malformed stream lines (per file: count, first byte offset), rewritten and unreadable stream files.

    ``problems`` are what polls reported; ``malformed_counts`` (the reader's
    running totals) gives the count when the lines were reported by earlier polls.
    """
    first: dict[Path | None, MalformedLineError] = {}
    seen: dict[Path | None, int] = {}
    out = []
    for problem in problems:
        if isinstance(problem, MalformedLineError):
            seen[problem.path] = seen.get(problem.path, 0) + 1
            known = first.get(problem.path)
            if known is None or (problem.offset or 0) < (known.offset or 0):
                first[problem.path] = problem
        else:
            out.append(Advisory(Level.WARNING, "stream_unreadable", str(problem), path=problem.path))
    counts: dict[Path | None, int] = dict(seen)
    for file, count in (malformed_counts or {}).items():
        counts[file] = max(count, counts.get(file, 0))
    for path, count in sorted(counts.items(), key=lambda item: str(item[0])):
        lines = f"{count} malformed line{'s' if count != 1 else ''}"
        err = first.get(path)
        at = f", the first at byte {err.offset} ({err.reason})" if err is not None else ""
        message = f"{path}: {lines} skipped{at}; their records are missing from charts and advisories"
        out.append(Advisory(Level.WARNING, "malformed_stream_lines", message, path=path))
    for reset in resets:
        message = (
            f"{reset.path} was rewritten ({reset.reason}: {reset.previous_offset} bytes had been read, it now has "
            f"{reset.size}); its records were dropped and read again from byte 0. A resumed run does this; "
            "anything else means something is editing the stream"
        )
        if reset.reason == "removed":
            message = (
                f"{reset.path} disappeared ({reset.previous_offset} bytes had been read); its records were dropped."
                " A run directory deleted and started again does this; anything else means something is deleting"
                " the stream"
            )
        out.append(Advisory(Level.WARNING, "stream_reset", message, path=reset.path))
    return out


def step_times(store: MetricStore) -> tuple[str, FloatArray]:
    """(step key, its record times) for the no-new-data rule: the first of :data:`STEP_KEYS` logged."""
    logged = store.step_keys()
    preferred: list[str] = [k for k in STEP_KEYS if k in logged]
    for step_key in preferred or list(logged):
        # miles logs the step counter itself with every record of its step key
        series = store.series(step_key, step_key)
        if series is None:
            names = store.keys()
            candidates = (store.series(name, step_key) for name in names)
            series = max((s for s in candidates if s is not None), key=lambda s: len(s.ts), default=None)
        if series is not None and len(series.ts):
            return step_key, series.ts
    return "", np.zeros(0)


def run_mfu(store: MetricStore, args: Mapping[str, Any]) -> MfuSummary | None:
    """The run's MFU summary: ``perf/actor_train_mfu`` and the newest ``perf/mfu_peak_tflops``
    (else the ``mfu_peak_tflops`` argument)."""
    series = store.series(MFU_KEY)
    if series is None:
        return None
    peaks = store.series(MFU_PEAK_KEY)
    logged = peaks.value[np.isfinite(peaks.value) & (peaks.value > 0)] if peaks is not None else np.zeros(0)
    peak = float(logged[-1]) if len(logged) else _number(args.get("mfu_peak_tflops"))
    return mfu_summary(series.value, peak)


@dataclass(frozen=True, eq=False)
class TelemetryFacts:
    """Everything the telemetry rules read, however it was read (a followed reader, a one-shot report)."""

    args: Mapping[str, Any]
    """meta.json's arguments."""
    phases: TableArrays | Sequence[PhaseDigest]
    """Every phase record of the run (:data:`PHASE_NUMBERS`, :data:`PHASE_SHARED`), or each partition's digest."""
    metrics: MetricStore
    """metrics.jsonl."""
    engines: EngineFigures
    """The engine rules' inputs."""
    edge: float | None
    """The newest data timestamp of the run (stalls are judged there, never at the wall clock)."""
    attempt_start: float | None
    """meta.json's ``start_ts``."""
    newest_write: float | None
    """The newest modification time seen in dump files and streams."""
    malformed: Mapping[Path, int]
    """Stream file -> malformed lines skipped so far."""


def stream_advisories(
    follower: RunFollower,
    now: float,
    *,
    problems: Sequence[StreamError] = (),
    resets: Sequence[StreamReset] = (),
    low_mfu_threshold: float = LOW_MFU,
) -> list[Advisory]:
    """Every telemetry rule over what ``follower`` holds after its last poll (see :func:`telemetry_advisories`)."""
    reader = follower.dashboard
    state = follower.state()
    span = reader.time_range()
    facts = TelemetryFacts(
        args=reader.meta.args if reader.meta is not None else {},
        phases=reader.loaded_arrays("phases", PHASE_NUMBERS, PHASE_SHARED),
        metrics=follower.metrics,
        engines=reader_engine_figures(reader),
        edge=span[1] if span is not None else None,
        attempt_start=state.attempt_start,
        newest_write=state.newest_write,
        malformed=reader.malformed_counts(),
    )
    return telemetry_advisories(facts, now, problems=problems, resets=resets, low_mfu_threshold=low_mfu_threshold)


def _stalls(phases: TableArrays | Sequence[PhaseDigest], attempt_start: float | None, at: float) -> list[Advisory]:
    if isinstance(phases, TableArrays):
        return stalled_phase_arrays(phases, attempt_start, at)
    return stalled_from_digests(phases, attempt_start, at)


def telemetry_advisories(
    facts: TelemetryFacts,
    now: float,
    *,
    problems: Sequence[StreamError] = (),
    resets: Sequence[StreamReset] = (),
    low_mfu_threshold: float = LOW_MFU,
) -> list[Advisory]:
    """Every telemetry rule, alarms first; tuning advice only while no alarm is active
    (:func:`~miles_tui.core.analysis.engine_advisories.tiered`).

    ``problems`` and ``resets`` are what the caller's reads reported (each once); malformed-line counts come
    from ``facts``. ``low_mfu_threshold`` is ``--low-mfu-threshold`` (0: the MFU rule is off).
    """
    step_key, times = step_times(facts.metrics)
    newest = facts.edge if facts.edge is not None else facts.newest_write
    finished = run_has_ended(facts.args, facts.metrics, facts.phases, facts.attempt_start)
    alarms = [
        *_stalls(facts.phases, facts.attempt_start, facts.edge if facts.edge is not None else now),
        *engine_alarms(facts.engines, facts.args),
    ]
    always = [
        *(run_ended(facts.args) if finished else no_new_data(newest, times, now, step_key)),
        *stream_corruption(problems, resets, facts.malformed),
    ]
    tuning = [
        *low_mfu(run_mfu(facts.metrics, facts.args), low_mfu_threshold),
        *engine_tuning(facts.engines, facts.args),
    ]
    return ordered(tiered(alarms, tuning, always))


def stalled_from_digests(digests: Sequence[PhaseDigest], attempt_start: float | None, at: float) -> list[Advisory]:
    """:func:`stalled_phases` over per-partition digests (:mod:`~miles_tui.core.telemetry.hours.phase_digest`).

    An open marker is open when no closing record anywhere has its key: the
    markers no record of their own partition closes, less those whose key is
    among the other partitions' unmatched closing records. Only when one is
    open past :data:`STALL_MIN_OPEN_S` are the closed durations of its phase
    read: the same answer as over every record.
    """
    closes = {(k[0], _key_part(k[1]), _key_part(k[2]), k[3]) for d in digests for k in d.closes}
    current = attempt_start if attempt_start is not None else -math.inf
    markers = [
        r for d in digests for r in d.opens
        if r[1] >= current and (r[0], _key_part(r[2]), _key_part(r[3]), r[1]) not in closes
    ]  # fmt: skip
    if not any(at - r[1] > STALL_MIN_OPEN_S for r in markers):
        return []
    unique: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in markers:  # one marker per key, in order of first sight, holding its last record
        unique[(r[0], _key_part(r[2]), _key_part(r[3]), r[1])] = r
    out = []
    for phase in sorted({r[0] for r in unique.values()}):
        spans = _closed_durations(digests, phase, current)
        if len(spans) < STALL_MIN_CLOSED:
            continue
        usual = float(np.median(spans))
        limit = max(STALL_FACTOR * usual, STALL_MIN_OPEN_S)
        stuck = sorted((r for r in unique.values() if r[0] == phase and at - r[1] > limit), key=itemgetter(1))
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
