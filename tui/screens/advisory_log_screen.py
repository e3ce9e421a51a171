"""The advisory log: every advisory the run has had, active or cleared, with its first and last step and time.

Contract: the rows are the app model's ``advisory_log`` (core's fold of every step's rules and every
poll), formatted by :mod:`miles_tui.tui.views.advisory_rows`; the screen refreshes when the model is
published. Enter on an advisory that names a step opens that step (the one it was last seen at) and
sample; on one about the telemetry it opens the view that shows it (engines, GPUs, metrics); otherwise
it says why nothing opens.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Label

from miles_tui.core.analysis.advisory_log import LoggedAdvisory, key_of
from miles_tui.tui.model.run_model import RunModel
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.views.advisory_rows import LOG_COLUMNS, log_cells
from miles_tui.tui.views.lazy_rows import TableRow
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.virtual_table import VirtualTable


class AdvisoryLogScreen(MonitorScreen):
    """Every advisory seen, active first."""

    CSS_PATH = "advisory_log_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,backspace", "back", "Back")]

    def __init__(self) -> None:
        super().__init__()
        self._entries: dict[object, LoggedAdvisory] = {}

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("", id="log-title")
        table = VirtualTable(id="log")
        table.placeholder = "no advisory yet: nothing has needed attention since the monitor opened the run"
        yield table
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#log", VirtualTable)
        table.set_columns(LOG_COLUMNS)
        self._show(self.miles.model)
        self.miles.run_changed.subscribe(self, self._show)
        table.focus()

    def _show(self, model: RunModel) -> None:
        entries = model.advisory_log.entries
        self._entries = {key_of(e.advisory): e for e in entries}
        rows = [TableRow(key_of(e.advisory), log_cells(e)) for e in entries]
        self.query_one("#log", VirtualTable).set_rows(rows)
        active = sum(e.active for e in entries)
        title = Text(f"advisory log · {active} active, {len(entries) - active} cleared", style="bold")
        title.append("  (enter: go to its step or view; a cleared one: the step it was last seen at)", style="dim")
        self.query_one("#log-title", Label).update(title)

    @on(VirtualTable.Selected, "#log")
    def _selected(self, message: VirtualTable.Selected) -> None:
        """Enter: what the advisory is about."""
        entry = self._entries.get(message.key)
        if entry is not None:
            self.miles.navigation.go_to_advisory(entry.advisory)

    def action_back(self) -> None:
        self.app.pop_screen()
