"""Batch anatomy: one row per sample of a step, its lifecycle (queued, generating, tool calls, reward and
waiting, consumed) on one time axis, from ``dashboard/trajectories/``.

Contract: the lanes come from :mod:`miles_tui.core.analysis.batch_anatomy` (computed in a thread: the events,
the step's summary, the consume anchor from ``metrics.jsonl``); this screen formats rows
(:mod:`miles_tui.tui.views.anatomy_rows`), sorts them (``s`` cycles miles' orders) and navigates: Enter on a row opens
that sample. The lane column's header is the axis; the legend sits under the table. New trajectory events or
metrics recompute it (a live step fills in).
"""

from __future__ import annotations

from typing import ClassVar, Final, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Label

from miles_tui.core.analysis.batch_anatomy import (
    CONSUME_KEY,
    SORTS,
    BatchAnatomy,
    batch_anatomy,
    consume_time,
    event_window,
    sorted_rows,
)
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import StepKey, StepSummary
from miles_tui.tui.model.messages import TelemetryAppended
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.views.anatomy_rows import anatomy_columns, anatomy_row, anatomy_title, legend_text
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.virtual_table import VirtualTable

STREAM: Final = "trajectories"
_FIXED_WIDTH: Final = 7 + 18 + 9 + 3 * 2 + 4
"""Cells the table's other columns, gaps, border and scrollbar take from the lane."""


class AnatomyScreen(MonitorScreen):
    """One step's samples as lifecycle lanes."""

    CSS_PATH = "anatomy_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        Binding("s", "sort(1)", "Sort"),
        Binding("S", "sort(-1)", "Previous sort", show=False),
        Binding("r", "recompute", "Recompute", show=False),
    ]

    def __init__(self, rollout_id: int, evaluation: bool = False) -> None:
        super().__init__()
        self.rollout_id = rollout_id
        self.evaluation = evaluation
        self.sort = SORTS[0]
        self.anatomy: BatchAnatomy | None = None
        """The anatomy drawn last."""

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("", id="anatomy-title")
        table = VirtualTable(id="anatomy")
        table.placeholder = "reading the step's trajectory events…"
        yield table
        yield Label(legend_text(), id="anatomy-legend")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#anatomy", VirtualTable).focus()
        self.query_one("#anatomy-title", Label).update(Text(f"Batch anatomy · step {self.rollout_id} · loading…"))
        if self.evaluation:
            self._say("Batch anatomy is for train steps: miles records no lifecycle events for eval samples.")
            return
        self._load()

    def _say(self, message: str) -> None:
        table = self.query_one("#anatomy", VirtualTable)
        table.set_rows(())
        table.placeholder = message

    # -- computing ------------------------------------------------------------------------------------

    @work(exclusive=True, group="anatomy", exit_on_error=False)
    async def _load(self) -> None:
        summary = self.miles.model.summaries.get(StepKey(self.rollout_id, False))
        if summary is None:
            try:
                summary = await self.miles.watcher.summary(self.rollout_id, False)
            except Exception as err:
                self._say("✗ " + inert(str(err)))
                return
        self._compute(summary)

    @work(thread=True, group="anatomy-compute", exclusive=True, exit_on_error=False)
    def _compute(self, summary: StepSummary) -> None:
        follower = self.miles.watcher.follower
        try:
            consumed = consume_time(follower.metrics, self.rollout_id)
            since, until = event_window(consumed)
            events = follower.dashboard.records(STREAM, since, until)
            anatomy = batch_anatomy(self.rollout_id, events, summary.rows, consumed)
        except Exception as err:  # telemetry problems never take the screen down
            self.app.call_from_thread(self._say, "✗ cannot read the trajectory events: " + inert(str(err)))
            return
        self.app.call_from_thread(self._show, anatomy)

    def _show(self, anatomy: BatchAnatomy) -> None:
        if not self.is_attached:
            return
        self.anatomy = anatomy
        self._draw()

    # -- drawing --------------------------------------------------------------------------------------

    def lane_width(self) -> int:
        """Cells the lane column gets at the screen's width."""
        return max(self.size.width - _FIXED_WIDTH, 10)

    def _draw(self) -> None:
        anatomy = self.anatomy
        if anatomy is None:
            return
        self.query_one("#anatomy-title", Label).update(anatomy_title(anatomy, self.sort))
        table = self.query_one("#anatomy", VirtualTable)
        if not anatomy.lanes:
            table.set_rows(())
            table.placeholder = (
                f"No trajectory recorded for step {self.rollout_id}: dashboard/trajectories/ holds no lifecycle "
                "event of its samples. miles writes them when the run has the dashboard on (its rollout "
                "probes); a run that predates them has none."
            )
            return
        width = self.lane_width()
        table.set_columns(anatomy_columns(anatomy, width))
        table.set_rows([anatomy_row(row, anatomy, width) for row in sorted_rows(anatomy, self.sort)])

    def lane_texts(self) -> list[str]:
        """Each row's cells as plain text, in order (for tests and screen readers)."""
        table = self.query_one("#anatomy", VirtualTable)
        return [" ".join(cell.plain for cell in row.cells) for row in table.rows]

    # -- live -----------------------------------------------------------------------------------------

    @on(TelemetryAppended)
    def _telemetry(self, message: TelemetryAppended) -> None:
        """New events (or the metrics record that anchors the step): compute again."""
        if not self.evaluation and (STREAM in message.streams or CONSUME_KEY in message.metric_keys):
            self._load()

    def on_resize(self) -> None:
        self._draw()

    # -- actions --------------------------------------------------------------------------------------

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_recompute(self) -> None:
        if not self.evaluation:
            self._load()

    def action_sort(self, delta: int) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + delta) % len(SORTS)]
        self._draw()

    @on(VirtualTable.Selected, "#anatomy")
    def _selected(self, message: VirtualTable.Selected) -> None:
        """Enter on a sample: its sample screen."""
        table = self.query_one("#anatomy", VirtualTable)
        self.miles.navigation.show_sample(self.rollout_id, False, cast(int, message.key), busy=table)
