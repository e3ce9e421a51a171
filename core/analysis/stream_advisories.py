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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.analysis.advisories import Advisory, Level, ordered
from miles_tui.core.analysis.engine_advisories import EngineFigures, engine_alarms, engine_tuning, tiered
from miles_tui.core.analysis.engine_feed import reader_engine_figures
from miles_tui.core.analysis.run_state import STEP_KEYS, run_ended, run_has_ended
from miles_tui.core.analysis.stall_rule import (
    PHASE_NUMBERS,
    PHASE_SHARED,
    duration_text,
    stalled_from_digests,
    stalled_phase_arrays,
)
from miles_tui.core.base.errors import StreamError
from miles_tui.core.base.tail import MalformedLineError, StreamReset
from miles_tui.core.follow import RunFollower
from miles_tui.core.telemetry import MetricStore, TableArrays
from miles_tui.core.telemetry.hours.phase_digest import PhaseDigest

FloatArray = npt.NDArray[np.float64]

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


def _number(value: Any) -> float | None:
    """A finite int/float (never a bool), else None."""
    if type(value) not in (int, float) or not math.isfinite(value):
        return None
    return float(value)


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
        f"nothing new has been written for {duration_text(age)}, while {step_key} records usually come every "
        f"{duration_text(usual)}: the run has stopped, hung or lost its writer (expected only if it finished)"
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
    span = state.time_range
    facts = TelemetryFacts(
        args=reader.meta.args if reader.meta is not None else {},
        phases=(
            reader.loaded_arrays("phases", PHASE_NUMBERS, PHASE_SHARED)
            if follower.phases is None
            else follower.phase_digests()
        ),
        metrics=follower.metrics,
        engines=reader_engine_figures(reader),
        edge=span[1] if span is not None else None,
        attempt_start=state.attempt_start,
        newest_write=state.newest_write,
        malformed=_malformed_counts(follower),
    )
    return telemetry_advisories(facts, now, problems=problems, resets=resets, low_mfu_threshold=low_mfu_threshold)


def _malformed_counts(follower: RunFollower) -> dict[Path, int]:
    """Malformed lines per file over everything the follower read: its reader's streams and the hours it reads
    itself (every phases hour, the newest GPU hour), whose problems a caller may no longer hold."""
    counts = follower.dashboard.malformed_counts()
    for store in (follower.phases, follower.gpu_newest):
        if store is not None:
            counts.update(store.malformed_counts())
    return counts


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
