"""Typed records of the ``dashboard/`` files (meta.json and the telemetry streams), and their decoders.

Contract: a decoder takes one parsed JSON value (what ``json.loads`` returned
for one line) and returns a frozen record holding the raw values, or raises a
``ValueError``/``KeyError`` that says which field is missing or mistyped (the
tail reports it as a malformed line, with file and byte offset). Fields a
stream may omit are None; fields this version does not know are ignored.
Decoders never read files, never round and never format. The metrics stream
is columnar and lives in :mod:`miles_tui.core.telemetry.metrics.metric_store`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

OPEN_T1: Final = -1
"""A phase's ``t1`` while it is still running."""


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase of one rank (``phases/``): a span of time spent doing one thing."""

    name: str
    """What was done: ``rollout``, ``actor_train``, ``train_wait``, ``update_weights`` ..."""
    t0: float
    """Start (seconds since the epoch)."""
    t1: float
    """End, or -1 while still open; a closing record with the same name, node, rank and t0 follows."""
    node: str | None
    """Host the rank runs on."""
    gpus: tuple[Any, ...]
    """GPU indices on that host (empty for CPU-side actors)."""
    rank: Any
    """Global rank (-1 for actors outside the training ranks)."""
    role: str | None
    """``train``, ``rollout_manager`` ..."""

    @property
    def is_open(self) -> bool:
        """Whether this is an open marker (``t1 == -1``)."""
        return self.t1 == OPEN_T1

    @property
    def key(self) -> tuple[str, str | None, Any, float]:
        """(name, node, rank, t0): what an open marker and its closing record share."""
        return self.name, self.node, self.rank, self.t0


@dataclass(frozen=True, slots=True)
class GpuUtil:
    """One GPU sample (``gpu_util/``)."""

    ts: float
    """When sampled."""
    node: str
    """Host."""
    gpu: Any
    """GPU index on the host."""
    util: Any
    """Utilization in percent."""
    mem_mb: Any
    """Memory used, MB."""
    power_w: Any
    """Power draw, W."""


@dataclass(frozen=True, slots=True)
class EngineSample:
    """One inference-engine metric sample (``engine_series/``)."""

    ts: float
    """When sampled."""
    addr: str | None
    """Engine address."""
    metric: str
    """Metric name."""
    labels: Mapping[str, Any]
    """Metric labels."""
    value: Any
    """The value as logged."""


@dataclass(frozen=True, slots=True)
class TrajectoryEvent:
    """One event in a sample's generation (``trajectories/``)."""

    ts: float
    """When it happened."""
    kind: str
    """What happened."""
    sample_index: Any
    """The sample."""
    group_index: Any
    """Its GRPO group."""
    turn: Any
    """Generation turn."""
    weight_version: Any
    """Engine weight version of the turn."""
    detail: Any
    """Free-form detail, as logged."""


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One process seen on a GPU (``gpu_processes/``)."""

    ts: float
    """When seen."""
    node: str
    """Host."""
    gpu: Any
    """GPU index on the host."""
    pid: Any
    """Process id."""
    name: str | None
    """Process name."""
    mem_mb: Any
    """GPU memory it holds, MB."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One ``topology.jsonl`` or ``data_buffer.jsonl`` record, kept whole."""

    ts: float | None
    """Its ``ts`` when it has a numeric one."""
    data: Mapping[str, Any]
    """The record as parsed."""


StreamRecord: TypeAlias = Phase | GpuUtil | EngineSample | TrajectoryEvent | GpuProcess | Snapshot
"""A record of any telemetry stream except metrics."""


def _shared(value: Any) -> Any:
    """One copy of a string that repeats on every line (host, phase name, role), not one per record."""
    return sys.intern(value) if type(value) is str else value


SHARED_GPU_LISTS: Final = 4096
"""Distinct GPU lists :func:`_gpu_list` keeps one copy of (past it the table starts afresh)."""

_gpu_lists: dict[tuple[Any, ...], tuple[Any, ...]] = {}


