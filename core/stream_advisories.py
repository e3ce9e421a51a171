"""Advisories from the ``dashboard/`` telemetry: alarms about a live run, then MFU tuning advice.

Contract:

- Every rule is a small pure function of already-parsed values (phase records,
  engine samples, metric values, stream problems) and, where the answer
  depends on the clock, ``now`` passed in. It returns zero or more
  :class:`~core.advisories.Advisory` with a stable code. Rules never read
  files, never read the clock and never poll.
- :func:`stream_advisories` collects each rule's input from a
  :class:`~core.run_state.RunFollower` that the caller has already polled,
  and returns alarms first, tuning advice last. It reads only what the
  follower holds in memory.
- The thresholds are the module constants below. Engine metric names are
  normalized (``sglang:x`` from a raw engine equals ``sglang_x`` from the
  router aggregation, as miles' scraper writes them).

| code | level | fires when |
|---|---|---|
| ``stalled_phase`` | critical | a phase of the current attempt is open > max(6 × median closed duration, 30 min) |
| ``no_new_data`` | warning / critical | data age > max(5 × median step interval, 10 min) / > max(20 ×, 2 h) |
| ``engine_abort_storm`` | warning | aborted > 5 % of ≥ 100 engine requests in the last 30 min of engine data |
| ``kv_cache_pegged`` | warning | KV usage ≥ 95 % in ≥ 75 % of the window while running requests < ¼ of the cap |
| ``malformed_stream_lines`` | warning | complete stream lines that do not parse (per file: count, first byte offset) |
| ``stream_reset`` / ``stream_unreadable`` | warning | a stream file rewritten under the reader / not readable |
| ``low_mfu`` | warning | mean ``perf/actor_train_mfu`` < 15 % over ≥ 3 steps (the first, warm-up, step left out) |
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Final

from core.advisories import Advisory, Level, ordered
from core.errors import StreamError
from core.metrics import MetricStore
from core.run_state import RunFollower
from core.stream_records import EngineSample, Phase
from core.tail import MalformedLineError, StreamReset

STALL_FACTOR: Final = 6.0
"""An open phase is stalled past this many times the median duration of its closed runs ..."""
STALL_MIN_OPEN_S: Final = 1800.0
"""... and never before it has been open this long (short phases would false-positive)."""
STALL_MIN_CLOSED: Final = 3
"""Closed runs of a phase needed for a baseline; phases open by design never close and are not judged."""

ENGINE_WINDOW_S: Final = 1800.0
"""Engine rules judge the last this-many seconds before the newest engine sample (not the wall clock:
when the engines die the window must not slide past their data)."""
ABORT_RATIO: Final = 0.05
"""Aborted requests above this fraction of all requests in the window are a storm ..."""
ABORT_MIN_REQUESTS: Final = 100.0
"""... once the window holds at least this many requests (1 of 12 aborted is no storm)."""

KV_PEGGED_USAGE: Final = 0.95
"""KV cache usage (fraction of the token pool) counted as pegged."""
KV_PEGGED_SHARE: Final = 0.75
"""Share of an engine's usage samples in the window that must be pegged."""
KV_LOW_RUNNING_RATIO: Final = 0.25
"""Running requests below this fraction of the cap (or of the peak seen) count as low concurrency."""
KV_MIN_SAMPLES: Final = 5
"""Usage samples an engine needs in the window to be judged."""

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
STEP_KEYS: Final = ("train/step", "rollout/step")
"""Step keys whose record times give the usual interval, in order of preference."""

REQUEST_COUNTERS: Final = frozenset({"sglang_num_requests_total", "sglang_num_requests"})
"""Cumulative counters of requests an engine finished (``_total`` may be stripped by a Prometheus parser)."""
ABORT_COUNTERS: Final = frozenset({"sglang_num_aborted_requests_total", "sglang_num_aborted_requests"})
"""Cumulative counters of requests an engine aborted."""
RUNNING_GAUGES: Final = frozenset({"sglang_num_running_reqs"})
"""Requests running on an engine now."""
TOKEN_USAGE_GAUGES: Final = frozenset({"sglang_token_usage"})
"""Used fraction of an engine's KV token pool (a percent series is detected and scaled)."""

