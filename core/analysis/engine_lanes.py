"""Which GPUs serve which engine (``topology.jsonl``), and each engine's running requests over a window.

Contract:

- :func:`engine_gpus` reads miles' topology snapshots (``{"ts", "engines":
  [{"addr", "gpus": [[node, gpu], ...], ...}]}``; snapshot N holds until
  snapshot N+1): every GPU any snapshot in force during [since, until] gave
  each engine, as (node, gpu) lanes in natural order. A snapshot without a
  numeric ``ts``, an engine without an address, a GPU that is not a
  ``[node, gpu]`` pair are left out (and counted in ``skipped``).
- :func:`engine_activity` gives per engine the running-requests gauge
  (``sglang_num_running_reqs``, DP ranks and label sets summed) binned to
  the mean of the scrapes in each bin (NaN: none), its newest value in the
  window and the lanes the topology gives it (empty: the topology names no
  GPU of it). Engines the topology names but that sent no scrape are listed
  too, with no values.
- Pure: records in, arrays out; never reads files, never formats.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from miles_tui.core.analysis.engine_metrics import Points, binned, latest
from miles_tui.core.telemetry import RUNNING, EngineTable, FloatArray, natural_key
from miles_tui.core.telemetry.stream_records import Snapshot

Lane = tuple[str, int]


@dataclass(frozen=True)
class EngineGpus:
    """The topology of a window."""

    lanes: Mapping[str, tuple[Lane, ...]]
    """Engine address -> the (node, gpu) lanes serving it."""
    skipped: int
    """Snapshot parts left out as unreadable."""


@dataclass(frozen=True, eq=False)
class EngineActivity:
    """One engine's row over the GPU lanes."""

    addr: str | None
    """Engine address."""
    lanes: tuple[Lane, ...]
    """The GPUs serving it (topology)."""
    running: FloatArray
    """Per bin: mean running requests of the scrapes there (NaN: none)."""
    latest: float | None
    """The newest value in the window."""


def _lane(pair: Any) -> Lane | None:
    if isinstance(pair, list | tuple) and len(pair) == 2 and isinstance(pair[0], str):
        gpu = pair[1]
        if type(gpu) is int and 0 <= gpu < 1 << 16:
            return pair[0], gpu
    return None


def engine_gpus(snapshots: Iterable[Snapshot], since: float, until: float) -> EngineGpus:
    """See the module docstring."""
    timed = sorted((s for s in snapshots if s.ts is not None), key=lambda s: s.ts or 0.0)
    skipped = 0
    lanes: dict[str, set[Lane]] = {}
    for index, snapshot in enumerate(timed):
        ends = timed[index + 1].ts if index + 1 < len(timed) else None
        if (snapshot.ts or 0.0) > until or (ends is not None and ends < since):
            continue  # not in force during the window
        engines = snapshot.data.get("engines")
        if not isinstance(engines, list):
            skipped += 1
            continue
        for engine in engines:
            addr = engine.get("addr") if isinstance(engine, dict) else None
            gpus = engine.get("gpus") if isinstance(engine, dict) else None
            if not isinstance(addr, str) or not isinstance(gpus, list):
                skipped += 1
                continue
            into = lanes.setdefault(addr, set())
            for pair in gpus:
                lane = _lane(pair)
                if lane is None:
                    skipped += 1
                else:
                    into.add(lane)
    ordered = {
        addr: tuple(sorted(found, key=lambda lane: (natural_key(lane[0]), lane[1]))) for addr, found in lanes.items()
    }
    return EngineGpus(ordered, skipped)


def engine_activity(table: EngineTable, edges: FloatArray, gpus: EngineGpus) -> tuple[EngineActivity, ...]:
    """See the module docstring (``edges``: the window's bin edges)."""
    since, until = float(edges[0]), float(edges[-1])
    rows: list[EngineActivity] = []
    by_addr: dict[str | None, list[tuple[FloatArray, float | None]]] = {}
    for one in table.series(RUNNING):  # a label set each (a PD engine's prefill and decode sides): summed
        points = Points(one.ts, one.value, np.ones(len(one.ts)))
        by_addr.setdefault(one.addr, []).append((binned(edges, points), latest(points, since, until)))
    for addr, parts in by_addr.items():
        stacked = np.vstack([values for values, _ in parts])
        running = np.where(np.isfinite(stacked).any(axis=0), np.nansum(stacked, axis=0), np.nan)
        newest = [value for _, value in parts if value is not None]
        lanes = gpus.lanes.get(addr, ()) if addr is not None else ()
        rows.append(EngineActivity(addr, lanes, running, sum(newest) if newest else None))
    seen = set(by_addr)
    for addr, lanes in gpus.lanes.items():
        if addr not in seen:
            rows.append(EngineActivity(addr, lanes, np.full(len(edges) - 1, np.nan), None))
    return tuple(sorted(rows, key=lambda row: natural_key(row.addr or "")))
