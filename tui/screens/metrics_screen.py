"""The metrics view: a scrolling grid of charts, one per metric, grouped by category, live.

Data comes from the app: the metric store of the watcher's follower
(``dashboard/metrics.jsonl``), or, for a run without one, the ``dump/...``
series core builds from the step summaries. Every derived value (groups,
filter, smoothing, downsampling, value lookups, cursor moves) is core's
(:mod:`miles_tui.core.analysis.metric_view`); this screen decides what is shown, and
:mod:`miles_tui.tui.views.metric_lines` writes its status and inspector lines. New points (a
TelemetryAppended, or a poll's published run model after which the store's point
counts moved) redraw only the charts whose key got some; a key seen for the
first time rebuilds the grid. The grid's columns and chart heights follow
the terminal size through breakpoint classes (metrics_screen.tcss).

Series are read from the store in a thread (:func:`~miles_tui.tui.views.metric_reads.gather_series`; a
long run's 50 series of millions of points take a second): the screen shows
at once, saying "loading…", and fills in; one read runs at a time, and what
was asked meanwhile is read next, together.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import Footer, Input, Label, Static
from textual.worker import get_current_worker

from miles_tui.core.analysis import (
    SMOOTHING_LEVELS,
    ChartSeries,
    FloatArray,
    PointAt,
    group_keys,
    key_matches,
    move_cursor,
    same_points,
    step_union,
    values_at,
)
from miles_tui.core.analysis.step_window import keyed_holding, step_extents, zoom_keyed
from miles_tui.core.base.inert_text import inert
from miles_tui.core.telemetry import MetricSeries
from miles_tui.tui.model.messages import StepsSummarized, TelemetryAppended
from miles_tui.tui.model.run_model import RunModel
from miles_tui.tui.runtime.baseline_watch import BaselinesChanged
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.views.baseline_series import OverlayReads
from miles_tui.tui.views.metric_lines import (
    NOTHING_YET_NOTE,
    ChartView,
    Source,
    inspector_text,
    status_line,
    wandb_line,
)
from miles_tui.tui.views.metric_reads import Gathered, SeriesAsk, gather_series
from miles_tui.tui.views.overlay import Overlay
from miles_tui.tui.widgets.baseline_overlay import baselines_note
from miles_tui.tui.widgets.metric_chart import MetricChart
from miles_tui.tui.widgets.run_header import RunHeader

LOADING_NOTE = "loading…"
"""What the grid says until its first series are read."""


READ_SPACING = 10.0
"""A live update reads again no sooner than this many times the last read's cost after it (<= ~10% of a core)."""

SPACED_READ_SECONDS = 0.25
"""... when that read took at least this long (short runs' updates are read at once)."""