_STALL_HINTS: Final = {
    "train_wait": "training is starved of rollout data: check the engines and the data buffer",
    "rollout": "check the inference engines (aborts, KV cache) and the reward / agent side",
    "actor_train": "check the training ranks for a hung collective, an OOM or a lost node",
    "update_weights": "weight sync is hanging: check the engines and the NCCL group between them and the trainer",
}

Points = list[tuple[float, float]]


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


def _where(phase: Phase) -> str:
    node = phase.node or "?"
    if phase.rank is None or phase.rank == -1:
        return f"{node} ({phase.role})" if phase.role else node
    return f"{node} rank {phase.rank}"


def stalled_phases(phases: Iterable[Phase], attempt_start: float | None, now: float) -> list[Advisory]:
    """Phases open far beyond their usual duration, one critical advisory per phase name.

    ``phases`` are raw records: open markers (``t1 == -1``) and closing records.
    A marker whose closing record (same name, node, rank, t0) is present is not
    open. Only the current attempt counts: records that start before
    ``attempt_start`` (meta.json's ``start_ts``) belong to an attempt that died
    and are neither open nor part of the baseline.
    """
    current = [p for p in phases if attempt_start is None or p.t0 >= attempt_start]
    closed_keys = {p.key for p in current if not p.is_open}
    durations: dict[str, list[float]] = {}
    open_markers: dict[tuple[object, ...], Phase] = {}
    for phase in current:
        if not phase.is_open:
            durations.setdefault(phase.name, []).append(max(phase.t1 - phase.t0, 0.0))
        elif phase.key not in closed_keys:
            open_markers[phase.key] = phase
    out = []
    for name in sorted({p.name for p in open_markers.values()}):
        closed = durations.get(name, [])
        if len(closed) < STALL_MIN_CLOSED:
            continue
        usual = statistics.median(closed)
        limit = max(STALL_FACTOR * usual, STALL_MIN_OPEN_S)
        stuck = sorted((p for p in open_markers.values() if p.name == name and now - p.t0 > limit), key=lambda p: p.t0)
        if not stuck:
            continue
        age = now - stuck[0].t0
        where = ", ".join(_where(p) for p in stuck[:3]) + (f" and {len(stuck) - 3} more" if len(stuck) > 3 else "")
        times = f", {age / usual:.0f}× its usual {_duration(usual)}" if usual > 0 else ""
        message = (
            f"phase '{name}' has been open for {_duration(age)} on {where}{times} "
            f"(median of {len(closed)} closed this attempt): the run is stalled there, not slow"
        )
        if name in _STALL_HINTS:
            message += f"; {_STALL_HINTS[name]}"
        out.append(Advisory(Level.CRITICAL, "stalled_phase", message))
    return out


def _series(samples: Iterable[EngineSample], names: frozenset[str], *, by_labels: bool) -> dict[Any, Points]:
    """Numeric samples of the named metrics, per engine (and label set), ordered by time."""
    out: dict[Any, Points] = {}
    for sample in samples:
        value = _number(sample.value)
        if value is None or sample.metric.replace(":", "_") not in names:
            continue
        key: Any = sample.addr
        if by_labels:
            key = (sample.addr, tuple(sorted((str(k), str(v)) for k, v in sample.labels.items())))
        out.setdefault(key, []).append((sample.ts, value))
    for points in out.values():
        points.sort(key=lambda point: point[0])
    return out


def _edge(*groups: Mapping[Any, Points]) -> float | None:
    return max((points[-1][0] for group in groups for points in group.values() if points), default=None)


def counter_increase(points: Sequence[tuple[float, float]], since: float = -math.inf) -> float:
    """How much a cumulative counter grew over the intervals ending at or after ``since``.

    A drop means the engine restarted and the counter began again from 0, so
    that interval adds the new value (Prometheus' ``increase`` rule).
    """
    total = 0.0
    for (_, before), (ts, after) in pairwise(points):
        if ts >= since:
            total += after - before if after >= before else after
    return total