MAX_TEXT: Final = 256
"""Longest name (phase, host, role, address, metric, label) a record may carry."""
MAX_INDEX: Final = 1 << 20
"""A GPU index or rank is an int of magnitude under this."""
MAX_TIME: Final = float(2**34)
"""A time is seconds since the epoch in ``[0, MAX_TIME)`` (before the year 2514): a finite number outside is no
time a writer meant, and it would overflow the bucket and bin arithmetic and every date shown."""
TIME_REASON: Final = "is not a time (seconds since the epoch, from 0 to 2**34)"
"""What a malformed line's reason says of a field that is no time (NaN, Infinity, 1e300, -5, a string)."""
MAX_GPUS: Final = 64
MAX_LABELS: Final = 32


def _gpu_list(value: Any) -> tuple[Any, ...]:
    """A phase's GPU list as a tuple, one copy per distinct list: every phase of a rank names the same GPUs.

    A run holds its phases for hours; a tuple per record was a third of a phase's memory. Only lists of
    plain ints are shared ((1,) and (1.0,) are equal keys, but not the same value).
    """
    if value is not None and (not isinstance(value, list) or len(value) > MAX_GPUS):
        raise ValueError(f"field 'gpus' is not a list of at most {MAX_GPUS} GPU indices")
    gpus = tuple(value or ())
    if not all(type(gpu) is int and -MAX_INDEX < gpu < MAX_INDEX for gpu in gpus):
        raise ValueError("field 'gpus' holds something other than GPU indices")
    known = _gpu_lists.get(gpus)
    if known is not None:
        return known
    if len(_gpu_lists) >= SHARED_GPU_LISTS:
        _gpu_lists.clear()
    _gpu_lists[gpus] = gpus
    return gpus


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _number(record: Mapping[str, Any], field: str) -> float:
    value = record[field]
    if type(value) not in (int, float):
        raise ValueError(f"field {field!r} is not a number: {value!r}"[:200])
    return value  # type: ignore[no-any-return]


def is_time(value: float, *, open_marker: bool = False) -> bool:
    """Whether a number is a time (see :data:`MAX_TIME`), or with ``open_marker`` the open phase's -1."""
    return 0 <= value < MAX_TIME or (open_marker and value == OPEN_T1)


def _time(record: Mapping[str, Any], field: str, *, open_marker: bool = False) -> float:
    """A time (NaN or Infinity, which json.loads reads, would blank every view's axis; 1e300 overflow its bins)."""
    value = _number(record, field)
    if not is_time(value, open_marker=open_marker):
        raise ValueError(f"field {field!r} {TIME_REASON}")
    return value


def _text(record: Mapping[str, Any], field: str, *, nullable: bool = True) -> str | None:
    """A name used as a key or a label: a short string (or null where the stream may omit it); a list or an
    object there would break every table keyed by it, and a megabyte string every line drawn."""
    value = record.get(field) if nullable else record[field]
    if value is None and nullable:
        return None
    if type(value) is not str or len(value) > MAX_TEXT:
        wanted = "a string" + (" or null" if nullable else "")
        raise ValueError(f"field {field!r} is not {wanted} of at most {MAX_TEXT} characters")
    return sys.intern(value)


def _name(record: Mapping[str, Any], field: str) -> str:
    """A required name (see :func:`_text`)."""
    value = _text(record, field, nullable=False)
    assert value is not None
    return value


def _index(record: Mapping[str, Any], field: str, *, required: bool = False) -> Any:
    """A GPU index or a rank: a small int (or null): no attacker-chosen key that hashes alike."""
    value = record[field] if required else record.get(field)
    if value is None and not required:
        return None
    if type(value) is not int or not -MAX_INDEX < value < MAX_INDEX:
        raise ValueError(f"field {field!r} is not an index (an int of magnitude under {MAX_INDEX})")
    return value


def short_label(value: Any) -> bool:
    """Whether a label's value is a short scalar: a string of at most :data:`MAX_TEXT` characters, a float, a
    bool, null, or an int of magnitude under :data:`MAX_INDEX` (label sets key the engines' series, and ints
    k·(2**61−1) all hash alike)."""
    kind = type(value)
    if kind is str:
        return len(value) <= MAX_TEXT
    if kind is int:
        return bool(-MAX_INDEX < value < MAX_INDEX)
    return kind in (float, bool) or value is None


def decode_phase(value: Any) -> Phase:
    """A ``phases/`` line."""
    r = _object(value)
    return Phase(
        _name(r, "name"), _time(r, "t0"), _time(r, "t1", open_marker=True), _text(r, "node"),
        _gpu_list(r.get("gpus")), _index(r, "rank"), _text(r, "role"),
    )  # fmt: skip


