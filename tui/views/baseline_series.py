"""The baselines' series for the metrics view's charts: blocking, for a thread.

Contract: :func:`overlay_series` gives, for each charted key, one
:class:`~miles_tui.tui.widgets.baseline_overlay.Overlay` per baseline in the
order added: the baseline's points of that key against the chart's own x key
(read from its metric store one key at a time, kept as a chart keeps a series,
and its whole series aligned on the run's kept steps: the legend's values are
exact at every cursor stop however long the baseline), or, when the run
is charted from its dumps, the baseline's ``dump/...`` series built the same
way from its step figures. A baseline that never logged a key gets an overlay
without a series (the legend says "not logged"). ``cancelled()`` is checked
between baselines.

:class:`OverlayReads` runs those reads for a screen one at a time: what is asked
while one runs is read once it ends, with what the screen has then (a long
baseline's read is never cancelled and restarted by every poll, so it ends).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from textual.screen import Screen

from miles_tui.core.analysis import ChartSeries, chart_series, dump_series
from miles_tui.core.analysis.baseline import AlignedSeries, align
from miles_tui.core.base.pacing import Pacer
from miles_tui.core.telemetry import MetricSeries
from miles_tui.tui.runtime.baseline_watch import Baseline
from miles_tui.tui.views.metric_lines import Source
from miles_tui.tui.views.overlay import Overlay

PAUSE_SHARE = 1.0
"""As the run's own series: a long baseline's read leaves the UI thread the GIL half of the time."""

MAX_PAUSE = 0.1

SPACING = 10.0
"""A read starts no sooner than this many times the last read's cost after it (<= ~10% of a core)."""


def _baseline_series(
    baseline: Baseline, runs: Mapping[str, MetricSeries], source: Source
) -> dict[str, tuple[ChartSeries, AlignedSeries]]:
    """Each key's baseline series as a chart keeps it, and its whole series aligned on the run's kept steps
    (exact at every step the cursor can stop on, however few points the chart keeps)."""
    if source == "dump":
        aggregates = tuple(dict(baseline.run.aggregates).values())  # a copy: its poll replaces entries meanwhile
        whole = {key: series for key, series in dump_series(aggregates).items() if key in runs}
        return {key: (chart_series(series), align(runs[key], series)) for key, series in whole.items()}
    out = {}
    pacer = Pacer(PAUSE_SHARE, MAX_PAUSE)
    for key, run in runs.items():
        series = baseline.run.metrics.series(key, run.x_key)
        if series is not None:
            out[key] = (chart_series(series), align(run, series))
        pacer.pause()
    return out


def overlay_series(
    baselines: Sequence[Baseline],
    runs: Mapping[str, MetricSeries],
    source: Source,
    cancelled: Callable[[], bool] = lambda: False,
) -> dict[str, tuple[Overlay, ...]] | None:
    """Each charted key's overlays, one per baseline (``runs``: the run's kept series by key; None: cancelled)."""
    out: dict[str, list[Overlay]] = {key: [] for key in runs}
    for index, baseline in enumerate(baselines):
        if cancelled():
            return None
        read = _baseline_series(baseline, runs, source)
        for key, members in out.items():
            chart, aligned = read.get(key, (None, None))
            members.append(Overlay(index, baseline.mark, baseline.name, chart, aligned))
    return {key: tuple(members) for key, members in out.items()}


Ask = tuple[Sequence[Baseline], Mapping[str, MetricSeries], Source]
"""What one read needs: the baselines, the run's kept series by key, where the charted series come from."""


class OverlayReads:
    """One read of the baselines' series at a time for ``screen``; ``show`` gets each read's overlays.

    A read starts no sooner than :data:`SPACING` times the last one's cost after it ended (its thread's CPU
    time): a live run asks on every poll, and a long baseline's whole series cost seconds to read."""

    def __init__(self, screen: Screen[Any], show: Callable[[dict[str, tuple[Overlay, ...]]], None]) -> None:
        self.screen = screen
        self.show = show
        self.reading = False
        """A read runs."""
        self._asked: Callable[[], Ask] | None = None
        self._waiting = False
        self._done_at = 0.0
        self._cost = 0.0

    def ask(self, what: Callable[[], Ask]) -> None:
        """Read with ``what()`` (called when the read starts): now, or once the running read ends and the
        spacing has passed; asks meanwhile fold into one."""
        self._asked = what
        if self.reading or self._waiting:
            return
        wait = self._done_at + SPACING * self._cost - time.monotonic()
        if wait > 0:
            self._waiting = True
            self.screen.set_timer(wait, self._start)
            return
        self._start()

    def _start(self) -> None:
        self._waiting = False
        what, self._asked = self._asked, None
        if what is None or not self.screen.is_attached:
            return
        self.reading = True
        baselines, runs, source = what()
        work = partial(self._read, tuple(baselines), dict(runs), source)
        self.screen.run_worker(work, thread=True, group="baseline-series", exit_on_error=False)

    def _read(self, baselines: tuple[Baseline, ...], runs: dict[str, MetricSeries], source: Source) -> None:
        overlays = None
        started = time.thread_time()
        try:
            overlays = overlay_series(baselines, runs, source, lambda: not self.screen.is_attached)
        finally:  # a read that failed still ends, so the next one can start
            self.screen.app.call_from_thread(self._done, overlays, time.thread_time() - started)

    def _done(self, overlays: dict[str, tuple[Overlay, ...]] | None, cost: float) -> None:
        self.reading = False
        self._done_at, self._cost = time.monotonic(), cost
        if overlays is not None and self.screen.is_attached:
            self.show(overlays)
        if self._asked is not None and self.screen.is_attached:
            self.ask(self._asked)