def abort_storm(samples: Sequence[EngineSample], args: Mapping[str, Any]) -> list[Advisory]:
    """Many engine requests aborted in the last :data:`ENGINE_WINDOW_S` of engine data.

    Reads the counters in :data:`REQUEST_COUNTERS` and :data:`ABORT_COUNTERS`
    (``sglang:num_requests_total`` / ``sglang:num_aborted_requests_total`` and
    their ``sglang_`` spellings), taking each series' increase.
    """
    requests = _series(samples, REQUEST_COUNTERS, by_labels=True)
    aborts = _series(samples, ABORT_COUNTERS, by_labels=True)
    edge = _edge(requests, aborts)
    if edge is None:
        return []
    since = edge - ENGINE_WINDOW_S
    total = sum(counter_increase(points, since) for points in requests.values())
    per_engine: dict[Any, float] = {}
    for (addr, _), points in aborts.items():
        per_engine[addr] = per_engine.get(addr, 0.0) + counter_increase(points, since)
    aborted = sum(per_engine.values())
    if total < ABORT_MIN_REQUESTS or aborted <= ABORT_RATIO * total:
        return []
    message = (
        f"{aborted:.0f} of {total:.0f} engine requests ({aborted / total:.0%}) were aborted in the "
        f"{_duration(ENGINE_WINDOW_S)} up to the newest engine sample"
    )
    if len(per_engine) > 1:
        worst = max(per_engine, key=lambda addr: per_engine[addr])
        message += f", {per_engine[worst]:.0f} of them on {worst}"
    message += ": requests are timing out or being cancelled, and their samples are lost"
    group = _number(args.get("n_samples_per_prompt"))
    if group is not None and group > 1:
        message += f" (with {group:g} samples per prompt one abort can cost a whole group)"
    message += "; check engine health and the request timeout before tuning anything else"
    return [Advisory(Level.WARNING, "engine_abort_storm", message)]


def kv_cache_pegged(samples: Sequence[EngineSample], args: Mapping[str, Any]) -> list[Advisory]:
    """KV cache full for most of the last :data:`ENGINE_WINDOW_S` while few requests run.

    Reads :data:`TOKEN_USAGE_GAUGES` (``sglang:token_usage``) and
    :data:`RUNNING_GAUGES` (``sglang:num_running_reqs``) per engine. Low means
    below :data:`KV_LOW_RUNNING_RATIO` of ``--sglang-max-running-requests``
    when the run recorded it, else of the most requests any engine ran in
    ``samples``.
    """
    usage = _series(samples, TOKEN_USAGE_GAUGES, by_labels=False)
    running = _series(samples, RUNNING_GAUGES, by_labels=False)
    edge = _edge(usage, running)
    if edge is None or not running:
        return []
    since = edge - ENGINE_WINDOW_S
    cap = _number(args.get("sglang_max_running_requests"))
    seen = max(value for points in running.values() for _, value in points)
    reference = cap if cap is not None and cap > 0 else seen
    if reference <= 0:
        return []
    hits = []
    for addr in sorted(usage, key=str):
        used = [value for ts, value in usage[addr] if ts >= since]
        busy = [value for ts, value in running.get(addr, []) if ts >= since]
        if len(used) < KV_MIN_SAMPLES or not busy:
            continue
        scale = 100.0 if max(used) > 1.0 else 1.0
        share = sum(value / scale >= KV_PEGGED_USAGE for value in used) / len(used)
        if share >= KV_PEGGED_SHARE and max(busy) < KV_LOW_RUNNING_RATIO * reference:
            hits.append((addr, share, max(busy)))
    if not hits:
        return []
    addr, share, peak = max(hits, key=lambda hit: hit[1])
    engines = f"engine {addr}" if len(hits) == 1 else f"{len(hits)} engines (worst {addr})"
    of = f"--sglang-max-running-requests ({cap:g})" if reference == cap else f"the {seen:g} seen at peak"
    mem = _number(args.get("sglang_mem_fraction_static"))
    message = (
        f"KV cache of {engines} was at least {KV_PEGGED_USAGE:.0%} full for {share:.0%} of the last "
        f"{_duration(ENGINE_WINDOW_S)} of engine samples while at most {peak:g} requests ran, under a quarter "
        f"of {of}: concurrency is bound by KV memory, not by the request cap. The cache is too small for these "
        f"context lengths: raise --sglang-mem-fraction-static{f' (now {mem:g})' if mem is not None else ''}, "
        "shorten the contexts or add engines; lowering the request cap will not help"
    )
    return [Advisory(Level.WARNING, "kv_cache_pegged", message)]


