"""The GPU view's straggler tools: miles' lane grammar at ``/``, the slowest-phase pick ``W``, the point-in-time
inspector at a cursor (``[``/``]``), power rows ``p``.

The base of :class:`~miles_tui.tui.screens.compute_screen.ComputeScreen`: it holds the tools' state and
actions; the screen calls :meth:`StragglerTools.lanes_shown` when it lists lanes, :meth:`StragglerTools.
lane_rows` for the rows and :meth:`StragglerTools.refresh_inspector` after every draw. Core does the work
(:mod:`miles_tui.core.analysis.lane_grammar`, :mod:`~miles_tui.core.analysis.slowest_phase`,
:mod:`~miles_tui.core.telemetry.process_hours`); reading runs in worker threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Final

import numpy as np
from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Input, Label, Static

from miles_tui.core.analysis import ComputeView, LaneHealth, LaneSelection, select_lanes
from miles_tui.core.analysis.compute_view import LaneGrid
from miles_tui.core.analysis.lane_grammar import (
    MAX_LENGTH,
    LaneExpression,
    LaneFacts,
    LaneGrammarError,
    parse_lanes,
    resolve_lanes,
)
from miles_tui.core.analysis.slowest_phase import (
    PICK_COUNT,
    SlowLane,
    phase_names,
    pick_expression,
    slowest_phase,
)
from miles_tui.core.base.inert_text import inert
from miles_tui.core.telemetry import TelemetryColumns
from miles_tui.core.telemetry.process_hours import NEAREST_SECONDS, LaneProcesses, ProcessHours
from miles_tui.tui.formatting import duration
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.views.compute_rows import LaneRows
from miles_tui.tui.views.straggler_lines import PowerLaneRows, inspector_lines, pick_lines

LANE_HELP: Final = (
    "lanes: rank:0-7 g:0-31 node:<host> gpu:<host>:<i> engine:<addr> role:train|rollout every:<n>, "
    "comma = or; empty or all: every lane"
)

HELP_TEXT: Final = (
    "Lanes (/), miles' lane grammar: selectors separated by commas, a lane any of them selects is listed: "
    "rank:5 or rank:0-7 (train ranks), g:0-31 (lane numbers: the lanes sorted by host, then GPU, as miles numbers "
    "them), node:HOST, gpu:HOST:INDEX, engine:TEXT (an engine whose address contains it, from topology.jsonl), "
    "role:train or role:rollout, every:N (every N-th lane number); empty or all: every lane; esc: back. "
    f"W (slowest phase) ranks lanes as miles' quick pick does: by the mean duration of one phase's spans on the "
    f"lane in the window, longest first, {PICK_COUNT} lanes; update_weights first, W again: the next phase. "
    "[ ] move a cursor along the time axis a bin ({ } ten): each listed lane's utilisation, memory, power and "
    "phase in that bin, and the processes holding its memory at the nearest gpu_processes snapshot "
    f"(within {duration(NEAREST_SECONDS, minutes=True)}). p: a power row under each lane."
)

BIG_STEP: Final = 10
"""Bins ``{``/``}`` move the cursor."""


class StragglerTools(MonitorScreen):
    """See the module docstring: the base of ComputeScreen, which sets what is declared here."""

    view: ComputeView | None
    """The view drawn last."""
    columns: TelemetryColumns | None
    """The run's telemetry columns."""
    shown: tuple[int, ...]
    """Positions (into the view's lanes) listed."""

    def _draw(self) -> None:
        """Draw the view again (the screen's own)."""
        raise NotImplementedError

    HELP_TEXT: ClassVar[str] = HELP_TEXT
    """Said under the keys in ``?`` help."""

    STRAGGLER_BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Lanes", key_display="/", priority=True),
        Binding("W", "slowest", "Slowest phase (mean span, as miles picks)", key_display="W", show=False),
        Binding("left_square_bracket", "cursor(-1)", "Cursor earlier", key_display="[", show=False),
        Binding("right_square_bracket", "cursor(1)", "Cursor later", key_display="]", show=False),
        Binding("left_curly_bracket", f"cursor(-{BIG_STEP})", "Cursor ×10 earlier", key_display="{", show=False),
        Binding("right_curly_bracket", f"cursor({BIG_STEP})", "Cursor ×10 later", key_display="}", show=False),
        Binding("p", "power", "Power rows", show=False),
    ]

    expression: LaneExpression | None = None
    """The lane expression in force (None: the w/n/a selection)."""
    facts: tuple[LaneFacts, ...] = ()
    """Per lane of the view's grid: what the grammar selects by."""
    pick: tuple[str, tuple[SlowLane, ...]] | None = None
    """The slowest-phase pick in force: its phase and lanes, slowest first."""
    power_rows: bool = False
    """Whether each lane shows a power line."""
    cursor: float | None = None
    """The inspector's time (None: closed)."""
    processes: tuple[LaneProcesses, ...] | None = None
    """The processes at the cursor (None: being read)."""
    processes_written: bool = True
    """Whether the run has a ``gpu_processes`` stream at all."""
    _processes_for: tuple[Any, ...] = ()
    _process_hours: ProcessHours | None = None

    def compose_tools(self) -> Any:
        """Under the title: what the expression or pick in force says (or the prompt's error)."""
        yield Label("", id="lane-status")

    def compose_inspector(self) -> Any:
        """Under the lanes: the inspector, then the prompt (hidden until / by the stylesheet; last, so the
        screen's first focus stays on the lanes)."""
        yield VerticalScroll(Static("", id="inspector"), id="inspector-pane")
        yield Input(placeholder=LANE_HELP, id="lane-filter", max_length=MAX_LENGTH)

    # -- which lanes ---------------------------------------------------------------------------------

    def lanes_shown(self, grid: LaneGrid, health: Sequence[LaneHealth], selection: LaneSelection) -> tuple[int, ...]:
        """Positions of the lanes to list: the expression's (a pick's in its order), else the selection's."""
        if self.expression is None or len(self.facts) != len(grid.lanes):
            return select_lanes(grid, health, selection)
        chosen = resolve_lanes(self.expression, self.facts)
        if self.pick is not None:
            rank = {p.lane: n for n, p in enumerate(self.pick[1])}
            chosen = tuple(sorted(chosen, key=lambda i: (rank.get(grid.lanes[i], len(rank)), i)))
        return chosen

    def expression_text(self, total: int) -> str | None:
        """The title's words for the expression in force (None: none is)."""
        if self.expression is None:
            return None
        what = f"slowest {self.pick[0]}" if self.pick is not None else f"lanes {self.expression.text}"
        count = len(self.shown)
        return (
            f"{what}: {count} of {total} (/: change, W: next phase, esc: all)"
            if self.pick
            else (f"{what}: {count} of {total} (/: change, esc: all)")
        )

    def lane_rows(self) -> LaneRows:
        assert self.view is not None
        kind = PowerLaneRows if self.power_rows else LaneRows
        return kind(self.view, self.shown)

    # -- the prompt ----------------------------------------------------------------------------------

    def action_filter(self) -> None:
        box = self.query_one("#lane-filter", Input)
        box.display = True
        box.value = self.expression.text if self.expression is not None else ""
        self.focus_now(box)

    def close_filter(self) -> bool:
        """Close the prompt if open (True: it was)."""
        box = self.query_one("#lane-filter", Input)
        if not box.display:
            return False
        box.display = False
        self.focus_now(self.query_one("#lanes"))
        return True

    def on_input_submitted(self, message: Input.Submitted) -> None:
        """The prompt's expression: applied, or its error said under the title (the prompt stays open)."""
        if message.input.id != "lane-filter":
            return
        message.stop()
        status = self.query_one("#lane-status", Label)
        try:
            expression = parse_lanes(message.value)
        except LaneGrammarError as err:
            status.display = True
            status.update(Text(f"lane expression: {inert(str(err))}", style="bold red"))
            return
        self.close_filter()
        self.pick = None
        self.set_expression(None if expression.everything else expression)

    def set_expression(self, expression: LaneExpression | None, note: Text | None = None) -> None:
        self.expression = expression
        status = self.query_one("#lane-status", Label)
        status.display = note is not None
        status.update(note or "")
        self._draw()
        self.query_one("#lanes").scroll_home(animate=False)

    def clear_tools(self) -> bool:
        """Esc: close the prompt, else the inspector, else drop the expression (True: something was)."""
        if self.close_filter():
            self.query_one("#lane-status", Label).display = False
            return True
        if self.cursor is not None:
            self.cursor = None
            self.query_one("#inspector-pane").display = False
            self._draw()
            return True
        if self.expression is not None:
            self.pick = None
            self.set_expression(None)
            return True
        return False

    # -- the slowest-phase pick ------------------------------------------------------------------------

    def action_slowest(self) -> None:
        """Lanes by mean span of a phase in the window (miles' quick pick; again: the next phase)."""
        if self.view is None or self.columns is None:
            return
        frame = self.view.frame
        after = self.pick[0] if self.pick is not None else None
        status = self.query_one("#lane-status", Label)
        status.display = True
        status.update(Text("W · ranking lanes by the mean span of a phase in the window…", style="dim"))
        self._pick(frame.since, frame.until, after)

    @work(thread=True, group="slowest", exclusive=True, exit_on_error=False)
    def _pick(self, since: float, until: float, after: str | None) -> None:
        assert self.columns is not None
        try:
            spans = self.columns.phase_spans(since, until, ())
            names = phase_names(spans, since, until)
            if not names:
                self.app.call_from_thread(self._pick_failed, "no closed phase on a GPU in this window to rank lanes by")
                return
            phase = names[(names.index(after) + 1) % len(names)] if after in names else names[0]
            picked = slowest_phase(spans, phase, since, until)
        except Exception as err:  # telemetry problems never take the screen down
            self.app.call_from_thread(self._pick_failed, f"cannot rank lanes: {err}")
            return
        self.app.call_from_thread(self._picked, phase, picked)

    def _pick_failed(self, message: str) -> None:
        """Say under the title why W picked nothing (the lanes listed stay)."""
        self.query_one("#lane-status", Label).update(Text(f"W · {inert(message)}", style="yellow"))

    def _picked(self, phase: str, picked: tuple[SlowLane, ...]) -> None:
        self.pick = (phase, picked)
        text = pick_expression([p.lane for p in picked]) or "gpu:none:0"
        self.set_expression(parse_lanes(text), pick_lines(phase, picked))

    # -- power ---------------------------------------------------------------------------------------

    def action_power(self) -> None:
        self.power_rows = not self.power_rows
        self._draw()

    # -- the inspector -------------------------------------------------------------------------------

    def action_cursor(self, steps: int) -> None:
        """Move the inspector's cursor ``steps`` bins (opening it at the newest bin)."""
        if self.view is None or not self.view.grid.lanes:
            return
        bins = self.view.grid.bins
        if self.cursor is None or not bins.since <= self.cursor <= bins.until:
            sampled = np.flatnonzero(self.view.grid.samples.sum(axis=0) > 0)
            newest = int(sampled[-1]) if len(sampled) else bins.count - 1  # the newest bin anything was sampled in
            at = bins.since + (newest + 0.5) * bins.width
        else:
            at = self.cursor + steps * bins.width
        self.cursor = min(max(at, bins.since + bins.width / 2), bins.until - bins.width / 2)
        self.query_one("#inspector-pane").display = True
        self._draw()

    def refresh_inspector(self) -> None:
        """Write the inspector for the cursor (and read the processes there, once per cursor and lanes)."""
        if self.cursor is None or self.view is None:
            return
        lanes = tuple(self.view.grid.lanes[i] for i in self.shown)
        key = (self.cursor, lanes)
        if key != self._processes_for:
            self._processes_for, self.processes = key, None
            self._read_processes(self.cursor, lanes)
        self._write_inspector()

    def _write_inspector(self) -> None:
        if self.cursor is None or self.view is None:
            return
        lines = inspector_lines(self.view, self.shown, self.cursor, self.processes, self.processes_written)
        text = Text("\n").join(lines)
        self.query_one("#inspector", Static).update(text)

    @work(thread=True, group="processes", exclusive=True, exit_on_error=False)
    def _read_processes(self, at: float, lanes: tuple[Any, ...]) -> None:
        if self._process_hours is None:
            directory = self.columns.directory if self.columns is not None else None
            if directory is None:
                return
            self._process_hours = ProcessHours(directory)  # one hour at a time: read in this thread, no pool
        try:
            written = self._process_hours.exists()
            found = self._process_hours.at(at, lanes) if written else ()
        except Exception:  # an unreadable stream reads as "no snapshot", the rest of the inspector stands
            written, found = True, ()
        self.app.call_from_thread(self._processes_read, (at, lanes), found, written)

    def _processes_read(self, key: tuple[Any, ...], found: tuple[LaneProcesses, ...], written: bool) -> None:
        if key == self._processes_for:
            self.processes, self.processes_written = found, written
            self._write_inspector()
