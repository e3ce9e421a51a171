"""The baselines' series for the metrics view's charts: blocking, for a thread.

Contract: :func:`overlay_series` gives, for each charted key, one
:class:`~miles_tui.tui.widgets.baseline_overlay.Overlay` per baseline in the
order added: the baseline's points of that key against the chart's own x key
(read from its metric store, kept as a chart keeps a series), or, when the run
is charted from its dumps, the baseline's ``dump/...`` series built the same
way from its step figures. A baseline that never logged a key gets an overlay
without a series (the legend says "not logged"). ``cancelled()`` is checked
between baselines.

:class:`OverlayReads` runs those reads for a screen one at a time: what is asked
while one runs is read once it ends, with what the screen has then (a long
baseline's read is never cancelled and restarted by every poll, so it ends).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from textual.screen import Screen

from miles_tui.core.analysis import ChartSeries, chart_series, dump_series, store_chart_series
from miles_tui.tui.baseline_watch import Baseline
from miles_tui.tui.metric_lines import Source
from miles_tui.tui.widgets.baseline_overlay import Overlay

PAUSE_SHARE = 1.0
"""As the run's own series: a long baseline's read leaves the UI thread the GIL half of the time."""


def _baseline_series(baseline: Baseline, x_keys: Mapping[str, str], source: Source) -> dict[str, ChartSeries]:
    if source == "dump":
        aggregates = tuple(dict(baseline.run.aggregates).values())  # a copy: its poll replaces entries meanwhile
        return {key: chart_series(series) for key, series in dump_series(aggregates).items() if key in x_keys}
    read = store_chart_series(baseline.run.metrics, dict(x_keys), pause_share=PAUSE_SHARE)
    return read or {}


def overlay_series(
    baselines: Sequence[Baseline],
    x_keys: Mapping[str, str],
    source: Source,
    cancelled: Callable[[], bool] = lambda: False,
) -> dict[str, tuple[Overlay, ...]] | None:
    """Each charted key's overlays, one per baseline (None: cancelled)."""
    out: dict[str, list[Overlay]] = {key: [] for key in x_keys}
    for index, baseline in enumerate(baselines):
        if cancelled():
            return None
        series = _baseline_series(baseline, x_keys, source)
        for key, members in out.items():
            members.append(Overlay(index, baseline.mark, baseline.name, series.get(key)))
    return {key: tuple(members) for key, members in out.items()}


Ask = tuple[Sequence[Baseline], Mapping[str, str], Source]
"""What one read needs: the baselines, each charted key's x key, where the charted series come from."""


class OverlayReads:
    """One read of the baselines' series at a time for ``screen``; ``show`` gets each read's overlays."""

    def __init__(self, screen: Screen[Any], show: Callable[[dict[str, tuple[Overlay, ...]]], None]) -> None:
        self.screen = screen
        self.show = show
        self.reading = False
        """A read runs."""
        self._again: Callable[[], Ask] | None = None

    def ask(self, what: Callable[[], Ask]) -> None:
        """Read with ``what()`` now, or once the running read ends (``what`` is called when the read starts)."""
        if self.reading:
            self._again = what
            return
        self.reading = True
        baselines, x_keys, source = what()
        work = partial(self._read, tuple(baselines), dict(x_keys), source)
        self.screen.run_worker(work, thread=True, group="baseline-series", exit_on_error=False)

    def _read(self, baselines: tuple[Baseline, ...], x_keys: dict[str, str], source: Source) -> None:
        overlays = None
        try:
            overlays = overlay_series(baselines, x_keys, source, lambda: not self.screen.is_attached)
        finally:  # a read that failed still ends, so the next one can start
            self.screen.app.call_from_thread(self._done, overlays)

    def _done(self, overlays: dict[str, tuple[Overlay, ...]] | None) -> None:
        self.reading = False
        if overlays is not None and self.screen.is_attached:
            self.show(overlays)
        if self._again is not None and self.screen.is_attached:
            what, self._again = self._again, None
            self.ask(what)