class MetricsScreen(MonitorScreen):
    """Every metric of the run as a chart against its own step key."""

    GLOBAL_VIEW = True

    CSS_PATH = "metrics_screen.tcss"
    # Textual declares these without ClassVar (mypy then refuses one here), hence the noqa.
    HORIZONTAL_BREAKPOINTS = [(0, "-cols-1"), (110, "-cols-2"), (150, "-cols-3"), (220, "-cols-4")]  # noqa: RUF012
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-medium"), (44, "-tall")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        # priority: handled as the key arrives, so the keys typed right after it reach the box (see focus_now)
        Binding("slash", "filter", "Filter", key_display="/", priority=True),
        Binding("l", "toggle_log", "Log-y"),
        Binding("e", "cycle_smoothing", "Smoothing"),
        Binding("left", "cursor(-1)", "Step cursor ←", key_display="←"),
        Binding("right", "cursor(1)", "Step cursor →", key_display="→"),
        Binding("shift+left", "cursor(-10)", "Cursor 10 steps back", show=False),
        Binding("shift+right", "cursor(10)", "Cursor 10 steps on", show=False),
        Binding("c", "clear_cursor", "Cursor off", show=False),
        Binding("plus,equals_sign", "zoom(-1)", "Zoom in", key_display="+"),
        Binding("minus", "zoom(1)", "Zoom out", key_display="-", show=False),
        Binding("0", "whole_run", "Every step", show=False),
        Binding("tab", "select_chart(1)", "Select a chart: the inspector says what it means", show=False),
        Binding("shift+tab", "select_chart(-1)", "Previous chart", show=False),
        Binding("W", "app.copy_wandb", "Copy the W&B run URL", key_display="W", show=False),
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
        """Each chart's kept points (what the cursor and the inspector read)."""
        self.charted: dict[str, ChartSeries] = {}
        """Each chart's series as it keeps it (:func:`~miles_tui.core.analysis.metric_view.chart_series`)."""
        self.charts: dict[str, MetricChart] = {}
        """The chart of each key, in display order."""
        self._stops: FloatArray | None = None
        self._counts: dict[str, int] = {}  # the store's point counts when the series were read
        self._shown: dict[Static, Text] = {}
        self.first_read = True
        """No series read yet (the grid says so)."""
        self._reading = False  # a read of the series runs
        self._read_done = 0.0
        self._read_cost = 0.0
        """CPU seconds the last read took in its thread."""
        self._deferred: Timer | None = None
        self._asked: tuple[bool, set[str]] | None = None  # what was asked while it ran: (rebuild, keys)
        self.overlays: dict[str, tuple[Overlay, ...]] = {}
        self._overlay_reads = OverlayReads(self, self._show_overlays)

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("", id="metrics-status")
        yield Label("", id="wandb")
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
        self._apply_filter()
        self.query_one("#charts", VerticalScroll).focus()
        self._read(rebuild=True)

    # -- data -------------------------------------------------------------------------

    def _read(self, rebuild: bool = False, keys: tuple[str, ...] = ()) -> None:
        """Read the series in a thread: all of them (``rebuild``), or those of ``keys`` and of every key whose
        point count moved. One read at a time: what is asked meanwhile is read next, together.

        New points of a live run are read again at most every :data:`READ_SPACING` times what the last read
        cost (a long run's whole series take seconds to read: re-reading them on every poll kept a core busy).
        The cost is the reading thread's own CPU time: waiting for the lock, the GIL or a busy event loop is
        not reading, and counting it deferred a short run's updates on a loaded box.
        """
        spaced = self._read_cost >= SPACED_READ_SECONDS
        wait = self._read_done + READ_SPACING * self._read_cost - time.monotonic() if spaced else 0.0
        if self._reading or (not rebuild and wait > 0):
            again, more = self._asked or (False, set())
            self._asked = (again or rebuild, more | set(keys))
            if not self._reading and self._deferred is None:
                self._deferred = self.set_timer(wait, self._read_asked)
            return
        self._reading = True
        ask = SeriesAsk(
            rebuild=rebuild,
            keys=frozenset(keys),
            source=self.source,
            x_keys={key: series.x_key for key, series in self.series.items()},
            counts=dict(self._counts),
            aggregates=tuple(summary.aggregate for summary in self.miles.model.summaries.values()),
        )
        self._gather(ask)

    @work(thread=True, group="metric-series", exit_on_error=False)
    def _gather(self, ask: SeriesAsk) -> None:
        gathered = None
        started = time.thread_time()
        try:
            worker = get_current_worker()
            gathered = gather_series(self.miles.watcher.follower.metrics, ask, lambda: worker.is_cancelled)
        finally:  # a read that failed still ends, so the next one can start
            cost = time.thread_time() - started
            self.app.call_from_thread(self.call_later, self._gathered, gathered, cost)

    async def _gathered(self, gathered: Gathered | None, cost: float = 0.0) -> None:
        """A read is done: show what it brought, then start the read asked for meanwhile."""
        if not self.is_attached:
            self._reading = False
            return
        if gathered is not None:
            self._counts = gathered.counts
            if gathered.rebuild:
                self.first_read = False
                await self._rebuild(gathered.source, gathered.series)
            else:
                fresh = gathered.series
                # Two reads may bring the same points (a poll's tick and its TelemetryAppended): draw once.
                changed = {key for key in fresh if key in self.charts and not self._same(key, fresh[key])}
                self.charted.update((key, fresh[key]) for key in changed)
                self.series.update((key, fresh[key].series) for key in changed)
                self._update(changed)
        elif self.first_read:
            self.first_read = False
            self._apply_filter()
        self._reading = False
        self._read_done = time.monotonic()
        self._read_cost = cost
        self._read_asked()

    def _read_asked(self) -> None:
        """Start the read asked for meanwhile, if any."""
        self._deferred = None
        if self._asked is not None:
            (rebuild, keys), self._asked = self._asked, None
            self._read(rebuild, tuple(keys))

    def _same(self, key: str, fresh: ChartSeries) -> bool:
        """Whether ``fresh`` is what the chart of ``key`` already shows."""
        held = self.charted.get(key)
        return held is not None and held.total == fresh.total and same_points(held.series, fresh.series)

    async def _rebuild(self, source: Source, series: dict[str, ChartSeries]) -> None:
        """Mount a fresh grid of ``series`` (on open, and when keys appear)."""
        self.source, self.charted = source, series
        self.series = {key: charted.series for key, charted in series.items()}
        container = self.query_one("#charts", VerticalScroll)
        selected = self.selected_key()
        await container.query(".category").remove()
        self.charts = {}
        sections = []
        for name, keys in group_keys(self.series):
            charts = [MetricChart(self.charted[key], self.view) for key in keys]
            for key, chart in zip(keys, charts, strict=True):
                chart.set_reactive(MetricChart.cursor, self.cursor)
                chart.set_reactive(MetricChart.overlays, self.overlays.get(key, ()))
            self.charts.update(zip(keys, charts, strict=True))
            title = Label(Text(f"{inert(name)} · {len(keys)}"), classes="category-title")
            sections.append(Vertical(title, Grid(*charts, classes="category-grid"), classes="category"))
        await container.mount_all(sections)
        if selected in self.charts:  # the selection outlives a rebuilt grid
            self.charts[selected].focus(scroll_visible=False)
        self._apply_filter()
        self._read_overlays()

    def _update(self, keys: set[str]) -> None:
        """Give the charts of ``keys`` their new series (others are not touched, so not redrawn)."""
        for key in keys:
            chart = self.charts.get(key)
            if chart is not None:
                chart.series = self.charted[key]
        self._stops = None
        self._refresh_status()
        self._refresh_inspector()
        self._read_overlays()  # the legends' lookups follow the run's new steps

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
        if not self.charts and self.first_read:
            empty.update(Text(LOADING_NOTE, style="dim"))
        elif not self.charts:
            empty.update(Text(NOTHING_YET_NOTE, style="dim"))
        elif not shown:
            empty.update(Text(f"no series match {self.pattern!r}", style="yellow"))
        empty.display = not shown
        self._stops = None
        self._refresh_status()
        self.call_after_refresh(self._refresh_inspector)

    def _refresh_status(self) -> None:
        if self.first_read:
            self._show(self.query_one("#metrics-status", Label), Text(f"metrics · {LOADING_NOTE}", style="dim"))
            return
        line = status_line(self.source, len(self.shown_keys()), len(self.charts), self.pattern, self.view)
        line.append_text(baselines_note(self.miles.baselines))
        self._show(self.query_one("#metrics-status", Label), line)
        self._refresh_wandb()

    def _refresh_wandb(self) -> None:
        """The run's W&B page under the status line (hidden when meta.json names no W&B project)."""
        link = self.miles.wandb()
        label = self.query_one("#wandb", Label)
        label.display = link is not None
        if link is not None:
            self._show(label, wandb_line(link))

    def selected_key(self) -> str | None:
        """The key of the selected chart (the focused one; tab and shift+tab move it), None when none is."""
        focused = self.focused
        if isinstance(focused, MetricChart) and focused.key in self.charts and focused.display:
            return focused.key
        return None

    def _refresh_inspector(self) -> None:
        text = inspector_text(self.cursor, self.inspected(), self.selected_key())
        self._show(self.query_one("#inspector", Static), text)

    @on(events.DescendantFocus)
    @on(events.DescendantBlur)
    def _selection_moved(self) -> None:
        """A chart was selected (focused) or left: the inspector says what the selected metric means."""
        self.call_after_refresh(self._refresh_inspector)

    def _show(self, widget: Static, text: Text) -> None:
        """Update a line only when its text changed (an update re-lays out the screen: a tick should not)."""
        if self._shown.get(widget) != text:
            self._shown[widget] = text
            widget.update(text)

    def _scrolled(self) -> None:
        self._refresh_inspector()

    # -- live -------------------------------------------------------------------------

    @on(TelemetryAppended)
    def _telemetry(self, message: TelemetryAppended) -> None:
        """New metric points: read the series of the keys that got some (their charts redraw)."""
        self._sync_metrics(message.metric_keys)

    def _sync_metrics(self, keys: tuple[str, ...] = ()) -> None:
        """Catch up with the store: ``keys`` and every key whose point count moved get their new series.

        Only those charts redraw; a key never charted before (or the first metrics of a
        run shown from its dumps) rebuilds the grid. The series are read in a thread.
        """
        if not keys and not self.first_read:
            counts = self.miles.watcher.follower.metrics.point_counts_now()
            if counts is None or counts == self._counts:
                return  # unchanged, or the store is busy storing a block: the next tick looks again
        self._read(keys=keys)

    # -- baselines: their series of the charted keys, read in a thread (the newest ask wins) ---------------

    def _read_overlays(self) -> None:
        if len(self.miles.baselines) and self.charts:
            self._overlay_reads.ask(lambda: (tuple(self.miles.baselines), dict(self.series), self.source))

    def _show_overlays(self, overlays: dict[str, tuple[Overlay, ...]]) -> None:
        self.overlays = overlays
        for key, chart in self.charts.items():
            chart.overlays = overlays.get(key, ())
        self._refresh_status()

    @on(BaselinesChanged)
    def _baselines_changed(self, message: BaselinesChanged) -> None:
        if message.added or message.metric_keys or (self.source == "dump" and message.steps):
            self._read_overlays()

    @on(StepsSummarized)
    def _summarized(self, message: StepsSummarized) -> None:
        """Step summaries arrived (one batch per poll): without metrics.jsonl, the dump-derived series change."""
        if self.source != "metrics":
            self._read()

    def _run_changed(self, model: RunModel) -> None:
        """A poll ended: pick up metric points no TelemetryAppended brought.

        The check is queued behind the messages already waiting: the app publishes
        the model just before it posts the TelemetryAppended of the same poll, and
        that one redraws the charts; the check then finds nothing left (one redraw
        per tick).
        """
        self.call_later(self._sync_metrics)
        self._refresh_wandb()  # a resumed run rewrites meta.json

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
        self.focus_now(box)

    def _close_filter(self) -> None:
        self.query_one("#filter", Input).display = False
        self.focus_now(self.query_one("#charts", VerticalScroll))

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

    def action_select_chart(self, delta: int) -> None:
        """Select the next (previous) shown chart; the first press selects the first (last) chart in view."""
        keys = self.shown_keys()
        if not keys:
            return
        current = self.selected_key()
        if current in keys:
            key = keys[(keys.index(current) + delta) % len(keys)]
        else:
            in_view = self.in_view_keys() or keys
            key = in_view[0] if delta > 0 else in_view[-1]
        self.charts[key].focus()

    def action_clear_cursor(self) -> None:
        self.set_cursor(None)

    def _extents(self) -> dict[str, tuple[float, float]]:
        return step_extents(self.series[key] for key in self.shown_keys())

    def action_zoom(self, direction: int) -> None:
        """Halve (-1) or double (1) the steps shown, each step key on its own (core's ``zoom_keyed``)."""
        steps = zoom_keyed(self.view.steps, self._extents(), direction, self.cursor)
        if steps == self.view.steps:
            self.notify("zoomed in as far as it goes" if steps else "the charts show every step already", timeout=3)
            return
        self._set_view(replace(self.view, steps=steps))

    def action_whole_run(self) -> None:
        if self.view.steps:
            self._set_view(replace(self.view, steps=()))

    def set_cursor(self, step: float | None) -> None:
        """Put the step cursor on every chart (None: remove it); a zoomed view slides to keep it in sight."""
        self.cursor = step
        held = keyed_holding(self.view.steps, self._extents(), step) if step is not None else self.view.steps
        if held != self.view.steps:
            self._set_view(replace(self.view, steps=held))
        for chart in self.charts.values():
            chart.cursor = step
        self._refresh_inspector()