def mfu_summary(values: Sequence[float], peak_tflops: float | None = None) -> MfuSummary | None:
    """MFU per step in log order -> its summary without the first (warm-up) step; None without steps.

    Values above 1 mean the series is in percent; the summary is in fractions.
    """
    finite = [float(v) for v in values if math.isfinite(v)]
    steady = [float(v) for v in values[1:] if math.isfinite(v)]
    if not steady:
        return None
    scale = 100.0 if max(finite) > 1.0 else 1.0
    return MfuSummary(steady[-1] / scale, sum(steady) / len(steady) / scale, len(steady), peak_tflops)


def low_mfu(summary: MfuSummary | None, threshold: float = LOW_MFU) -> list[Advisory]:
    """Training computes slowly: mean MFU under ``threshold`` over at least :data:`MFU_MIN_STEPS` steps."""
    if summary is None or summary.steps < MFU_MIN_STEPS or summary.mean >= threshold:
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


def no_new_data(newest_write: float | None, record_times: Sequence[float], now: float, step_key: str) -> list[Advisory]:
    """Nothing written for much longer than the usual interval between ``step_key`` records.

    ``record_times`` are the record times of ``step_key``; fewer than
    :data:`NO_DATA_MIN_INTERVALS` intervals is too little history to judge.
    """
    times = sorted(t for t in record_times if math.isfinite(t))
    if newest_write is None or len(times) <= NO_DATA_MIN_INTERVALS:
        return []
    usual = statistics.median(b - a for a, b in pairwise(times))
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


def step_times(store: MetricStore) -> tuple[str, list[float]]:
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
            return step_key, series.ts.tolist()
    return "", []


def run_mfu(store: MetricStore, args: Mapping[str, Any]) -> MfuSummary | None:
    """The run's MFU summary: ``perf/actor_train_mfu`` and the newest ``perf/mfu_peak_tflops``
    (else the ``mfu_peak_tflops`` argument)."""
    series = store.series(MFU_KEY)
    if series is None:
        return None
    peaks = store.series(MFU_PEAK_KEY)
    logged = [p for p in (peaks.value.tolist() if peaks is not None else []) if math.isfinite(p) and p > 0]
    peak = logged[-1] if logged else _number(args.get("mfu_peak_tflops"))
    return mfu_summary(series.value.tolist(), peak)


def stream_advisories(
    follower: RunFollower,
    now: float,
    *,
    problems: Sequence[StreamError] = (),
    resets: Sequence[StreamReset] = (),
) -> list[Advisory]:
    """Every telemetry rule over what ``follower`` holds after its last poll, alarms first.

    ``problems`` and ``resets`` are what the caller's polls reported (a poll
    reports each once); malformed-line counts come from the reader's totals.
    """
    reader = follower.dashboard
    state = follower.state()
    args = reader.meta.args if reader.meta is not None else {}
    phases = [r for r in reader.loaded_records("phases") if isinstance(r, Phase)]
    engine = [r for r in reader.loaded_records("engine_series") if isinstance(r, EngineSample)]
    step_key, times = step_times(follower.metrics)
    alarms = [
        *stalled_phases(phases, state.attempt_start, now),
        *no_new_data(state.newest_write, times, now, step_key),
        *abort_storm(engine, args),
        *kv_cache_pegged(engine, args),
        *stream_corruption(problems, resets, reader.malformed_counts()),
    ]
    return ordered([*alarms, *low_mfu(run_mfu(follower.metrics, args))])
