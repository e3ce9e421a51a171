"""Reward against response length for one step, with a cursor that walks the points.

Contract: the points come from :mod:`miles_tui.core.analysis.scatter` over the step's summary as
the app's model holds it (no file is read here); drawing is
:func:`~miles_tui.tui.renderers.scatter.scatter_lines`. Enter opens the sample under the
cursor through the app's one sample path. A new summary of the same step redraws the plot and
keeps the cursor on the same sample when it is still there.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Footer, Label

from miles_tui.core.analysis import Scatter, step_cursor, step_scatter
from miles_tui.core.dump import StepKey, StepSummary
from miles_tui.tui.formatting import number
from miles_tui.tui.model.messages import StepsSummarized
from miles_tui.tui.renderers.scatter import LEGEND, legend, scatter_lines
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.widgets.run_header import RunHeader


class ScatterPlot(Widget):
    """The braille plot; it draws whatever scatter and cursor it is given."""

    DEFAULT_CSS = "ScatterPlot { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.scatter: Scatter | None = None
        self.cursor: int | None = None

    def show(self, scatter: Scatter, cursor: int | None) -> None:
        self.scatter, self.cursor = scatter, cursor
        self.refresh()

    def render(self) -> Text:
        if self.scatter is None:
            return Text("waiting for the step's summary…", style="dim")
        if not self.scatter.points:
            return Text("no sample of this step has a scalar reward to plot", style="dim")
        lines = scatter_lines(self.scatter, self.size.width, self.size.height, self.cursor)
        return Text("\n").join(lines)


class ScatterScreen(MonitorScreen):
    """Reward vs response length of one step."""

    CSS_PATH = "scatter_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        Binding("left,h", "walk('left')", "Shorter", key_display="←", show=False),
        Binding("right,l", "walk('right')", "Longer", key_display="→", show=False),
        Binding("up,k", "walk('up')", "Higher reward", key_display="↑", show=False),
        Binding("down,j", "walk('down')", "Lower reward", key_display="↓", show=False),
        Binding("enter", "open", "Open sample"),
    ]

    def __init__(self, rollout_id: int, evaluation: bool = False) -> None:
        super().__init__()
        self.rollout_id = rollout_id
        self.evaluation = evaluation
        self.scatter: Scatter | None = None
        self.cursor = 0

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("", id="title")
        yield ScatterPlot(id="plot")
        yield Label("", id="point")
        yield Label(LEGEND, id="legend")
        yield Footer()

    def on_mount(self) -> None:
        summary = self.miles.model.summaries.get(StepKey(self.rollout_id, self.evaluation))
        if summary is not None:
            self._take(summary)
        else:
            self._show()

    @on(StepsSummarized)
    def _summarized(self, message: StepsSummarized) -> None:
        """The step's summary changed (it was still landing): redraw, keep the cursor's sample."""
        summary = message.summary_of(StepKey(self.rollout_id, self.evaluation))
        if summary is not None:
            self._take(summary)

    def _take(self, summary: StepSummary) -> None:
        kept = self._point_sample()
        self.scatter = step_scatter(summary)
        ids = [p.sample_index for p in self.scatter.points]
        self.cursor = ids.index(kept) if kept in ids else len(ids) // 2
        self._show()

    def _point_sample(self) -> int | None:
        if self.scatter is None or not self.scatter.points:
            return None
        return self.scatter.points[self.cursor].sample_index

    def _show(self) -> None:
        kind = "eval step" if self.evaluation else "step"
        title = Text(f"{kind} {self.rollout_id} · reward vs response length", style="bold")
        scatter = self.scatter
        if scatter is not None:
            title.append(f" · {len(scatter.points)} samples", style="")
            if scatter.without_reward:
                title.append(f" · {scatter.without_reward} without a scalar reward (not drawn)", style="dim")
        self.query_one("#title", Label).update(title)
        plot = self.query_one("#plot", ScatterPlot)
        if scatter is None:
            return
        plot.show(scatter, self.cursor if scatter.points else None)
        self.query_one("#legend", Label).update(legend(scatter))
        point = Text()
        if scatter.points:
            p = scatter.points[self.cursor]
            point.append(f"sample {p.sample_index}", style="bold")
            point.append(f" · reward {number(p.reward)} · {p.length} tokens")
            if p.truncated:
                point.append(" · truncated", style="bold yellow")
            point.append("  (enter: open)", style="dim")
        self.query_one("#point", Label).update(point)

    def action_walk(self, direction: str) -> None:
        if self.scatter is None or not self.scatter.points:
            return
        self.cursor = step_cursor(self.scatter, self.cursor, direction)
        self._show()

    def action_open(self) -> None:
        sample = self._point_sample()
        if sample is not None:
            self.miles.navigation.show_sample(self.rollout_id, self.evaluation, sample)

    def action_back(self) -> None:
        self.app.pop_screen()
