"""The baselines' series for the metrics view's charts: blocking, for a thread.

Contract: :func:`overlay_series` gives, for each charted key, one
:class:`~miles_tui.tui.widgets.baseline_overlay.Overlay` per baseline in the
order added: the baseline's points of that key against the chart's own x key
(read from its metric store, kept as a chart keeps a series), or, when the run
is charted from its dumps, the baseline's ``dump/...`` series built the same
way from its step figures. A baseline that never logged a key gets an overlay
without a series (the legend says "not logged"). ``cancelled()`` is checked
between baselines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

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
