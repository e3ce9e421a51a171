"""The overview: which step, is it healthy. Step list with headline figures, trends, starvation, advisories."""

from __future__ import annotations

from collections.abc import Hashable
from typing import ClassVar, cast

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Label

from miles_tui.core.analysis.advisory_log import AdvisoryLog
from miles_tui.core.dump import StepKey, StepSummary
from miles_tui.tui.formatting import MISSING, number, percent
from miles_tui.tui.model.messages import (
    FollowToggled,
    StepsChanged,
    StepsSummarized,
)
from miles_tui.tui.model.run_model import RunModel
from miles_tui.tui.runtime.baseline_watch import BaselinesChanged
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.views.baseline_lines import delta_lines
from miles_tui.tui.views.lazy_rows import TableRow
from miles_tui.tui.views.starvation_lines import has_any
from miles_tui.tui.views.table_layout import Column
from miles_tui.tui.widgets.advisory_list import AdvisoryList
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.starvation_rows import StarvationRows
from miles_tui.tui.widgets.step_trends import StepTrends
from miles_tui.tui.widgets.virtual_table import VirtualTable

NO_STEP = "no step yet: nothing to show"
"""What O and c say on a run (or folder) with no step."""

STARVATION_TITLE = "starvation (bars 0–max; wait: share of each step spent waiting for data; buffer: groups queued)"

NARROW_WIDTH = 110
"""Below this many columns the advisories move under the step list."""

STEP_COLUMNS = (
    Column("step", "step", 5, grow=10, pinned=True),
    Column("kind", "kind", 5, "left", pinned=True),
    Column("n", "n", 5, grow=8),
    Column("reward_mean", "reward", 6),
    Column("zero_std_group_frac", "zero-std", 8),
    Column("truncated_frac", "trunc", 5),
    Column("avg_staleness", "stale", 5),
    Column("mean_abs_lp_diff", "|lpΔ|", 6),
    Column("mean_entropy", "entropy", 7),
    Column("state", "state", 12, "left", grow=80),
)


def step_row(key: StepKey, summary: StepSummary | None, failure: tuple[str, bool] | None) -> TableRow:
    """One line of the step list."""
    rid, evaluation = key
    kind = Text("eval", style="magenta") if evaluation else Text("train")
    if summary is None:
        if failure is not None:
            _message, still = failure
            state = Text("writing…" if still else "UNREADABLE", style="yellow" if still else "bold red")
        else:
            state = Text("loading…", style="dim")
        blanks = [Text(MISSING, style="dim")] * 7
        return TableRow(key, (Text(str(rid)), kind, *blanks, state))
    a = summary.aggregate
    state = Text()
    if not summary.complete:
        state.append("writing… ", style="yellow")
    if a.alignment_failed and summary.complete:
        state.append(f"{a.alignment_failed} unreadable ", style="bold red")
    corrupt = [p for p in summary.problems if p.kind.value != "still_writing"]
    if corrupt:
        state.append(f"{len(corrupt)} bad file{'s' if len(corrupt) > 1 else ''}", style="bold red")
    if not state.plain:
        state.append("ok", style="green")
    zero = Text(percent(a.zero_std_group_frac), style="yellow" if (a.zero_std_group_frac or 0) >= 0.5 else "")
    trunc = Text(percent(a.truncated_frac), style="yellow" if (a.truncated_frac or 0) >= 0.25 else "")
    cells = (
        Text(str(rid)),
        kind,
        Text(str(a.n_samples)),
        Text(number(a.reward_mean)),
        zero,
        trunc,
        Text(number(a.avg_staleness, 2)),
        Text(number(a.mean_abs_lp_diff)),
        Text(number(a.mean_entropy)),
        state,
    )
    return TableRow(key, cells)


STEP_VIEW_KEYS = "slash,s,o,g,left_square_bracket,right_square_bracket,e,p,y,ctrl+s"
"""Keys that work in a step's view: pressed here, they say so instead of doing nothing."""