def decode_gpu_util(value: Any) -> GpuUtil:
    """A ``gpu_util/`` line."""
    r = _object(value)
    node = _name(r, "node")
    return GpuUtil(
        _time(r, "ts"), node, _index(r, "gpu", required=True), r.get("util"), r.get("mem_mb"), r.get("power_w")
    )


def decode_engine_sample(value: Any) -> EngineSample:
    """An ``engine_series/`` line."""
    r = _object(value)
    labels = r.get("labels") or {}
    if not isinstance(labels, dict) or len(labels) > MAX_LABELS:
        raise ValueError(f"field 'labels' is not an object of at most {MAX_LABELS} labels")
    for key, item in labels.items():
        if len(key) > MAX_TEXT or not short_label(item):
            raise ValueError(f"label {key[:40]!r} is not a short scalar")
    return EngineSample(
        _time(r, "ts"),
        _text(r, "addr"),
        _name(r, "metric"),
        labels,
        r.get("value"),
    )


def decode_trajectory_event(value: Any) -> TrajectoryEvent:
    """A ``trajectories/`` line."""
    r = _object(value)
    return TrajectoryEvent(
        _number(r, "ts"), _shared(r["kind"]), r.get("sample_index"), r.get("group_index"), r.get("turn"),
        r.get("weight_version"), r.get("detail"),
    )  # fmt: skip


def decode_gpu_process(value: Any) -> GpuProcess:
    """A ``gpu_processes/`` line."""
    r = _object(value)
    return GpuProcess(_number(r, "ts"), _shared(r["node"]), r["gpu"], r["pid"], _shared(r.get("name")), r.get("mem_mb"))


def decode_snapshot(value: Any) -> Snapshot:
    """A ``topology.jsonl`` / ``data_buffer.jsonl`` line: an object with a numeric ``ts``, as miles writes both (a
    line without one is malformed, never held: a file of empty objects cost the monitor 1 GB)."""
    r = _object(value)
    ts = r.get("ts")
    if type(ts) not in (int, float):
        raise ValueError("no numeric ts")
    return Snapshot(ts, r)


@dataclass(frozen=True)
class RunMeta:
    """``dashboard/meta.json``: the current attempt's description of the run."""

    run_name: str | None
    """The run's name."""
    start_ts: float | None
    """When the current attempt started; a resumed run rewrites it (None: absent, or no time, as NaN, which
    every open phase would compare false with, so none would count as open)."""
    args: Mapping[str, Any]
    """The run's arguments, as written."""
    schema_version: Any
    """The dashboard schema version."""
    raw: Mapping[str, Any]
    """The whole file as parsed, including keys this version does not know."""


def decode_meta(value: Any) -> RunMeta:
    """Parsed meta.json -> RunMeta; raises ValueError when it is not an object."""
    value = _object(value)
    start = value.get("start_ts")
    args = value.get("args")
    return RunMeta(
        run_name=value.get("run_name"),
        start_ts=start if type(start) in (int, float) and is_time(start) else None,
        args=args if isinstance(args, dict) else {},
        schema_version=value.get("schema_version"),
        raw=value,
    )


DECODERS: Final[Mapping[str, Callable[[Any], StreamRecord]]] = {
    "phases": decode_phase,
    "gpu_util": decode_gpu_util,
    "engine_series": decode_engine_sample,
    "trajectories": decode_trajectory_event,
    "gpu_processes": decode_gpu_process,
    "topology": decode_snapshot,
    "data_buffer": decode_snapshot,
}
"""Stream name -> decoder, for every telemetry stream except metrics."""


def record_time(record: StreamRecord) -> float | None:
    """The time a record belongs to: a phase's end (its start while open), otherwise its ts."""
    if isinstance(record, Phase):
        return record.t0 if record.is_open else record.t1
    return record.ts


def record_span(record: StreamRecord) -> tuple[float, float] | None:
    """The earliest and latest time a record mentions (a closed phase spans t0..t1)."""
    if isinstance(record, Phase):
        return (record.t0, record.t0) if record.is_open else (min(record.t0, record.t1), max(record.t0, record.t1))
    return None if record.ts is None else (record.ts, record.ts)
