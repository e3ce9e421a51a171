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
from miles_tui.core.analysis.scatter import within_lengths
from miles_tui.core.analysis.step_window import zoom_steps
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
        Binding("plus,equals_sign", "zoom(-1)", "Zoom in", key_display="+"),
        Binding("minus", "zoom(1)", "Zoom out", key_display="-", show=False),
        Binding("0", "all_lengths", "Every length", show=False),
    ]

    def __init__(self, rollout_id: int, evaluation: bool = False) -> None:
        super().__init__()
        self.rollout_id = rollout_id
        self.evaluation = evaluation
        self.scatter: Scatter | None = None
        """The points drawn (the step's, within :attr:`lengths`)."""
        self.full: Scatter | None = None
        """Every point of the step."""
        self.lengths: tuple[float, float] | None = None
        """The response lengths shown (None: all): ``+``/``-`` zoom around the cursor's point, ``0`` all."""
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
        self.full = step_scatter(summary)
        self._view()

    def _view(self, center: float | None = None) -> None:
        """Draw the step's points within :attr:`lengths`, the cursor kept on its sample (else on the point nearest
        ``center``, else the middle one)."""
        assert self.full is not None
        kept = self._point_sample()
        self.scatter = within_lengths(self.full, self.lengths)
        points = self.scatter.points
        ids = [p.sample_index for p in points]
        if kept in ids:
            self.cursor = ids.index(kept)
        elif center is not None and points:
            self.cursor = min(range(len(points)), key=lambda i: abs(points[i].length - center))
        else:
            self.cursor = len(ids) // 2
        self._show()

    def _point_sample(self) -> int | None:
        if self.scatter is None or not self.scatter.points:
            return None
        return self.scatter.points[self.cursor].sample_index

    def _show(self) -> None:
        kind = "eval step" if self.evaluation else "step"
        title = Text(f"{kind} {self.rollout_id} · reward vs response length", style="bold", no_wrap=True)
        title.overflow = "ellipsis"
        scatter = self.scatter
        if scatter is not None:
            title.append(f" · {len(scatter.points)} samples", style="")
            if self.lengths is not None:
                low, high = scatter.length_range
                title.append(f" · lengths {low}–{high}", style="bold")
                title.append(f", {scatter.outside} outside", style="dim")
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

    def action_zoom(self, direction: int) -> None:
        """Halve (-1) or double (1) the response lengths shown, around the cursor's point; out to every length."""
        full = self.full
        if full is None or not full.points:
            return
        center = None
        if self.scatter is not None and self.scatter.points:
            center = float(self.scatter.points[self.cursor].length)
        low, high = full.length_range
        window = zoom_steps(self.lengths, (float(low), float(high)), direction, center)
        if window == self.lengths:
            self.notify("every length is shown" if window is None else "zoomed in as far as it goes", timeout=3)
            return
        self.lengths = window
        self._view(center)

    def action_all_lengths(self) -> None:
        if self.lengths is not None:
            self.lengths = None
            self._view()

    def action_open(self) -> None:
        sample = self._point_sample()
        if sample is not None:
            self.miles.navigation.show_sample(self.rollout_id, self.evaluation, sample)

    def action_back(self) -> None:
        self.app.pop_screen()
