"""The compute screen: per-GPU utilisation lanes, the phases the ranks were in, and the fleet, over time.

What it draws comes from :mod:`miles_tui.core.analysis.compute_view` (binning, ages, fleet
percentiles, phase shares per band and per lane, lane picking), computed in a worker thread from
:class:`~miles_tui.core.telemetry.telemetry_columns.TelemetryColumns`, which converts only the
records the app's poll added. The screen keeps the window
(:class:`~miles_tui.core.telemetry.time_window.TimeWindow`: ``+``/``-`` zoom, ``←``/``→`` pan by
half a window, ``0`` (or ``shift+→``) live again, ``shift+←`` the run's start, ``1``-``4`` the preset live
windows; the zoom and pan rules are core's) and the lane picker, and turns the view into lines
(:mod:`miles_tui.tui.views.compute_rows`); it reads no file itself. It redraws when the
app forwards new gpu_util or phases records (TelemetryAppended), and on a
run-status poll that finds the reader holding records not drawn yet or a view
older than a few seconds, so ages keep moving while nothing arrives.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar, Final

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Label

from miles_tui.core.analysis import FLEET_LANES, ComputeView, LaneSelection, nodes_of, sampling_interval
from miles_tui.core.analysis.compute_view import compute_view
from miles_tui.core.analysis.engine_lanes import EngineActivity, engine_activity, engine_gpus
from miles_tui.core.analysis.lane_grammar import LaneFacts, engine_lanes, lane_facts
from miles_tui.core.analysis.slowest_phase import train_actors
from miles_tui.core.analysis.trajectory_flight import InFlight, samples_in_flight
from miles_tui.core.base.inert_text import inert
from miles_tui.core.telemetry import (
    PAN_FRACTION,
    ZOOM_FACTOR,
    Frame,
    GpuSamples,
    Phase,
    TelemetryColumns,
    TimeBins,
    TimeWindow,
    again,
    bin_count,
    frame,
    go_live,
    go_start,
    pan,
    preset,
    zoom,
)
from miles_tui.core.telemetry.engine_hours import EngineHours
from miles_tui.core.telemetry.stream_records import Snapshot
from miles_tui.core.telemetry.telemetry_columns import CELL_WIDTHS
from miles_tui.core.telemetry.time_bins import time_bins
from miles_tui.tui.model.messages import TelemetryAppended
from miles_tui.tui.model.run_model import RunModel
from miles_tui.tui.runtime.recompute import Recompute
from miles_tui.tui.runtime.stream_watch import METRIC_WORKER_NICE as PARSE_NICE
from miles_tui.tui.screens.compute_straggler import StragglerTools
from miles_tui.tui.views.compute_rows import (
    LANE_LINES,
    LaneRows,
    axis_row,
    engine_row,
    fleet_rows,
    lane_label,
    phase_row,
    suffix_width,
    title,
    window_name,
)
from miles_tui.tui.views.flight_rows import flight_rows
from miles_tui.tui.views.starvation_lines import starvation_heat_rows
from miles_tui.tui.views.straggler_lines import cursor_cell, with_cursor
from miles_tui.tui.widgets.heat_rows import HeatRows
from miles_tui.tui.widgets.run_header import RunHeader

Computed = tuple[ComputeView, tuple[EngineActivity, ...], "InFlight | None", tuple[LaneFacts, ...]]
"""What one computation gives: the view, the engine rows over its lanes, the samples in flight per bin, and each
lane's facts for the lane grammar."""

WORST_COUNT: Final = 16
"""Lanes ``w`` lists."""

REFRESH_AGES_SECONDS: Final = 5.0
"""A status poll with no new samples recomputes (ages, DEAD) once this much time has passed."""

QUIET_REFRESH_SECONDS: Final = 30.0
"""... or this much, once the data stopped (the window ends at the last sample): its ages move by the minute."""

CELLS_AFTER_SECONDS: Final = 6 * 3600.0
"""A window longer than this is drawn from the hours' bucket summaries when a bin spans a minute or more."""

