"""The metrics view: a scrolling grid of charts, one per metric, grouped by category, live.

Data comes from the app: the metric store of the watcher's follower
(``dashboard/metrics.jsonl``), or, for a run without one, the ``dump/...``
series core builds from the step summaries. Every derived value (groups,
filter, smoothing, downsampling, value lookups, cursor moves) is core's
(:mod:`miles_tui.core.analysis.metric_view`); this screen decides what is shown, and
:mod:`miles_tui.tui.metric_lines` writes its status and inspector lines. New points (a
TelemetryAppended, or a poll's published run model after which the store's point
counts moved) redraw only the charts whose key got some; a key seen for the
first time rebuilds the grid. The grid's columns and chart heights follow
the terminal size through breakpoint classes (metrics_screen.tcss).
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widgets import Footer, Input, Label, Static

from miles_tui.core.analysis import (
    SMOOTHING_LEVELS,
    FloatArray,
    PointAt,
    chart_keys,
    dump_series,
    group_keys,
    in_step_order,
    key_matches,
    move_cursor,
    same_points,
    step_union,
    values_at,
)
from miles_tui.core.inert_text import inert
from miles_tui.core.telemetry import MetricSeries
from miles_tui.tui.messages import (
    StepsSummarized,
    TelemetryAppended,
)
from miles_tui.tui.metric_lines import NO_METRICS_NOTE, NOTHING_YET_NOTE, Source, inspector_line, status_line
from miles_tui.tui.run_model import RunModel
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.widgets.metric_chart import ChartView, MetricChart
from miles_tui.tui.widgets.run_header import RunHeader

__all__ = ["NOTHING_YET_NOTE", "NO_METRICS_NOTE", "MetricsScreen"]


class MetricsScreen(MonitorScreen):
    """Every metric of the run as a chart against its own step key."""

    GLOBAL_VIEW = True

    CSS_PATH = "metrics_screen.tcss"
    # Textual declares these without ClassVar (mypy then refuses one here), hence the noqa.
    HORIZONTAL_BREAKPOINTS = [(0, "-cols-1"), (110, "-cols-2"), (150, "-cols-3"), (220, "-cols-4")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-medium"), (44, "-tall")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("l", "toggle_log", "Log-y"),
        Binding("e", "cycle_smoothing", "Smoothing"),
        Binding("left", "cursor(-1)", "Step cursor ←", key_display="←"),
        Binding("right", "cursor(1)", "Step cursor →", key_display="→"),
        Binding("shift+left", "cursor(-10)", "Cursor 10 steps back", show=False),
        Binding("shift+right", "cursor(10)", "Cursor 10 steps on", show=False),
        Binding("c", "clear_cursor", "Cursor off", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.view = ChartView()
        """Smoothing and y scale of every chart."""
        self.pattern = ""
        """The filter: a glob (``perf/*``) or a substring; space-separated alternatives."""
        self.cursor: float | None = None
        """Step of the inspector's cursor (None: off)."""
        self.source: Source = "none"
        """Where the charted series come from."""
        self.series: dict[str, MetricSeries] = {}
        """Every charted series, in step order, by key."""
        self.charts: dict[str, MetricChart] = {}
        """The chart of each key, in display order."""
        self._stops: FloatArray | None = None
        self._counts: dict[str, int] = {}  # the store's point counts when the series were read
        self._shown: dict[Static, Text] = {}

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("", id="metrics-status")
        with VerticalScroll(id="charts"):
            yield Static("", id="metrics-empty")
        yield Static("", id="inspector")
        yield Input(placeholder="filter: glob (perf/*) or substring; spaces separate alternatives", id="filter")
        yield Footer()

    async def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.query_one(RunHeader).context = "metrics"
        self.miles.run_changed.subscribe(self, self._run_changed)
        self.watch(self.query_one("#charts", VerticalScroll), "scroll_y", self._scrolled, init=False)
        await self._rebuild()
        self.query_one("#charts", VerticalScroll).focus()

    # -- data -------------------------------------------------------------------------

    def _collect(self) -> tuple[Source, dict[str, MetricSeries]]:
        store = self.miles.watcher.follower.metrics
        self._counts = store.point_counts()
        keys = chart_keys(store)
        if keys:
            found = {key: store.series(key) for key in keys}
            return "metrics", {key: in_step_order(s) for key, s in found.items() if s is not None}
        aggregates = [summary.aggregate for summary in self.miles.model.summaries.values()]
        series = dump_series(aggregates)
        return ("dump" if series else "none"), series

    async def _rebuild(self) -> None:
        """Collect every series and mount a fresh grid (on open, and when keys appear)."""
        self.source, self.series = self._collect()
        container = self.query_one("#charts", VerticalScroll)
        await container.query(".category").remove()
        self.charts = {}
        sections = []
        for name, keys in group_keys(self.series):
            charts = [MetricChart(self.series[key], self.view) for key in keys]
            for chart in charts:
                chart.set_reactive(MetricChart.cursor, self.cursor)
            self.charts.update(zip(keys, charts, strict=True))
            title = Label(Text(f"{inert(name)} · {len(keys)}"), classes="category-title")
            sections.append(Vertical(title, Grid(*charts, classes="category-grid"), classes="category"))
        await container.mount_all(sections)
        self._apply_filter()

    def _update(self, keys: set[str]) -> None:
        """Give the charts of ``keys`` their new series (others are not touched, so not redrawn)."""
        for key in keys:
            chart = self.charts.get(key)
            if chart is not None:
                chart.series = self.series[key]
        self._stops = None
        self._refresh_status()
        self._refresh_inspector()

    # -- what is shown ----------------------------------------------------------------

    def shown_keys(self) -> tuple[str, ...]:
        """Keys of the charts the filter lets through, in display order."""
        return tuple(key for key in self.charts if key_matches(key, self.pattern))

    def in_view_keys(self) -> tuple[str, ...]:
        """Keys of the shown charts inside the scrolled viewport."""
        viewport = self.query_one("#charts", VerticalScroll).content_region
        return tuple(key for key in self.shown_keys() if self.charts[key].region.overlaps(viewport))

    def inspected(self) -> dict[str, PointAt | None]:
        """What the inspector line shows: each in-view chart's point at the cursor (empty without a cursor)."""
        if self.cursor is None:
            return {}
        return values_at({key: self.series[key] for key in self.in_view_keys()}, self.cursor)

    def _apply_filter(self) -> None:
        shown = set(self.shown_keys())
        for key, chart in self.charts.items():
            chart.display = key in shown
        for section in self.query(".category"):
            section.display = any(chart.display for chart in section.query(MetricChart))
        empty = self.query_one("#metrics-empty", Static)
        if not self.charts:
            empty.update(Text(NOTHING_YET_NOTE, style="dim"))
        elif not shown:
            empty.update(Text(f"no series match {self.pattern!r}", style="yellow"))
        empty.display = not shown
        self._stops = None
        self._refresh_status()
        self.call_after_refresh(self._refresh_inspector)

    def _refresh_status(self) -> None:
        line = status_line(self.source, len(self.shown_keys()), len(self.charts), self.pattern, self.view)
        self._show(self.query_one("#metrics-status", Label), line)

    def _refresh_inspector(self) -> None:
        self._show(self.query_one("#inspector", Static), inspector_line(self.cursor, self.inspected()))

    def _show(self, widget: Static, text: Text) -> None:
        """Update a line only when its text changed (an update re-lays out the screen: a tick should not)."""
        if self._shown.get(widget) != text:
            self._shown[widget] = text
            widget.update(text)

    def _scrolled(self) -> None:
        self._refresh_inspector()

    # -- live -------------------------------------------------------------------------

    @on(TelemetryAppended)
    async def _telemetry(self, message: TelemetryAppended) -> None:
        """New metric points: redraw the charts of the keys that got some."""
        await self._sync_metrics(message.metric_keys)

    async def _sync_metrics(self, keys: tuple[str, ...] = ()) -> None:
        """Catch up with the store: ``keys`` and every key whose point count moved get their new series.

        Only those charts redraw; a key never charted before (or the first metrics of a
        run shown from its dumps) rebuilds the grid.
        """
        store = self.miles.watcher.follower.metrics
        counts = store.point_counts()
        changed = {key for key, count in counts.items() if count != self._counts.get(key)} | set(keys)
        if not changed:
            return
        if self.source != "metrics" or not set(chart_keys(store)) <= set(self.charts):
            await self._rebuild()
            return
        self._counts = counts
        changed &= set(self.charts)
        for key in changed:
            series = store.series(key, self.series[key].x_key)  # the x key stays the chart's own
            if series is not None:
                self.series[key] = in_step_order(series)
        self._update(changed)

    @on(StepsSummarized)
    async def _summarized(self, message: StepsSummarized) -> None:
        """Step summaries arrived (one batch per poll): without metrics.jsonl, the dump-derived series change."""
        if self.source == "metrics":
            return
        fresh = dump_series(summary.aggregate for summary in self.miles.model.summaries.values())
        if set(fresh) != set(self.series):
            await self._rebuild()
            return
        changed = {key for key, series in fresh.items() if not same_points(series, self.series[key])}
        self.series.update((key, fresh[key]) for key in changed)
        self._update(changed)

    def _run_changed(self, model: RunModel) -> None:
        """A poll ended: pick up metric points no TelemetryAppended brought.

        The check is queued behind the messages already waiting: the app publishes
        the model just before it posts the TelemetryAppended of the same poll, and
        that one redraws the charts; the check then finds nothing left (one redraw
        per tick).
        """
        self.call_later(self._sync_metrics)

    # -- actions ----------------------------------------------------------------------

    def action_back(self) -> None:
        if self.query_one("#filter", Input).display:
            self._close_filter()
            return
        self.app.pop_screen()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.value = self.pattern
        box.focus()

    def _close_filter(self) -> None:
        self.query_one("#filter", Input).display = False
        self.query_one("#charts", VerticalScroll).focus()

    @on(Input.Changed, "#filter")
    def _filter_typed(self, message: Input.Changed) -> None:
        """Filter as the user types."""
        self.set_filter(message.value)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, message: Input.Submitted) -> None:
        """Enter keeps the filter and closes the box."""
        self.set_filter(message.value)
        self._close_filter()

    def set_filter(self, pattern: str) -> None:
        """Show only the charts whose key matches ``pattern`` (empty: all)."""
        pattern = pattern.strip()
        if pattern != self.pattern:
            self.pattern = pattern
            self._apply_filter()

    def _set_view(self, view: ChartView) -> None:
        self.view = view
        for chart in self.charts.values():
            chart.view = view
        self._refresh_status()

    def action_toggle_log(self) -> None:
        self._set_view(replace(self.view, log_y=not self.view.log_y))

    def action_cycle_smoothing(self) -> None:
        levels = SMOOTHING_LEVELS
        current = levels.index(self.view.smoothing) if self.view.smoothing in levels else 0
        self._set_view(replace(self.view, smoothing=levels[(current + 1) % len(levels)]))

    def _cursor_stops(self) -> FloatArray:
        if self._stops is None:
            self._stops = step_union(self.series[key] for key in self.shown_keys())
        return self._stops

    def action_cursor(self, delta: int) -> None:
        """Move the step cursor ``delta`` steps (over the steps the shown charts have); first press: newest step."""
        step = move_cursor(self._cursor_stops(), self.cursor, delta)
        if step is not None:
            self.set_cursor(step)

    def action_clear_cursor(self) -> None:
        self.set_cursor(None)

    def set_cursor(self, step: float | None) -> None:
        """Put the step cursor on every chart (None: remove it)."""
        self.cursor = step
        for chart in self.charts.values():
            chart.cursor = step
        self._refresh_inspector()