class OverviewScreen(MonitorScreen):
    """Steps, trends and advisories of the run."""

    CSS_PATH = "overview_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "focus_advisories", "Advisories"),
        Binding("t", "focus_steps", "Steps", show=False),
        Binding("escape", "focus_steps", "Back to the steps (from the advisories)", show=False, key_display="esc"),
        Binding("tab", "app.focus_next", "Next pane", show=False),
        Binding("O", "outliers", "Outliers"),
        Binding("c", "compare", "Compare"),
        # the global views, offered here when the run has their data (check_action): a dashboard-only run
        # has no steps, and its footer said nothing of the metrics, GPUs and engines it holds
        Binding("m", "metrics", "Metrics"),
        Binding("u", "compute", "GPUs"),
        Binding("E", "engines", "Engines", key_display="E"),
        Binding(
            STEP_VIEW_KEYS,
            "step_view_key",
            "Keys of a step's view: open one with enter first",
            show=False,
            key_display="/ s o g [ ] e p y",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.new_steps = 0
        self._advisories_shown: AdvisoryLog | None = None
        self._advisory_title = ""
        self._offered: tuple[object, ...] = ()

    def compose(self) -> ComposeResult:
        yield RunHeader()
        with Horizontal(id="overview-body"):
            with Vertical(id="overview-main"):
                table = VirtualTable(id="steps")
                table.placeholder = "waiting for the first step…"
                yield table
                yield Label(
                    "trends (oldest → newest train step; bars rise from 0, fractions on 0–100%; min–max, newest)",
                    id="trends-title",
                )
                yield StepTrends(id="trends")
                yield Label("", id="baseline-deltas")
                yield Label(STARVATION_TITLE, id="starvation-title")
                yield StarvationRows(id="starvation")
            with Vertical(id="advisory-pane"):
                yield Label("advisories", id="advisory-title")
                yield AdvisoryList(id="advisories")
        yield Footer()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW_WIDTH, "narrow")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer offers each global view once its data is there (beside a run's steps only when the
        terminal is wide enough for both). A view without data is hidden from the footer, and its key then
        reaches the app's own binding, which opens the view and says what it lacks: never a silent key."""
        model = self.miles.model
        if action in ("metrics", "compute", "engines"):
            has = self.miles.navigation.views_with_data().get(action, False)
            return has and (not model.steps() or self.size.width >= 140)
        return super().check_action(action, parameters)

    def action_metrics(self) -> None:
        self.miles.navigation.metrics()

    def action_compute(self) -> None:
        self.miles.navigation.compute()

    def action_engines(self) -> None:
        self.miles.navigation.engines()

    def action_step_view_key(self) -> None:
        self.notify("that key works in a step: press enter first", timeout=4)

    def on_mount(self) -> None:
        self.set_class(self.size.width < NARROW_WIDTH, "narrow")
        table = self.query_one("#steps", VirtualTable)
        table.set_columns(STEP_COLUMNS)
        self.miles.run_changed.subscribe(self, self._run_changed)
        self._refresh_all()
        table.focus()
        self.watch(table, "scroll_y", self._scrolled, init=False)

    def _scrolled(self) -> None:
        """Tell the watcher which steps are on screen: they are summarized first."""
        self.miles.watcher.focus(cast("tuple[StepKey, ...]", self.query_one("#steps", VirtualTable).visible_keys()))

    # -- model -> widgets -----------------------------------------------------------

    def _row(self, key: Hashable) -> TableRow:
        model = self.miles.model
        step = cast("StepKey", key)
        return step_row(step, model.summaries.get(step), model.failures.get(step))

    def _refresh_all(self) -> None:
        model = self.miles.model
        table = self.query_one("#steps", VirtualTable)
        rows = model.steps()
        table.set_lazy_rows(rows, self._row)  # rows are formatted when drawn: a long run costs its screenful
        self.call_after_refresh(self._scrolled)
        if not model.polled:
            table.placeholder = "reading the run…"
        elif not rows and not model.looks_like_a_run:
            table.placeholder = (
                "this folder has no rollout_data/, train_data/ or dashboard/: is it the folder miles was "
                "started with --dump-details? (watching it anyway)"
            )
        elif not rows:
            table.placeholder = self._no_steps_text()
        self._refresh_trends()
        self._show_starvation(model)
        self._show_advisories(model.advisory_log)
        self._show_badge()
        self._show_baselines()

    def _show_baselines(self) -> None:
        """Δ against each baseline at the selected train step (else the newest one); hidden without baselines."""
        label, model = self.query_one("#baseline-deltas", Label), self.miles.model
        label.display = bool(len(self.miles.baselines))
        key = self.selected_step()
        step = key[0] if key is not None and not key[1] else model.latest
        if label.display and step is not None:
            summary = model.summaries.get(StepKey(step, False))
            label.update(delta_lines(self.miles.baselines, step, None if summary is None else summary.aggregate))

    @on(BaselinesChanged)
    def _baselines_changed(self, message: BaselinesChanged) -> None:
        self._show_baselines()

    def _no_steps_text(self) -> str:
        """What a run without rollout steps has, and the keys to reach it (a dashboard-only run is not empty)."""
        from miles_tui.core.analysis.run_state import last_logged_step

        views = self.miles.navigation.views_with_data()
        has = []
        if views["metrics"]:
            last = last_logged_step(self.miles.watcher.follower.metrics)
            has.append(f"metrics{'' if last is None else f' up to step {last}'} (m)")
        if views["compute"]:
            has.append("GPU utilisation and phases (u)")
        if views["engines"]:
            has.append("inference engines (E)")
        if not has:
            return "no steps yet: waiting for rollout_data/*.pt (this refreshes by itself)"
        return f"no rollout steps (rollout_data/*.pt) yet; this run has {', '.join(has)}"

    def _refresh_trends(self) -> None:
        model = self.miles.model
        summaries = [model.summaries.get(StepKey(rid, False)) for rid in model.train]
        self.query_one(StepTrends).show([None if s is None else s.aggregate for s in summaries])

    def _show_badge(self) -> None:
        """The header's new-step badge (steps that arrived while the user looked elsewhere)."""
        self.query_one(RunHeader).new_steps = self.new_steps

    @on(StepsChanged)
    def _steps_changed(self, message: StepsChanged) -> None:
        """New steps: add rows; follow the newest unless the user looked away."""
        table = self.query_one("#steps", VirtualTable)
        was_on_newest = table.cursor_row == 0
        self._refresh_all()
        if not message.new_train and not message.new_evaluation:
            return
        if self.miles.follow_latest and (was_on_newest or not self.miles.model.summaries):
            table.action_jump_first()
        else:
            self.new_steps += len(message.new_train) + len(message.new_evaluation)
            self._show_badge()

    @on(StepsSummarized)
    def _steps_updated(self, message: StepsSummarized) -> None:
        """One poll's figures arrived: redraw those rows in place, and the trends once."""
        self.query_one("#steps", VirtualTable).refresh_keys(message.keys)
        if any(not s.evaluation for s in message.summaries):
            self._refresh_trends()
            self._show_baselines()

    def _show_starvation(self, model: RunModel) -> None:
        """MFU, the wait strip and the buffer depth; hidden on a run that writes none of them."""
        shown = has_any(model.starvation)
        self.query_one("#starvation-title", Label).set_class(not shown, "absent")
        rows = self.query_one(StarvationRows)
        rows.set_class(not shown, "absent")
        if shown and model.starvation is not None:
            rows.show(model.starvation)

    def _run_changed(self, model: RunModel) -> None:
        """The run model was published: show its advisories and starvation figures if they changed."""
        self._show_starvation(model)
        if model.advisory_log is not self._advisories_shown:
            self._show_advisories(model.advisory_log)
        offered = (tuple(self.miles.navigation.views_with_data().items()), bool(model.steps()))
        if offered != self._offered:  # the views with data, the step keys once there are steps
            self._offered = offered
            self.refresh_bindings()
            table = self.query_one("#steps", VirtualTable)
            if model.polled and model.looks_like_a_run and not model.steps():
                table.placeholder = self._no_steps_text()
                table.refresh()

    def _show_advisories(self, log: AdvisoryLog) -> None:
        """The sidebar: the active advisories, then those cleared in the last few steps (dimmed)."""
        self._advisories_shown = log
        model = self.miles.model
        entries = log.sidebar(model.latest)
        self.query_one(AdvisoryList).show(entries)
        self.query_one("#advisory-pane").set_class(not entries, "quiet")
        active = sum(e.active for e in entries)
        cleared = len(entries) - active
        if entries:
            counts = f"{active}" if active else "none active"
            counts += f", {cleared} cleared" if cleared else ""
            title = f"advisories ({counts}) · a again: the log"
        elif model.polled and not model.looks_like_a_run and not model.steps():
            title = "advisories: none, nothing here to judge"  # the table says why (it cut at 160 columns)
        else:
            title = "advisories: none, nothing needs attention"
        label = self.query_one("#advisory-title", Label)
        if title != self._advisory_title:  # an update re-lays the screen out, even with the same text
            self._advisory_title = title
            label.update(title)

    @on(FollowToggled)
    def _follow_toggled(self, message: FollowToggled) -> None:
        """Turning follow back on jumps to the newest step and clears the badge."""
        if message.following:
            self.new_steps = 0
            self.query_one("#steps", VirtualTable).action_jump_first()
        self._show_badge()

    # -- navigation -----------------------------------------------------------------

    @on(VirtualTable.Highlighted, "#steps")
    def _highlighted(self, message: VirtualTable.Highlighted) -> None:
        """Moving back to the newest step clears the new-step badge; the Δ line follows the selected step."""
        self._show_baselines()
        if message.table.cursor_row == 0 and self.new_steps:
            self.new_steps = 0
            self._show_badge()

    @on(VirtualTable.Selected, "#steps")
    def _open_step(self, message: VirtualTable.Selected) -> None:
        """Enter on a step: its rollout table."""
        self.open_step(cast("StepKey", message.key))

    def open_step(self, key: Hashable, sample_index: int | None = None) -> None:
        rid, evaluation = cast("StepKey", key)
        self.miles.navigation.open_step(rid, evaluation, sample_index)

    @on(AdvisoryList.Jump)
    def _jump(self, message: AdvisoryList.Jump) -> None:
        """Enter on an advisory: open the step (and sample) it names, or the view of its telemetry."""
        advisory = message.advisory
        if advisory.rollout_id is None:
            self.miles.navigation.go_to_advisory(advisory)
            return
        key = (advisory.rollout_id, advisory.evaluation)
        self.query_one("#steps", VirtualTable).move_to_key(key)
        self.open_step(key, advisory.sample_index)

    def action_focus_advisories(self) -> None:
        """Focus the advisory list on its first advisory (so enter jumps at once); from the list, or with
        nothing in it but a history, the advisory log; with no advisory ever, say so."""
        advisories = self.query_one(AdvisoryList)
        if advisories.has_focus or (not advisories.advisories and self.miles.model.advisory_log.entries):
            self.miles.navigation.show_advisory_log()
            return
        if not advisories.advisories:
            self.notify("no advisories: nothing needs attention", timeout=3)
            return
        advisories.focus()
        if advisories.highlighted is None:
            advisories.highlighted = 0

    def action_focus_steps(self) -> None:
        self.query_one("#steps", VirtualTable).focus()

    def selected_step(self) -> StepKey | None:
        return cast("StepKey | None", self.query_one("#steps", VirtualTable).cursor_key)

    def action_outliers(self) -> None:
        key = self.selected_step()
        if key is None:
            self.notify(NO_STEP, timeout=3)
            return
        self.miles.navigation.show_outliers(*key)

    def action_compare(self) -> None:
        """Compare the selected step with the previous one of its kind."""
        key = self.selected_step()
        if key is None:
            self.notify(NO_STEP, timeout=3)
            return
        self.miles.navigation.show_compare(*key)