CELLS_REFRESH_SECONDS: Final = 60.0
"""A view drawn from summaries (a bin of a minute or more) is recomputed at most this often, new samples or
not: a live run's newest hour grows every second, and a whole-run view needs no redraw per sample."""

LIVE_STREAMS: Final = frozenset({"gpu_util", "phases", "trajectories"})


class ComputeScreen(StragglerTools):
    """GPU lanes, phases and fleet summary over a time window."""

    GLOBAL_VIEW = True

    CSS_PATH = "compute_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        Binding("plus,equals_sign", "zoom(-1)", "Zoom in", key_display="+"),
        Binding("minus", "zoom(1)", "Zoom out", key_display="-"),
        Binding("left", "pan(-1)", "Earlier", key_display="←", show=False),
        Binding("right", "pan(1)", "Later", key_display="→", show=False),
        Binding("0,shift+right", "live", "Live", key_display="0"),
        Binding("shift+left", "start", "Run start", show=False),
        Binding("1", "preset(0)", "Last 15 min", show=False),
        Binding("2", "preset(1)", "Last hour", show=False),
        Binding("3", "preset(2)", "Last 6 h", show=False),
        Binding("4", "preset(3)", "Whole run", show=False),
        Binding("n", "node(1)", "Next node", show=False),
        Binding("N", "node(-1)", "Prev node", key_display="N", show=False),
        Binding("w", "worst", f"Worst {WORST_COUNT}", show=False),
        Binding("a", "all_lanes", "All lanes", show=False),
        *StragglerTools.STRAGGLER_BINDINGS,
    ]

    def __init__(self, columns: TelemetryColumns | None = None, window: TimeWindow | None = None) -> None:
        super().__init__()
        self.columns = columns
        """Converted telemetry; pass the same one to a new ComputeScreen to skip converting it again."""
        self.window = window or preset(0)
        """The window asked for: live or panned, and its length."""
        self.selection: LaneSelection | None = None
        """What the lane list shows (None until the first view: the default depends on the fleet size)."""
        self.view: ComputeView | None = None
        """The view drawn last."""
        self.shown: tuple[int, ...] = ()
        """Positions (into the view's lanes) listed."""
        self.engines: tuple[EngineActivity, ...] = ()
        """Each engine the topology names in the window, with its running requests (a row over the lanes)."""
        self._open_used: tuple[Phase, ...] = ()
        """The open phases the last computation drew (a poll that changes them computes the view again)."""
        self._views: Recompute[Computed] = Recompute(self, "compute", self._job, self._show, self._failed)
        self._binned_width = -1
        self.flight: InFlight | None = None
        """Samples in flight per bin of the view (None: the run recorded no trajectory events)."""
        """The lanes' strip width the last computation binned for."""

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("Compute · loading…", id="compute-title")
        yield from self.compose_tools()
        yield HeatRows(id="axis")
        yield HeatRows(id="fleet")
        yield HeatRows(id="phases")
        yield HeatRows(id="engine-rows")
        yield HeatRows(id="lanes")
        yield from self.compose_inspector()
        yield Label("", id="compute-empty")
        yield Footer()

    def on_mount(self) -> None:
        if self.columns is None:
            self.columns = TelemetryColumns(
                self.miles.watcher.follower.dashboard, workers=os.cpu_count() or 1, nice=PARSE_NICE
            )
        self.query_one("#fleet", HeatRows).display = False
        self.query_one("#compute-empty", Label).display = False
        self.query_one(RunHeader).context = "compute"
        self.miles.run_changed.subscribe(self, self._run_changed)
        self.call_after_refresh(self.recompute)

    # -- computing ------------------------------------------------------------------------------------

    def recompute(self) -> None:
        """Compute the view again (coalesced: at most one computation runs, one more waits)."""
        self._views.request()

    def _job(self) -> Callable[[], Computed]:
        """The computation for the window and lane width of now (on the event loop; it runs in a thread)."""
        width = self.query_one("#lanes", HeatRows).strip_width
        self._binned_width = width
        return functools.partial(self._compute, self.window, max(width, 1), self.miles.watcher.clock())

    def _compute(self, window: TimeWindow, width: int, now: float) -> Computed:
        assert self.columns is not None
        follower = self.miles.watcher.follower
        # The whole run needs every hour parsed; any other window, only the run's bounds.
        extent = self.columns.time_range(everything=True) if window.span is None else self.columns.extent()
        first, newest = extent or (None, None)
        shown = frame(window, now, first, newest)
        since, until = shown.since, shown.until
        samples, bins, interval = self._samples(since, until, width, newest)
        open_phases = self._open_used = follower.open_phases()  # never waits for a poll (a cold one takes seconds)
        if samples.cell is not None:  # zoomed out: the phase rows from the hours' covers too
            spans, time = self.columns.phase_cells(bins, samples.cell, open_phases, now)
        else:
            spans, time = self.columns.phase_spans(since, until, open_phases), None
        view = compute_view(samples, spans, bins, now=now, frame=shown, interval=interval, time=time)
        facts = lane_facts(view.grid.lanes, train_actors(spans, time), self._engines())
        flight = samples_in_flight(follower.dashboard, view.grid.bins, now)
        return view, self._engine_activity(bins), flight, facts

    def _engine_activity(self, bins: TimeBins) -> tuple[EngineActivity, ...]:
        """Each engine the topology names in the window, with its running requests (none without a topology, and
        none for a window longer than :data:`CELLS_AFTER_SECONDS`: the engines' hours hold no summaries, so a whole
        week's rows would read every scrape of the run: 3.8 s and 480 MB on the generated week)."""
        if bins.until - bins.since > CELLS_AFTER_SECONDS:
            return ()
        snapshots = [
            r for r in self.miles.watcher.follower.dashboard.loaded_records("topology") if isinstance(r, Snapshot)
        ]
        hours = getattr(self.miles, "engine_hours", None)
        if not snapshots or not isinstance(hours, EngineHours):
            return ()
        gpus = engine_gpus(snapshots, bins.since, bins.until)
        if not gpus.lanes:
            return ()
        return engine_activity(hours.table(bins.since, bins.until), bins.edges(), gpus)

    def _engines(self) -> dict[str, list[tuple[object, object]]]:
        """Each engine's lanes from the newest ``topology.jsonl`` record held (none: no engine lanes)."""
        try:
            held = self.miles.watcher.follower.dashboard.loaded_records("topology")
        except (KeyError, ValueError):
            return {}
        newest = held[-1] if held else None
        return engine_lanes(getattr(newest, "data", None))

    def _samples(
        self, since: float, until: float, width: int, newest: float | None
    ) -> tuple[GpuSamples, TimeBins, float | None]:
        """The window's samples and bins: the samples themselves while a bin holds less than a minute of them,
        else the hours' bucket summaries, binned in whole buckets (exact at that resolution, and said)."""
        assert self.columns is not None
        if newest is not None and until - since > CELLS_AFTER_SECONDS:
            interval = sampling_interval(self.columns.gpu_samples(newest - 600.0, newest))
            per_bin = (until - since) / bin_count(until - since, interval, width)
            cell = max((w for w in CELL_WIDTHS if w <= per_bin), default=None)
            if cell is not None:
                step = math.ceil(per_bin / cell) * cell
                start = math.floor(since / cell) * cell
                count = max(1, math.ceil((until - start) / step))
                return (
                    self.columns.gpu_cells(start, until, cell),
                    time_bins(start, start + count * step, count),
                    interval,
                )
        samples = self.columns.gpu_samples(since, until)
        interval = sampling_interval(samples)
        return samples, time_bins(since, until, bin_count(until - since, interval, width)), interval

    def _failed(self, message: str) -> None:
        self.query_one("#compute-title", Label).update(Text(f"Compute · cannot read telemetry: {message}", "red"))

    def _show(self, computed: Computed) -> None:
        view, engines, flight, facts = computed
        self.view, self.facts = view, facts
        self.engines = engines
        self.flight = flight
        if self.selection is None and view.grid.lanes:
            many = len(view.grid.lanes) > FLEET_LANES
            self.selection = LaneSelection("worst" if many else "all", count=WORST_COUNT)
        self._draw()
        if self._bins_stale():
            self.recompute()  # the first view did not know the label width yet: bin again, one bin per cell

    def _bins_stale(self) -> bool:
        view = self.view
        if view is None or not view.grid.lanes:
            return False
        width = self.query_one("#lanes", HeatRows).strip_width
        if view.resolution is not None:  # binned in whole buckets, not one bin per cell: stale when the width moved
            return width != self._binned_width
        bins = view.grid.bins
        return bins.count != bin_count(bins.until - bins.since, view.interval, width)

    # -- drawing --------------------------------------------------------------------------------------

    def _draw(self) -> None:
        view = self.view
        if view is None:
            return
        grid = view.grid
        empty = self.query_one("#compute-empty", Label)
        empty.display = not grid.lanes
        for widget in self.query(HeatRows):
            widget.display = bool(grid.lanes)
        if not grid.lanes:
            self.query_one("#compute-title", Label).update(Text(f"Compute · {window_name(view.span)}", "bold"))
            empty.update(
                "This run has no GPU telemetry: dashboard/gpu_util/ is missing or empty.\n"
                "miles writes it when the run is started with dashboard telemetry on."
            )
            return
        selection = self.selection or LaneSelection()
        self.shown = self.lanes_shown(grid, view.health, selection)
        self.query_one("#compute-title", Label).update(title(view, self._picked_text(selection)))
        peak = max((float(np.nanmax(e.running)) for e in self.engines if np.isfinite(e.running).any()), default=1.0)
        engine_lines = [engine_row(activity, peak) for activity in self.engines]
        labels = [lane_label(grid.lanes[i]) for i in self.shown] + [f"█ {inert(b.name)}" for b in view.bands]
        labels += ["silent", "  phases", "  memory", "  power"] + [row.label.plain for row in engine_lines]
        label_width = min(max(len(s) for s in labels), 20 if self.size.width >= 120 else 14)
        phases = [phase_row(band, i) for i, band in enumerate(view.bands)] + flight_rows(self.flight)
        phases += starvation_heat_rows(self.miles.model.starvation, grid.bins)
        fleet = self.query_one("#fleet", HeatRows)
        fleet.display = len(grid.lanes) > FLEET_LANES
        fleet_lines = fleet_rows(view.fleet) if fleet.display else []
        suffix = suffix_width(view, [*phases, *fleet_lines])  # one width for all: the strips line up
        engine_rows = self.query_one("#engine-rows", HeatRows)
        engine_rows.display = bool(engine_lines)
        engine_rows.set_rows(engine_lines, label_width, suffix)
        lanes = self.query_one("#lanes", HeatRows)
        lanes.set_rows(self.lane_rows(), label_width, suffix)
        cell = None if self.cursor is None else cursor_cell(grid.bins.since, grid.bins.until, self.cursor,
                                                             lanes.strip_width)  # fmt: skip
        axis = [with_cursor(axis_row(view, lanes.strip_width), cell)]
        for strips in (lanes, fleet, self.query_one("#phases", HeatRows)):
            strips.set_marker(cell)
        self.query_one("#axis", HeatRows).set_rows(axis, label_width, suffix)
        fleet.set_rows(fleet_lines, label_width, suffix)
        self.query_one("#phases", HeatRows).set_rows(phases, label_width, suffix)
        self.refresh_inspector()

    def _picked_text(self, selection: LaneSelection) -> str:
        total = len(self.view.grid.lanes) if self.view else 0
        chosen = self.expression_text(total)
        if chosen is not None:
            return chosen
        if selection.mode == "node":
            return f"lanes of {selection.node} (n/N: node, a: all)"
        if selection.mode == "worst":
            return f"worst {min(selection.count, total)} of {total} by mean util (a: all, n: by node)"
        return f"all {total} lanes" + (" (w: worst, n: by node)" if total > FLEET_LANES else "")

    def lane_texts(self) -> list[str]:
        """Each listed lane's first line (label and figures) as plain text (for tests and screen readers)."""
        lanes = self.query_one("#lanes", HeatRows)
        per = lanes.rows.lines if isinstance(lanes.rows, LaneRows) else LANE_LINES
        rows = [lanes.rows[i] for i in range(0, len(lanes.rows), per)]
        return [row.label.plain + " " + (row.suffix.plain if row.suffix else "") for row in rows]

    # -- live -----------------------------------------------------------------------------------------

    @on(TelemetryAppended)
    def _telemetry(self, message: TelemetryAppended) -> None:
        """New GPU samples or phases: recompute the view."""
        if LIVE_STREAMS.intersection(message.streams):
            self.recompute()

    def _run_changed(self, model: RunModel) -> None:
        """A poll ended: let ages move even when nothing new arrives."""
        if self.view is None or self.columns is None:
            return
        if self.miles.watcher.follower.open_phases() != self._open_used:  # drawn before a poll knew them
            self.recompute()
            return
        age = self.miles.watcher.clock() - self.view.now
        if self.view.resolution is not None:
            if age >= CELLS_REFRESH_SECONDS:
                self.recompute()
        elif (
            age >= (QUIET_REFRESH_SECONDS if self.view.anchored_to_data else REFRESH_AGES_SECONDS)
            or self.columns.has_news()
        ):
            self.recompute()

    def on_resize(self) -> None:
        self.call_after_refresh(self._resized)

    def _resized(self) -> None:
        self._draw()
        if self._bins_stale():
            self.recompute()

    # -- actions --------------------------------------------------------------------------------------

    def action_back(self) -> None:
        if not self.clear_tools():
            self.app.pop_screen()

    def _current(self) -> Frame | None:
        """The window asked for, resolved over the clock and run of the last view (None before any)."""
        return again(self.view.frame, self.window) if self.view is not None else None

    def _move(self, window: TimeWindow) -> None:
        if window != self.window:
            self.window = window
            self.recompute()

    def action_zoom(self, direction: int) -> None:
        """Halve (-1: in) or double (1: out) the window: a live one stays live, a panned one keeps its centre."""
        current = self._current()
        if current is not None:
            self._move(zoom(current, ZOOM_FACTOR**direction))

    def action_pan(self, direction: int) -> None:
        """Move the window half its length earlier (-1) or later (1); later than now is live again."""
        current = self._current()
        if current is not None:
            self._move(pan(current, direction * PAN_FRACTION))

    def action_live(self) -> None:
        """Back to the live window (ends now, follows new data), same length; said when it already is."""
        current = self._current()
        if current is None:
            self.notify("no GPU view yet: it is still being read", timeout=4)
        elif current.live:
            where = "the last sample (nothing newer was written)" if current.anchored_to_data else "now"
            self.notify(f"already live: the window ends at {where}", timeout=4)
        else:
            self._move(go_live(current))

    def action_start(self) -> None:
        """The window of the same length at the start of the run."""
        current = self._current()
        if current is not None:
            self._move(go_start(current))

    def action_preset(self, index: int) -> None:
        """One of the live windows 15 min / 1 h / 6 h / whole run."""
        self._move(preset(index))

    def action_node(self, delta: int) -> None:
        if self.view is None or not self.view.grid.lanes:
            return
        nodes = nodes_of(self.view.grid.lanes)
        current = self.selection.node if self.selection and self.selection.mode == "node" else None
        start = nodes.index(current) + delta if current in nodes else (0 if delta > 0 else -1)
        index = start % len(nodes)
        self.selection = replace(self.selection or LaneSelection(), mode="node", node=nodes[index])
        self.expression = self.pick = None
        self._draw()
        self.query_one("#lanes", HeatRows).scroll_home(animate=False)

    def action_worst(self) -> None:
        self.selection = replace(self.selection or LaneSelection(), mode="worst", count=WORST_COUNT)
        self.expression = self.pick = None
        self._draw()
        self.query_one("#lanes", HeatRows).scroll_home(animate=False)

    def action_all_lanes(self) -> None:
        self.selection = replace(self.selection or LaneSelection(), mode="all")
        self.expression = self.pick = None
        self._draw()
