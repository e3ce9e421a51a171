"""Two steps side by side, group by group: A | B | Δ for every figure, and a group slot across steps.

Contract: every figure and delta comes from :mod:`miles_tui.core.analysis.compare`; this screen
fetches summaries through the app (the model first, the watcher off the event
loop otherwise), formats and navigates. A delta reads without colour too: an
arrow and its size (``↑0.25``, ``↓3.0``, ``=``), coloured only as a hint
(green better, red worse, cyan neither). Enter on a group shows that group
slot in every step the app has summarized (group numbering restarts per step:
the same slot, not necessarily the same prompt); Enter on one of its samples
opens the sample screen; Esc goes back to the groups, then off the screen.
Reads through the watcher are shielded: a load cancelled by the next ``[``/``]``
must not release the watcher's lock while its read still runs in a thread.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Label

from miles_tui.core.analysis import (
    StepComparison,
    compare_steps,
    group_across_steps,
    group_of,
)
from miles_tui.core.base.errors import MilesTuiError
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import StepKey, StepSummary
from miles_tui.tui.formatting import MISSING
from miles_tui.tui.model.messages import StepsSummarized
from miles_tui.tui.runtime.baseline_watch import NO_BASELINE, Baseline, BaselinesChanged
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.views.compare_rows import (
    GROUP_COLUMNS,
    SLOT_WARNING,
    TRACE_COLUMNS,
    group_cells,
    headline,
    trace_rows,
)
from miles_tui.tui.views.lazy_rows import TableRow
from miles_tui.tui.views.step_rows import group_rewards_unreadable
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.virtual_table import VirtualTable


class CompareScreen(MonitorScreen):
    """Step A against step B, group by group."""

    CSS_PATH = "compare_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        Binding("left_square_bracket", "move('b', -1)", "B prev", key_display="["),
        Binding("right_square_bracket", "move('b', 1)", "B next", key_display="]"),
        Binding("left_curly_bracket", "move('a', -1)", "A prev", key_display="{", show=False),
        Binding("right_curly_bracket", "move('a', 1)", "A next", key_display="}", show=False),
        Binding("x", "swap", "Swap A/B", show=False),
        Binding("b", "baseline_side", "B from a baseline run (same step as A)", show=False),
        # a step's own views, on step B (they did nothing here and said nothing)
        Binding("O", "outliers", "Outliers of B", show=False),
        Binding("p", "scatter", "Scatter of B", show=False),
    ]

    def action_outliers(self) -> None:
        """O: the outliers of step B (the newer step)."""
        self.notify(self._b_view_note("outliers"), timeout=3)
        self.miles.navigation.show_outliers(self.b if self.baseline is None else self.a, self.evaluation)

    def action_scatter(self) -> None:
        """p: reward vs response length of step B."""
        self.notify(self._b_view_note("scatter"), timeout=3)
        self.miles.navigation.show_scatter(self.b if self.baseline is None else self.a, self.evaluation)

    def _b_view_note(self, view: str) -> str:
        """What O and p open: step B, or (B being a baseline's step) the run's own step A."""
        if self.baseline is None:
            return f"{view} of step B ({self.b})"
        return f"{view} of the run's step {self.a} (side B is baseline {self.baseline}'s: its views are the run's)"

    def __init__(
        self, a: int, b: int, evaluation: bool = False, sample_index: int | None = None, baseline: str | None = None
    ) -> None:
        super().__init__()
        self.a = a
        self.b = b
        self.baseline = baseline
        """The mark of the baseline whose step ``a`` is side B (None: B is the run's step ``b``)."""
        self.evaluation = evaluation
        self.sample_index = sample_index
        """A sample of step B (the step screen's) or of step A: the screen opens on its group slot traced across
        steps."""
        self.comparison: StepComparison | None = None
        self.fetched: dict[int, StepSummary] = {}
        """The run's steps A and B as last fetched, by rollout id."""
        self._b_summary: StepSummary | None = None
        self.group: int | None = None
        """The group slot being traced across steps (None: the group table)."""
        self.tracing = False

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("", id="title")
        yield Label("", id="deltas")
        table = VirtualTable(id="groups")
        table.placeholder = "loading both steps…"
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#groups", VirtualTable).focus()
        self._load()

    def on_resize(self) -> None:
        """Re-wrap the step-level figures."""
        if self.comparison is not None:
            self.query_one("#deltas", Label).update(headline(self.comparison, self.size.width - 2))

    # -- data ---------------------------------------------------------------------------

    async def _summary(self, rid: int) -> StepSummary:
        cached = self.miles.model.summaries.get(StepKey(rid, self.evaluation))
        if cached is not None:
            return cached
        return await asyncio.shield(self.miles.watcher.summary(rid, self.evaluation))

    @work(exclusive=True, group="compare", exit_on_error=False)
    async def _load(self) -> None:
        table = self.query_one("#groups", VirtualTable)
        self._title()
        try:
            a = await self._summary(self.a)
            b = await self._side_b()
            self.fetched = {self.a: a} if self.baseline is not None else {self.a: a, self.b: b}
            self._b_summary = b
        except Exception as err:
            self.comparison = None
            table.placeholder = f"✗ {err}"
            table.set_rows([])
            self.query_one("#deltas", Label).update("")
            return
        self.comparison = compare_steps(a, b)
        if self.sample_index is not None:  # once: open on the sample's group slot across steps
            sample, self.sample_index = self.sample_index, None
            # The step screen passes a sample of the step it shows (B); a caller may name one of A.
            holder = next((s for s in (b, a) if any(row.sample_index == sample for row in s.rows)), None)
            if holder is not None:
                self.group, self.tracing = group_of(holder, sample), True
            else:
                self.notify(f"neither step {self.a} nor {self.b} has sample {sample}", severity="warning", timeout=4)
        self._show()

    def _title(self) -> None:
        kind = "eval " if self.evaluation else ""
        text = Text()
        text.append("compare ", style="bold")
        if self.tracing:
            text.append(f"· group {MISSING if self.group is None else self.group} across steps ", style="bold")
            text.append("(group numbers restart every step: same slot, not necessarily the same prompt)", style="dim")
        elif (baseline := self._baseline()) is not None:
            text.append(f"· A = {kind}step {self.a}  B = baseline {baseline.mark} ┈ ", style="bold")
            text.append(inert(baseline.name), style="bold")
            text.append(f" {kind}step {self.a}", style="bold")
            text.append("  (Δ = B − A; b: next baseline or the run)", style="dim")
        else:
            text.append(f"· A = {kind}step {self.a}  B = {kind}step {self.b}", style="bold")
            text.append("  (Δ = B − A)", style="dim")
        self.query_one("#title", Label).update(text)

    def _show(self) -> None:
        self._title()
        table = self.query_one("#groups", VirtualTable)
        comparison = self.comparison
        if comparison is None:
            return
        deltas = self.query_one("#deltas", Label)
        deltas.update(headline(comparison, self.size.width - 2))
        deltas.display = not self.tracing  # the trace needs the rows more than the step figures
        if self.tracing:
            self._show_trace()
            return
        table.set_columns(GROUP_COLUMNS)
        table.border_title = SLOT_WARNING
        table.placeholder = "neither step has groups"
        unread_a = group_rewards_unreadable(self.fetched[self.a]) if self.a in self.fetched else set()
        unread_b = group_rewards_unreadable(self._b_summary) if self._b_summary is not None else set()
        table.set_rows(
            [
                TableRow(
                    ("group", g.group_index),
                    group_cells(g, g.group_index in unread_a, g.group_index in unread_b),
                )
                for g in comparison.groups
            ]
        )

    def _show_trace(self) -> None:
        table = self.query_one("#groups", VirtualTable)
        summaries = {rid: s for (rid, ev), s in self.miles.model.summaries.items() if ev == self.evaluation}
        summaries |= self.fetched  # A and B as compared, even if the poll has not summarized them yet
        trace = group_across_steps(summaries.values(), self.group)
        table.set_columns(TRACE_COLUMNS)
        table.border_title = f"group slot {self.group} in each step: a slot, not a prompt"
        table.placeholder = "no summarized step has this group"
        table.set_rows(trace_rows(trace, self.a, self.b, self.evaluation), keep_key=False)
        table.move_to_key(("step", self.b))

    # -- live ----------------------------------------------------------------------------

    @on(StepsSummarized)
    def _summarized(self, message: StepsSummarized) -> None:
        """A compared step's files changed: compare again (once per poll, however many steps came)."""
        mine = [s for s in message.summaries if s.evaluation == self.evaluation]
        if any(s.rollout_id in (self.a, self.b) for s in mine):
            self._load()
        elif self.tracing and mine:
            self._show_trace()

    @on(BaselinesChanged)
    def _baseline_changed(self, message: BaselinesChanged) -> None:
        """The compared baseline's step A arrived or changed: compare again."""
        if message.mark == self.baseline and (message.added or self.a in message.steps):
            self._load()

    # -- actions ---------------------------------------------------------------------------

    def action_move(self, which: str, delta: int) -> None:
        """Move step A or B to the previous/next visible step."""
        model = self.miles.model
        ids = model.evaluation if self.evaluation else model.train
        current = self.a if which == "a" else self.b
        candidates = [rid for rid in ids if (rid > current if delta > 0 else rid < current)]
        if not candidates:
            self.notify(f"no {'later' if delta > 0 else 'earlier'} step for {which.upper()}", timeout=2)
            return
        target = min(candidates) if delta > 0 else max(candidates)
        crossing = (which == "a" and target >= self.b) or (which == "b" and target <= self.a)
        if self.baseline is None and crossing:  # A is the earlier step: deltas read B − A, older to newer
            self.notify(
                f"A stays before B (A is step {self.a}, B step {self.b}): move {'B' if which == 'a' else 'A'} "
                "first, or x to swap them",
                timeout=3,
            )
            return
        if which == "a" or self.baseline is not None:  # against a baseline, B is always A's step
            self.a = target
        else:
            self.b = target
        self._load()

    # -- B from a baseline -------------------------------------------------------------------

    def _baseline(self) -> Baseline | None:
        return None if self.baseline is None else self.miles.baselines.by_mark(self.baseline)

    async def _side_b(self) -> StepSummary:
        """Step B: the run's step ``b``, or the baseline's step ``a``."""
        baseline = self._baseline()
        if baseline is None:
            return await self._summary(self.b)
        try:
            return await self.miles.baselines.summary(baseline, self.a, self.evaluation)
        except MilesTuiError as err:
            raise MilesTuiError(f"baseline {baseline.mark} ({baseline.name}): {err.message}", err.path) from err

    def action_baseline_side(self) -> None:
        """b: side B from the first baseline at A's step, then the next one, then the run again."""
        marks = [b.mark for b in self.miles.baselines]
        if not marks:
            self.notify(NO_BASELINE, timeout=4)
            return
        if self.baseline is None:
            self.a, self.baseline = self.b, marks[0]  # the newer step is the one compared
        elif self.baseline != marks[-1]:
            self.baseline = marks[marks.index(self.baseline) + 1] if self.baseline in marks else marks[0]
        else:
            earlier = [
                r for r in (self.miles.model.evaluation if self.evaluation else self.miles.model.train) if r < self.a
            ]
            self.baseline, self.b = None, self.a
            self.a = earlier[-1] if earlier else self.a
        self.tracing = False
        self._load()

    def action_swap(self) -> None:
        """Swap A and B."""
        self.a, self.b = self.b, self.a
        self._load()

    def action_back(self) -> None:
        """From a group trace back to the groups; from the groups off the screen."""
        if self.tracing:
            self.tracing = False
            self._show()
            self.query_one("#groups", VirtualTable).move_to_key(("group", self.group))
            return
        self.app.pop_screen()

    @on(VirtualTable.Selected, "#groups")
    def _selected(self, message: VirtualTable.Selected) -> None:
        """Enter on a group: the slot across steps. On a sample of the trace: its sample screen."""
        key = message.key
        if not isinstance(key, tuple):
            return
        if key[0] == "group":
            self.group = cast("int | None", key[1])
            self.tracing = True
            self._show()
        elif key[0] == "sample":
            self._open_sample(cast(int, key[1]), cast(int, key[2]))

    def _open_sample(self, rid: int, sample_index: int) -> None:
        self.miles.navigation.show_sample(
            rid, self.evaluation, sample_index, busy=self.query_one("#groups", VirtualTable)
        )
