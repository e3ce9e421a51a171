"""The engines screen: each inference engine's requests, KV cache, cache hits, throughput and aborts over time.

What it draws comes from :mod:`miles_tui.core.analysis.engine_view` and
:mod:`~miles_tui.core.analysis.engine_metrics`, computed in a worker thread from
the ``engine_series`` hours the window touches (the app's
:class:`~miles_tui.core.telemetry.engine_hours.EngineHours`: the whole run only
for the whole-run window). A table lists every engine with its newest figures,
requests aborted in the window and restarts; below it, by default, six charts
show the selected engine (``n``/``N``), one line per DP rank where the engine
labels ranks, restarts as vertical lines. ``l`` lists every scraped metric
(gauges, counters as rates, histogram means, as miles derives them); enter
charts the chosen one for every engine on one plot (``d``: every DP rank of the
selected engine), each line with its mark and legend entry, ``1``..``9``
showing or hiding a line, ``a`` showing all; escape goes back to the six
charts. The time windows are the GPUs view's (``←``/``→``). It redraws when the
app forwards new engine records (TelemetryAppended), and on a status poll
once the view is a few seconds old.
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
from textual.widgets import Footer, Label, OptionList, Static
from textual.widgets.option_list import Option

from miles_tui.core.analysis import PANELS, EngineView, scrape_interval
from miles_tui.core.analysis.engine_metrics import (
    METRIC_KINDS,
    EngineMetric,
    MetricChart,
    exporters,
    metric_catalog,
    metric_chart,
)
from miles_tui.core.analysis.engine_view import engine_view
from miles_tui.core.telemetry import WINDOWS, bin_count, window_bounds
from miles_tui.core.telemetry.engine_hours import EngineHours
from miles_tui.core.telemetry.time_bins import time_bins
from miles_tui.tui.model.messages import TelemetryAppended
from miles_tui.tui.model.run_model import RunModel
from miles_tui.tui.runtime.recompute import Recompute
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.views.engine_metric_rows import list_entry, list_heading
from miles_tui.tui.views.engine_rows import table_lines, title
from miles_tui.tui.widgets.engine_chart import EngineChart, EngineChartData
from miles_tui.tui.widgets.engine_metric_chart import EngineMetricChart, EngineMetricData
from miles_tui.tui.widgets.run_header import RunHeader

STREAM: Final = "engine_series"

REFRESH_SECONDS: Final = 5.0
"""A status poll with no new scrapes recomputes once the view is this old (ages keep moving)."""

COUNTER_MARGIN_SECONDS: Final = 300.0
"""Scrapes this long before a window are read too, so the counters' first interval in it counts."""

Computed = tuple[EngineView, tuple[tuple[EngineMetric, int, int], ...], MetricChart | None]
"""What one computation gives: the view, the metric catalog (with engines and DP ranks scraping each), the chart."""

_Y_AXIS_COLUMNS: Final = 8
"""Roughly what the y tick labels and frame take from a chart's width."""


