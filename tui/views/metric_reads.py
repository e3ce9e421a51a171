"""The metrics view's reads of its series, off the UI thread: what a read is asked for, and what it brings.

:func:`gather_series` runs in a worker thread: it reads the metric store (under its lock, one key at a time)
or, for a run without metrics.jsonl, builds the ``dump/...`` series from step aggregates. Plain Python: no
widget is touched here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from miles_tui.core.analysis import ChartSeries, chart_keys, chart_series, dump_series, store_chart_series
from miles_tui.core.dump import StepAggregate
from miles_tui.core.telemetry import MetricStore
from miles_tui.tui.views.metric_lines import Source


@dataclass(frozen=True)
class SeriesAsk:
    """What a read of the series must bring (what the screen had when it asked)."""

    rebuild: bool
    """Read every series (a new grid), whatever changed."""
    keys: frozenset[str]
    """Keys to read again even if their point count did not move (a TelemetryAppended's)."""
    source: Source
    """Where the charted series come from now."""
    x_keys: Mapping[str, str]
    """Each charted key's x key."""
    counts: Mapping[str, int]
    """The store's point counts when the charted series were read."""
    aggregates: tuple[StepAggregate, ...] = ()
    """The step aggregates (a run without metrics.jsonl charts them)."""


@dataclass(frozen=True)
class Gathered:
    """What a read brought: a new grid, or new series for some charts."""

    rebuild: bool
    source: Source
    series: dict[str, ChartSeries]
    counts: dict[str, int] = field(default_factory=dict)


PAUSE_SHARE = 1.0
"""The read pauses after each key as long as the key took: the UI's thread gets the GIL at least half of the
time while a long run's series are read (keys up to 290 ms while 2M lines load and the charts are read,
against 30-60 ms)."""

_READS = threading.Lock()
"""One read of the series at a time, app-wide: a 2,000,000-line run's whole series are ~1.5 GB while read, and
a user pressing m, esc, m ... must not have several such reads at once (a popped screen's read stops early)."""


def gather_series(store: MetricStore, ask: SeriesAsk, cancelled: Callable[[], bool]) -> Gathered | None:
    """The series ``ask`` needs (None: nothing changed, or cancelled). Blocking: runs in a thread, reads under
    the store's lock, one key at a time (each kept as a chart keeps it: at most CHART_POINTS points)."""
    with _READS:
        counts = store.point_counts()
        keys = chart_keys(store)
        if keys:
            if ask.rebuild or ask.source != "metrics" or not set(keys) <= set(ask.x_keys):
                read = store_chart_series(store, dict.fromkeys(keys), cancelled=cancelled, pause_share=PAUSE_SHARE)
                return None if read is None else Gathered(True, "metrics", read, counts)
            moved = {key for key, count in counts.items() if count != ask.counts.get(key)} | ask.keys
            wanted = {key: ask.x_keys[key] for key in moved if key in ask.x_keys}  # the x key stays the chart's
            if not wanted:
                return None
            read = store_chart_series(store, wanted, cancelled=cancelled, pause_share=PAUSE_SHARE)
            return None if read is None else Gathered(False, "metrics", read, counts)
    series = {key: chart_series(s) for key, s in dump_series(ask.aggregates).items()}
    source: Source = "dump" if series else "none"
    if ask.rebuild or source != ask.source or set(series) != set(ask.x_keys):
        return Gathered(True, source, series, counts)
    return Gathered(False, source, series, counts)
