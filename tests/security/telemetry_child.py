"""The telemetry fuzzer's child side: a run's ``dashboard/`` read by every reader a user's command runs.

:func:`load_telemetry` reads one case run twice with one cache directory: cold
(each hour decoded, settled hours saved) and warm (hours restored from the
cache, metrics from theirs). Each pass does what the monitor does (the stream
watch's follower and telemetry rules, the GPU view's and the engines view's
computations for the whole run and a live window, as ``compute_screen`` and
``engines_screen`` do in their workers), what an older follower of every stream
does (``DashboardReader`` with all streams, the legacy flat files among them),
what ``report`` does (``build_report``, rendered and as JSON) and what
``export --metrics`` does (the document, and written as it is built). The
scanner is used or not as the process's ``MILES_TUI_NO_SCANNER`` says.

It returns what the views hold (lanes, engines, phase spans, metric keys, records
and malformed lines per file), so the parent can check that no bad line blanked
what the good lines show and that both decoders agree; it raises AssertionError
when a problem does not name its file or the two passes disagree.
"""

from __future__ import annotations

import io
import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from miles_tui.core.analysis import sampling_interval, scrape_interval
from miles_tui.core.analysis.compute_view import compute_view
from miles_tui.core.analysis.engine_view import engine_view
from miles_tui.core.commands.export import metrics_export, write_metrics_export
from miles_tui.core.commands.report import build_report, render_report
from miles_tui.core.dump import RunDir
from miles_tui.core.telemetry import (
    WINDOWS,
    DashboardReader,
    EngineSample,
    EngineTable,
    TelemetryColumns,
    TimeWindow,
    bin_count,
    frame,
    window_bounds,
)
from miles_tui.core.telemetry.streams import TELEMETRY_STREAMS
from miles_tui.core.telemetry.telemetry_columns import CELL_WIDTHS
from miles_tui.core.telemetry.time_bins import time_bins
from miles_tui.tui.runtime.stream_watch import StreamWatch

COUNTER_MARGIN_SECONDS = 120.0
"""As the engines view: a window's counters start this much earlier (a rate needs the scrape before)."""


def _named(problems: list[Any], run: Path) -> None:
    for problem in problems:
        path = getattr(problem, "path", None)
        if path is None or not str(path).startswith(str(run)) or str(path) not in str(problem):
            raise AssertionError(f"a problem that names no file of the run: {problem!r}"[:500])


def _compute(columns: TelemetryColumns, open_phases: Any, window: TimeWindow, now: float) -> dict[str, Any]:
    """What the GPU view's worker computes (``ComputeScreen._compute``), with a 100-cell strip."""
    width = 100
    extent = columns.time_range(everything=True) if window.span is None else columns.extent()
    first, newest = extent or (None, None)
    shown = frame(window, now, first, newest)
    since, until = shown.since, shown.until
    samples = None
    if newest is not None and until - since > 6 * 3600:
        interval = sampling_interval(columns.gpu_samples(newest - 600.0, newest))
        per_bin = (until - since) / bin_count(until - since, interval, width)
        cell = max((w for w in CELL_WIDTHS if w <= per_bin), default=None)
        if cell is not None:
            step = math.ceil(per_bin / cell) * cell
            start = math.floor(since / cell) * cell
            count = max(1, math.ceil((until - start) / step))
            samples = columns.gpu_cells(start, until, cell)
            bins = time_bins(start, start + count * step, count)
    if samples is None:
        samples = columns.gpu_samples(since, until)
        interval = sampling_interval(samples)
        bins = time_bins(since, until, bin_count(until - since, interval, width))
    if samples.cell is not None:
        spans, time = columns.phase_cells(bins, samples.cell, open_phases, now)
    else:
        spans, time = columns.phase_spans(since, until, open_phases), None
    view = compute_view(samples, spans, bins, now=now, frame=shown, interval=interval, time=time)
    banded = sum(1 for band in view.bands if np.nansum(band.share) > 0)
    return {"lanes": sorted(json.dumps(list(lane)) for lane in view.grid.lanes), "bands": banded}


def _engines(reader: DashboardReader, span: float | None, now: float) -> list[str]:
    """What the engines view's worker computes (``EnginesScreen._compute``): the engines shown."""
    if span is None:
        records = reader.records("engine_series")
    else:
        loaded = reader.loaded_records("engine_series")
        newest = max((r.ts for r in loaded if isinstance(r, EngineSample)), default=None)
        since = None if newest is None else newest - span - COUNTER_MARGIN_SECONDS
        records = reader.records("engine_series", since, None)
    table = EngineTable(records)
    first, last = table.time_range() or (None, None)
    start, until, _anchored = window_bounds(span, now, first, last)
    bins = time_bins(start, until, bin_count(until - start, scrape_interval(table), 100))
    view = engine_view(table, bins, now=now, span=span, anchored_to_data=_anchored)
    return sorted(str(block.addr) for block in view.engines)


def _one_pass(run: Path, now: float) -> dict[str, Any]:
    dashboard = run / "dashboard"
    watch = StreamWatch(RunDir(run))
    polls = [watch.poll_blocking(now), watch.poll_blocking(now + 1.0)]
    problems: list[Any] = [p for poll in polls for p in poll.delta.problems]
    advisories = [a.to_dict() for a in polls[-1].advisories]
    follower = watch.follower
    columns = TelemetryColumns(follower.dashboard)
    open_phases = follower.state().open_phases
    whole = _compute(columns, open_phases, TimeWindow(None, None), now)
    _compute(columns, open_phases, TimeWindow(WINDOWS[0], None), now)
    _compute(columns, open_phases, TimeWindow(WINDOWS[2], None), now)
    everything = {
        "gpu_samples": len(columns.gpu_samples(None, None).ts),
        "phase_spans": len(columns.phase_spans(None, None, open_phases).t0),
    }
    engines = _engines(follower.dashboard, None, now)
    _engines(follower.dashboard, WINDOWS[0], now)
    every = DashboardReader(dashboard)
    delta = every.poll()
    problems += delta.problems
    records = {stream: len(every.loaded_records(stream)) for stream in TELEMETRY_STREAMS}
    every.records("gpu_util", None, None)
    report = build_report(run, now)
    text = render_report(report)
    json.dumps(report.to_dict(), allow_nan=False)
    document = metrics_export(run, None, None)
    json.dumps(document, allow_nan=False)
    written = io.BytesIO()
    write_metrics_export(run, None, None, written)
    json.loads(written.getvalue())
    _named(problems, run)
    return {
        "lanes": whole["lanes"],
        "bands": whole["bands"],
        **everything,
        "engines": engines,
        "metric_keys": sorted(every.metrics.keys()),
        "records": records,
        "malformed": {str(k): v for k, v in every.malformed_counts().items()},
        "advisories": sorted(str(a.get("code")) for a in advisories),
        "report_lines": len(text.splitlines()),
    }


def load_telemetry(run: Path, now: float) -> dict[str, Any]:
    """Both passes' findings (see the module docstring); AssertionError when they disagree."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cold = _one_pass(run, now)
        warm = _one_pass(run, now)
    if cold != warm:
        differ = {k: (cold[k], warm[k]) for k in cold if cold[k] != warm[k]}
        raise AssertionError(f"the cached read differs from the first: {differ}"[:2000])
    cold["warnings"] = sorted({f"{w.category.__name__}: {w.message}"[:200] for w in caught})
    return cold