class EnginesScreen(MonitorScreen):
    """Inference engines over a time window."""

    CSS_PATH = "engines_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        Binding("right,plus", "window(1)", "Longer window", key_display="→/+", show=False),
        Binding("left,minus", "window(-1)", "Shorter window", key_display="←/-", show=False),
        Binding("n", "engine(1)", "Next engine"),
        Binding("N", "engine(-1)", "Prev engine", key_display="N", show=False),
        Binding("l", "metric_list", "Metric list"),
        Binding("d", "split", "DP ranks / engines", show=False),
        Binding("1", "toggle_line(0)", "Show/hide a line of the metric chart", key_display="1-9", show=False),
        *(Binding(str(k), f"toggle_line({k - 1})", "", show=False) for k in range(2, 10)),
        Binding("a", "show_all", "Show every line", show=False),
    ]

    def __init__(self, window: int = 0) -> None:
        super().__init__()
        self.window = window
        """Index into :data:`~miles_tui.core.telemetry.time_bins.WINDOWS`."""
        self.selected = 0
        """The engine the charts show (index into the view's engines)."""
        self.view: EngineView | None = None
        """The view drawn last."""
        self.mode = "panels"
        """What is below the table: ``panels`` (the six charts), ``list`` (every metric) or ``metric`` (one)."""
        self.catalog: tuple[tuple[EngineMetric, int, int], ...] = ()
        """Every chartable metric of the window, with the engines and DP ranks that scraped it."""
        self.metric: EngineMetric | None = None
        """The metric charted in ``metric`` mode."""
        self.chart: MetricChart | None = None
        """Its lines, as computed last."""
        self.split = False
        """Whether the metric chart's lines are the DP ranks of the selected engine (else every engine)."""
        self.hidden: set[int] = set()
        """Places of the metric chart's lines not drawn."""
        self._list_width = 0
        self._views: Recompute[Computed] = Recompute(self, "engines", self._job, self._show, self._failed)

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("Engines · loading…", id="engines-title")
        yield Static("", id="engines-table")
        with VerticalScroll(id="engines-charts"):
            yield Grid(*(EngineChart(id=f"chart-{metric}") for metric in PANELS), id="engines-grid")
        yield OptionList(id="engines-metrics")
        yield EngineMetricChart(id="engines-metric-chart")
        yield Label("", id="engines-empty")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#engines-empty", Label).display = False
        self.query_one("#engines-metrics", OptionList).display = False
        self.query_one("#engines-metric-chart", EngineMetricChart).display = False
        self.query_one(RunHeader).context = "engines"
        self.miles.run_changed.subscribe(self, self._run_changed)
        self._layout()
        self.call_after_refresh(self.recompute)

    # -- computing ------------------------------------------------------------------------------------

    def recompute(self) -> None:
        """Compute the view again (coalesced: at most one computation runs, one more waits)."""
        self._views.request()

    def _job(self) -> Callable[[], Computed]:
        """The computation for the window, plot width and chart of now (on the event loop; it runs in a thread)."""
        return functools.partial(
            self._compute,
            WINDOWS[self.window],
            self._plot_width(),
            self.miles.watcher.clock(),
            self.metric,
            self.split,
            self.selected,
        )

    def _plot_width(self) -> int:
        columns = 3 if self.size.width >= 120 else 2
        return max((self.size.width - 2) // columns - _Y_AXIS_COLUMNS, 10)

    def _hours(self) -> EngineHours:
        hours = getattr(self.miles, "engine_hours", None)
        return hours if isinstance(hours, EngineHours) else EngineHours(self.miles.watcher.follower.dashboard.directory)

    def _compute(
        self, span: float | None, width: int, now: float, metric: EngineMetric | None, split: bool, selected: int
    ) -> Computed:
        hours = self._hours()
        newest = hours.newest()
        since = None if span is None or newest is None else newest - span - COUNTER_MARGIN_SECONDS
        table = hours.table(since, None)
        first, last = table.time_range() or (None, None)
        start, until, anchored = window_bounds(span, now, first, last)
        interval = scrape_interval(table)
        bins = time_bins(start, until, bin_count(until - start, interval, width))
        view = engine_view(table, bins, now=now, span=span, anchored_to_data=anchored)
        catalog = []
        for one in metric_catalog(table.metrics()):
            pairs = exporters(table, one)
            catalog.append((one, len({addr for addr, _ in pairs}), sum(rank is not None for _, rank in pairs)))
        chart = None
        if metric is not None and view.engines:
            addr = view.engines[min(selected, len(view.engines) - 1)].addr
            chart = metric_chart(table, metric, bins.edges(), ranks_of=addr, split=split)
        return view, tuple(catalog), chart

    def _failed(self, message: str) -> None:
        self.query_one("#engines-title", Label).update(Text(f"Engines · cannot read telemetry: {message}", "red"))

    def _show(self, computed: Computed) -> None:
        view, catalog, chart = computed
        self.view = view
        if catalog != self.catalog or self._list_width != self._entry_width():
            self.catalog = catalog
            self._fill_list()
        self.chart = chart if chart is not None and chart.metric == self.metric else None
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
        self.query_one("#engines-charts", VerticalScroll).display = has_engines and self.mode == "panels"
        self.query_one("#engines-metrics", OptionList).display = has_engines and self.mode == "list"
        self.query_one("#engines-metric-chart", EngineMetricChart).display = has_engines and self.mode == "metric"
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
        if self.mode == "metric" and self.chart is not None:
            hidden = frozenset(self.hidden)
            data = EngineMetricData(self.chart, view.bins, hidden, len(view.engines), end)
            self.query_one("#engines-metric-chart", EngineMetricChart).data = data
        for metric in PANELS:
            chart = self.query_one(f"#chart-{metric}", EngineChart)
            chart.data = EngineChartData(block.panels[metric], view.bins, block.restarts, end)

    def _entry_width(self) -> int:
        """Cells a metric list entry may take (the list's padding and scroll bar left out)."""
        return max(self.size.width - 5, 20)

    def _fill_list(self) -> None:
        """The metric list: a heading per kind, then each metric (headings cannot be chosen)."""
        options = self.query_one("#engines-metrics", OptionList)
        chosen = options.highlighted_option.id if options.highlighted_option is not None else None
        width = self._list_width = self._entry_width()
        hint = Text("enter: chart the metric for every engine · esc: back to the six charts", style="dim italic")
        entries: list[Option] = [Option(hint, id="hint", disabled=True)]
        for kind in METRIC_KINDS:
            of_kind = [(m, e, r) for m, e, r in self.catalog if m.kind == kind]
            if of_kind:
                entries.append(Option(list_heading(kind, len(of_kind)), id=f"kind:{kind}", disabled=True))
                entries += [Option(list_entry(m, e, r, width), id=f"metric:{m.name}") for m, e, r in of_kind]
        options.clear_options()
        options.add_options(entries)
        ids = [entry.id for entry in entries]
        if chosen in ids:
            options.highlighted = ids.index(chosen)
        elif self.metric is not None and f"metric:{self.metric.name}" in ids:
            options.highlighted = ids.index(f"metric:{self.metric.name}")

    @on(OptionList.OptionSelected, "#engines-metrics")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        """Enter on a metric: chart it for every engine."""
        name = (event.option.id or "").removeprefix("metric:")
        metric = next((m for m, _, _ in self.catalog if m.name == name), None)
        if metric is None:
            return
        if metric != self.metric:
            self.hidden.clear()
        self.metric, self.chart, self.mode = metric, None, "metric"
        self._draw()
        self.recompute()

    def metric_text(self) -> str:
        """The metric chart's characters (for tests)."""
        return self.query_one("#engines-metric-chart", EngineMetricChart).drawn_text()

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
        """Back to the six charts from the metric list or chart; from the six charts, back to the last view."""
        if self.mode != "panels":
            self.mode = "panels"
            self._draw()
            return
        self.app.pop_screen()

    def action_metric_list(self) -> None:
        if self.view is None or not self.view.engines:
            self.notify("no metric to list: this run has no engine_series/ scrapes", timeout=4)
            return
        self.mode = "list"
        self._draw()
        options = self.query_one("#engines-metrics", OptionList)
        if options.highlighted is None and options.option_count > 2:
            options.highlighted = 2  # the first metric under the first heading
        options.focus()

    def _needs_chart(self, key: str) -> bool:
        """Whether the metric chart is up; else say what ``key`` does and how to get there."""
        if self.mode == "metric" and self.chart is not None:
            return True
        self.notify(f"{key} works on a metric chart: l lists the metrics, enter charts one", timeout=4)
        return False

    def action_split(self) -> None:
        if not self._needs_chart("d"):
            return
        self.split = not self.split
        self.hidden.clear()
        if self.split and self.view is not None and not self.view.engines[self.selected].dp_ranks:
            self.notify("this engine labels no DP ranks: its one line is shown (n/N: another engine)", timeout=4)
        self.recompute()

    def action_toggle_line(self, index: int) -> None:
        if not self._needs_chart(str(index + 1)):
            return
        assert self.chart is not None
        if index >= len(self.chart.lines):
            count = len(self.chart.lines)
            self.notify(f"the chart has {count} line{'s' if count != 1 else ''}: no line {index + 1}", timeout=3)
            return
        self.hidden ^= {index}
        self._draw()

    def action_show_all(self) -> None:
        if not self._needs_chart("a"):
            return
        if not self.hidden:
            self.notify("every line is shown already", timeout=3)
        self.hidden.clear()
        self._draw()

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
        if self.mode == "metric" and self.split:
            self.hidden.clear()
            self.recompute()
        self.query_one("#engines-charts", VerticalScroll).scroll_home(animate=False)
