"""The engines screen: each inference engine's requests, KV cache, cache hits, throughput and aborts over time.

What it draws comes from :mod:`miles_tui.core.analysis.engine_view`, computed in a worker thread
from the ``engine_series`` records the app's poll holds (the whole run, for
the whole-run window, has the reader parse older hours). A table lists every
engine with its newest figures, requests aborted in the window and restarts;
below it, six charts show the selected engine (``n``/``N``), one line per DP
rank where the engine labels ranks, restarts as vertical lines. The time
windows are the GPUs view's (``←``/``→``). It redraws when the app forwards
new engine records (TelemetryAppended), and on a status poll once the view is
a few seconds old; it reads no file itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ClassVar, Final

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll
from textual.widgets import Footer, Label, Static

from miles_tui.core.analysis import PANELS, EngineView, scrape_interval
from miles_tui.core.analysis.engine_view import engine_view
from miles_tui.core.telemetry import WINDOWS, EngineSample, EngineTable, bin_count, window_bounds
from miles_tui.core.telemetry.time_bins import time_bins
from miles_tui.tui.engine_rows import table_lines, title
from miles_tui.tui.messages import TelemetryAppended
from miles_tui.tui.recompute import Recompute
from miles_tui.tui.run_model import RunModel
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.widgets.engine_chart import EngineChart, EngineChartData
from miles_tui.tui.widgets.run_header import RunHeader

STREAM: Final = "engine_series"

REFRESH_SECONDS: Final = 5.0
"""A status poll with no new scrapes recomputes once the view is this old (ages keep moving)."""

COUNTER_MARGIN_SECONDS: Final = 300.0
"""Scrapes this long before a window are read too, so the counters' first interval in it counts."""

_Y_AXIS_COLUMNS: Final = 8
"""Roughly what the y tick labels and frame take from a chart's width."""


class EnginesScreen(MonitorScreen):
    """Inference engines over a time window."""

    CSS_PATH = "engines_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        Binding("right,plus", "window(1)", "Longer window", key_display="→/+"),
        Binding("left,minus", "window(-1)", "Shorter window", key_display="←/-", show=False),
        Binding("n", "engine(1)", "Next engine"),
        Binding("N", "engine(-1)", "Prev engine", key_display="N", show=False),
    ]

    def __init__(self, window: int = 0) -> None:
        super().__init__()
        self.window = window
        """Index into :data:`~miles_tui.core.telemetry.time_bins.WINDOWS`."""
        self.selected = 0
        """The engine the charts show (index into the view's engines)."""
        self.view: EngineView | None = None
        """The view drawn last."""
        self._views: Recompute[EngineView] = Recompute(self, "engines", self._job, self._show, self._failed)

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("Engines · loading…", id="engines-title")
        yield Static("", id="engines-table")
        with VerticalScroll(id="engines-charts"):
            yield Grid(*(EngineChart(id=f"chart-{metric}") for metric in PANELS), id="engines-grid")
        yield Label("", id="engines-empty")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#engines-empty", Label).display = False
        self.query_one(RunHeader).context = "engines"
        self.miles.run_changed.subscribe(self, self._run_changed)
        self._layout()
        self.call_after_refresh(self.recompute)

    # -- computing ------------------------------------------------------------------------------------

    def recompute(self) -> None:
        """Compute the view again (coalesced: at most one computation runs, one more waits)."""
        self._views.request()

    def _job(self) -> Callable[[], EngineView]:
        """The computation for the window and plot width of now (on the event loop; it runs in a thread)."""
        return functools.partial(self._compute, WINDOWS[self.window], self._plot_width(), self.miles.watcher.clock())

    def _plot_width(self) -> int:
        columns = 3 if self.size.width >= 120 else 2
        return max((self.size.width - 2) // columns - _Y_AXIS_COLUMNS, 10)

    def _compute(self, span: float | None, width: int, now: float) -> EngineView:
        reader = self.miles.watcher.follower.dashboard
        loaded = reader.loaded_records(STREAM)
        if span is None:
            records = reader.records(STREAM)
        else:
            newest = max((r.ts for r in loaded if isinstance(r, EngineSample)), default=None)
            since = None if newest is None else newest - span - COUNTER_MARGIN_SECONDS
            records = reader.records(STREAM, since, None)
        table = EngineTable(records)
        first, last = table.time_range() or (None, None)
        start, until, anchored = window_bounds(span, now, first, last)
        interval = scrape_interval(table)
        bins = time_bins(start, until, bin_count(until - start, interval, width))
        return engine_view(table, bins, now=now, span=span, anchored_to_data=anchored)

    def _failed(self, message: str) -> None:
        self.query_one("#engines-title", Label).update(Text(f"Engines · cannot read telemetry: {message}", "red"))

    def _show(self, view: EngineView) -> None:
        self.view = view
        self.selected = min(self.selected, max(len(view.engines) - 1, 0))
        self._draw()

    # -- drawing --------------------------------------------------------------------------------------

    def _layout(self) -> None:
        width = self.size.width
        self.set_class(width >= 120, "-cols-3")
        self.set_class(self.size.height >= 40, "-tall")

    def _draw(self) -> None:
        view = self.view
        if view is None:
            return
        empty = self.query_one("#engines-empty", Label)
        has_engines = bool(view.engines)
        empty.display = not has_engines
        self.query_one("#engines-table", Static).display = has_engines
        self.query_one("#engines-charts", VerticalScroll).display = has_engines
        self.query_one("#engines-title", Label).update(title(view, self.selected))
        if not has_engines:
            empty.update(
                "This run has no inference-engine telemetry: dashboard/engine_series/ is missing or empty.\n"
                "miles writes it when the run scrapes its sglang engines (dashboard telemetry on)."
            )
            return
        table = self.query_one("#engines-table", Static)
        lines = table_lines(view, self.selected, max(table.content_size.width, self.size.width - 2))
        table.update(Text("\n").join(lines))
        block = view.engines[self.selected]
        end = "end" if view.anchored_to_data else "now"
        for metric in PANELS:
            chart = self.query_one(f"#chart-{metric}", EngineChart)
            chart.data = EngineChartData(block.panels[metric], view.bins, block.restarts, end)

    def chart_texts(self) -> dict[str, str]:
        """Each chart's characters by panel (for tests and screen readers)."""
        return {metric: self.query_one(f"#chart-{metric}", EngineChart).drawn_text() for metric in PANELS}

    # -- live -----------------------------------------------------------------------------------------

    @on(TelemetryAppended)
    def _telemetry(self, message: TelemetryAppended) -> None:
        """New engine scrapes: recompute the view."""
        if STREAM in message.streams:
            self.recompute()

    def _run_changed(self, model: RunModel) -> None:
        """A poll ended: let the window move with the clock when nothing new arrives."""
        if self.view is not None and self.miles.watcher.clock() - self.view.now >= REFRESH_SECONDS:
            self.recompute()

    def on_resize(self) -> None:
        self._layout()
        self.call_after_refresh(self.recompute)

    # -- actions --------------------------------------------------------------------------------------

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_window(self, delta: int) -> None:
        self.window = max(0, min(len(WINDOWS) - 1, self.window + delta))
        self.recompute()

    def action_engine(self, delta: int) -> None:
        if self.view is None or not self.view.engines:
            self.notify("no engine to step through: this run has no engine_series/ scrapes", timeout=4)
            return
        if len(self.view.engines) == 1:
            self.notify("this run has one engine: n/N have no other to show", timeout=3)
        self.selected = (self.selected + delta) % len(self.view.engines)
        self._draw()
        self.query_one("#engines-charts", VerticalScroll).scroll_home(animate=False)
