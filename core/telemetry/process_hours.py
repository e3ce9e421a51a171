"""``gpu_processes/``: the processes holding GPU memory at one moment, read one hour at a time.

Contract:

- :class:`ProcessHours` follows the stream through
  :class:`~miles_tui.core.telemetry.hours.store.HourStore` (each hour parsed once, with the user cache; memory
  follows the hour asked for). :meth:`ProcessHours.at` reads only the hour holding the time asked for (and the
  flat ``gpu_processes.jsonl`` of an older run, when there is one) and hands out, per lane asked for, the
  processes of the snapshot nearest that time within :data:`NEAREST_SECONDS` (miles' hover rule: snapshots are
  coarser than the util series), largest memory first, at most :data:`MAX_PROCESSES` a lane.
- Thread-safe (one lock); meant for a worker thread. Never writes into the run, never formats.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from miles_tui.core.telemetry.gpu_samples import Lane, _hashable
from miles_tui.core.telemetry.hours.store import HourStore
from miles_tui.core.telemetry.partitions import HOUR_SECONDS
from miles_tui.core.telemetry.record_table import TAG_INT

STREAM: Final = "gpu_processes"

NEAREST_SECONDS: Final = 600.0
"""A snapshot further than this from the time asked for is not "at" it."""

MAX_PROCESSES: Final = 8
"""Processes kept per lane (largest memory first)."""


@dataclass(frozen=True)
class GpuProcessRow:
    """One process on one GPU in one snapshot."""

    pid: int | None
    """Process id (None when not a number)."""
    name: str | None
    """Process name, as logged (untrusted)."""
    mem_mb: float
    """GPU memory it holds, MB (NaN when not a number)."""


@dataclass(frozen=True)
class LaneProcesses:
    """The processes of one lane at one snapshot."""

    lane: Lane
    """(node, gpu)."""
    ts: float | None
    """The snapshot's time (None: no snapshot near enough)."""
    processes: tuple[GpuProcessRow, ...]
    """Largest memory first, at most :data:`MAX_PROCESSES`."""
    more: int = 0
    """Processes of the snapshot left out."""


class ProcessHours:
    """See the module docstring."""

    def __init__(self, dashboard: Path | str, *, workers: int = 0, nice: int = 0) -> None:
        self._lock = threading.Lock()
        self._store = HourStore(dashboard, STREAM, keep_columns=False, workers=workers, nice=nice)

    def exists(self) -> bool:
        """Whether the run has any ``gpu_processes`` file."""
        with self._lock:
            self._store.refresh(newest=True)
            return bool(self._store.partitions())

    def at(self, when: float, lanes: Sequence[Lane]) -> tuple[LaneProcesses, ...]:
        """Per lane of ``lanes`` (in order): its processes at the snapshot nearest ``when``."""
        with self._lock:
            self._store.refresh(when, when)
            columns = self._store.columns(when, when)
        ts = columns.numbers["ts"]
        near = np.abs(ts - when) <= min(NEAREST_SECONDS, HOUR_SECONDS)
        node, gpu, name = columns.codes["node"], columns.codes["gpu"], columns.codes["name"]
        values = columns.values
        rows: dict[Lane, list[int]] = {}
        for row in np.flatnonzero(near).tolist():
            lane = (_hashable(values[node[row]]), _hashable(values[gpu[row]]))
            rows.setdefault(lane, []).append(row)
        out = []
        for lane in lanes:
            try:
                found = rows.get(lane, [])
            except TypeError:
                found = []
            out.append(_snapshot(lane, found, ts, when, columns.numbers, columns.tags, name, values))
        return tuple(out)


def _snapshot(
    lane: Lane,
    rows: list[int],
    ts: np.ndarray,
    when: float,
    numbers: Any,
    tags: Any,
    name: np.ndarray,
    values: tuple[Any, ...],
) -> LaneProcesses:
    """The lane's processes at its snapshot nearest ``when`` (rows: the lane's rows near enough)."""
    if not rows:
        return LaneProcesses(lane, None, ())
    picked = np.array(rows)
    nearest = float(ts[picked][np.argmin(np.abs(ts[picked] - when))])
    picked = picked[ts[picked] == nearest]
    mem = np.where(tags["mem_mb"][picked] <= TAG_INT, numbers["mem_mb"][picked], np.nan)
    order = np.argsort(-np.nan_to_num(mem, nan=-1.0), kind="stable")
    kept = []
    for i in order[:MAX_PROCESSES].tolist():
        row = int(picked[i])
        pid = int(numbers["pid"][row]) if tags["pid"][row] == TAG_INT else None
        label = values[name[row]]
        kept.append(GpuProcessRow(pid, label if isinstance(label, str) else None, float(mem[i])))
    return LaneProcesses(lane, nearest, tuple(kept), max(len(picked) - MAX_PROCESSES, 0))
