"""The step screen: the rollout table of one step, sortable, filterable, live.

Rows are core's SampleRow values formatted by miles_tui.tui.views.step_rows; nothing is
recomputed here (staleness and every statistic come from core). Sorting and
filtering reorder rows by their raw values; row keys are sample indices, so
the cursor stays on its sample when the step refreshes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any, ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Input, Label

from miles_tui.core.base.errors import StillWritingError
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import GroupRow, SampleRow, StepKey, StepSummary
from miles_tui.tui.formatting import number, percent
from miles_tui.tui.model.messages import StepsSummarized
from miles_tui.tui.runtime.baseline_watch import BaselinesChanged
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.views.baseline_lines import delta_lines
from miles_tui.tui.views.lazy_rows import TableRow
from miles_tui.tui.views.row_filter import RowFilter, parse_filter
from miles_tui.tui.views.step_rows import (
    GROUP_COLUMNS,
    SAMPLE_COLUMNS,
    UNKNOWN_STYLE,
    group_cells,
    group_rewards_unreadable,
    group_unreadable,
    sample_cells,
    sample_widths,
    unknown_format_count,
    zero_std_groups,
)
from miles_tui.tui.views.table_layout import Column, fitted
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.virtual_table import VirtualTable


def _sort_value(value: Any) -> tuple[int, Any]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return (1, 0)
    if isinstance(value, str):
        return (0, (1, value))
    return (0, (0, value))


class StepScreen(MonitorScreen):
    """One step's samples (or groups)."""

    CSS_PATH = "step_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        # priority: handled as the key arrives, so the keys typed right after it reach the box (see focus_now)
        Binding("slash", "filter", "Filter", key_display="/", priority=True),
        Binding("s", "sort", "Sort"),
        Binding("o", "rollout_order", "Rollout order", show=False),
        Binding("g", "toggle_groups", "Groups"),
        Binding("left_square_bracket", "step(-1)", "Prev step", key_display="[", show=False),
        Binding("right_square_bracket", "step(1)", "Next step", key_display="]", show=False),
        Binding("e", "toggle_eval", "Train/eval", show=False),
        Binding("O", "outliers", "Outliers", show=False),
        Binding("c", "compare", "Compare", show=False),
        Binding("p", "scatter", "Scatter", show=False),
        Binding("a", "anatomy", "Batch anatomy", show=False),
        Binding("y", "copy_row", "Copy row", show=False),
        Binding("ctrl+s", "save_csv", "Save CSV", show=False),
    ]

    def __init__(self, rollout_id: int, evaluation: bool = False, focus_sample: int | None = None) -> None:
        super().__init__()
        self.rollout_id = rollout_id
        self.evaluation = evaluation
        self.focus_sample = focus_sample
        self.sort_key: str | None = None
        self.sort_reverse = False
        self.row_filter: RowFilter | None = None
        self.show_groups = False
        self.summary: StepSummary | None = None
        self._measured: tuple[StepSummary, dict[str, int]] | None = None
        self._toggled_from: StepKey | None = None
        """The step ``e`` came from: ``e`` again goes back to it (any other move forgets it)."""

    @property
    def key(self) -> StepKey:
        return StepKey(self.rollout_id, self.evaluation)

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("", id="step-title")
        table = VirtualTable(id="samples")
        table.placeholder = "loading the step…"
        yield table
        yield Input(placeholder="filter: reward>0.5 stale>=2 truncated unreadable zero-std …", id="filter")
        yield Label("", id="filter-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self._load()

    # -- data ---------------------------------------------------------------------

    def _load(self) -> None:
        table = self.query_one("#samples", VirtualTable)
        cached = self.miles.model.summaries.get(self.key)
        if cached is not None:
            self._show(cached)
            return
        failure = self.miles.model.failures.get(self.key)
        if failure is not None:
            self._show_failure(*failure)
        table.loading = True
        self._fetch()

    @work(exclusive=True, group="step-summary", exit_on_error=False)
    async def _fetch(self) -> None:
        table = self.query_one("#samples", VirtualTable)
        try:
            summary = await self.miles.watcher.summary(self.rollout_id, self.evaluation)
        except Exception as err:
            table.loading = False
            self._show_failure(str(err), isinstance(err, StillWritingError))
            return
        table.loading = False
        # The app stores it in the model (only its handlers write the model) and forwards it here.
        self.app.post_message(StepsSummarized((summary,)))

    def _show_failure(self, message: str, still_writing: bool) -> None:
        message = inert(message)
        table = self.query_one("#samples", VirtualTable)
        table.placeholder = ("⏳ " if still_writing else "✗ ") + message
        table.set_rows([])
        self.query_one("#step-title", Label).update(
            Text(
                f"step {self.rollout_id}{' eval' if self.evaluation else ''}: {message}",
                style="yellow" if still_writing else "bold red",
            )
        )

    def _show(self, summary: StepSummary) -> None:
        self.summary = summary
        table = self.query_one("#samples", VirtualTable)
        table.loading = False
        self._title(summary)
        self._render_rows()
        if self.focus_sample is not None:
            sample, self.focus_sample = self.focus_sample, None
            if table.move_to_key(sample):
                self.open_sample(sample)

    def _title(self, summary: StepSummary) -> None:
        a = summary.aggregate
        text = Text()
        text.append(f"step {summary.rollout_id} ", style="bold")
        text.append("eval" if summary.evaluation else "train", style="magenta" if summary.evaluation else "")
        text.append(f" · {a.n_samples} samples · {len(summary.groups)} groups · reward {number(a.reward_mean)}")
        text.append(f" · zero-std {percent(a.zero_std_group_frac)} · trunc {percent(a.truncated_frac)}")
        text.append(f" · stale {number(a.avg_staleness, 2)} · mixed {percent(a.mixed_version_frac)}")
        if drifted := unknown_format_count(summary, "weight_versions"):  # those samples are not in the figures
            text.append(f" (of {a.n_samples - drifted}: {drifted} unknown format)", style=UNKNOWN_STYLE)
        text.append(f" · |lpΔ| {number(a.mean_abs_lp_diff)}")
        text.append(f" · entropy {number(a.mean_entropy)}")
        if a.alignment_failed:
            text.append(f" · {a.alignment_failed} unreadable", style="bold red")
        if not summary.complete:
            text.append(" · still being written: fills in when complete", style="yellow")
        for problem in summary.problems:
            if problem.kind.value != "still_writing":
                text.append(f"\n✗ {inert(problem.message)}", style="red")
        if len(self.miles.baselines) and not summary.evaluation:
            text.append("\n")
            text.append_text(delta_lines(self.miles.baselines, summary.rollout_id, a))
        self.query_one("#step-title", Label).update(text)

    @on(BaselinesChanged)
    def _baselines_changed(self, message: BaselinesChanged) -> None:
        """A baseline's figures arrived: the header's Δ lines again."""
        if self.summary is not None and (message.added or self.rollout_id in message.steps):
            self._title(self.summary)

    def _render_rows(self) -> None:
        summary = self.summary
        if summary is None:
            return
        table = self.query_one("#samples", VirtualTable)
        status = self.query_one("#filter-status", Label)
        pending = not summary.complete
        if self.show_groups:
            table.set_columns(self._decorate(GROUP_COLUMNS))
            groups = list(summary.groups)
            if self.sort_key is not None and self.sort_key in GroupRow.__dataclass_fields__:
                groups.sort(key=lambda g: _sort_value(getattr(g, cast(str, self.sort_key))), reverse=self.sort_reverse)
            unread, rewards_unread = group_unreadable(summary), group_rewards_unreadable(summary)
            trained = {r.group_index for r in summary.rows if r.dumped_rank is not None or r.alignment_failed}
            table.placeholder = "this step has no groups"
            table.set_rows(
                [
                    TableRow(
                        ("group", g.group_index),
                        group_cells(
                            g,
                            unread.get(g.group_index, 0),
                            g.group_index in rewards_unread,
                            pending,
                            g.group_index in trained,
                        ),
                    )
                    for g in groups
                ]
            )
            status.update(Text(f"{len(groups)} groups · g: back to samples", style="dim"))
            return
        table.set_columns(fitted(self._decorate(SAMPLE_COLUMNS), self._widths(summary)))
        zero = zero_std_groups(summary)
        rows = list(summary.rows)
        if self.row_filter is not None:
            try:
                rows = [r for r in rows if self.row_filter(r)]
            except Exception as err:  # a filter must never take the screen down: drop it and say why
                self.row_filter = None
                rows = list(summary.rows)
                self._filter_error(str(err))
        if self.sort_key is not None and self.sort_key in SampleRow.__dataclass_fields__:
            key = self.sort_key
            rows.sort(key=lambda r: _sort_value(getattr(r, key)), reverse=self.sort_reverse)
            # None stays last whatever the direction
            if self.sort_reverse:
                rows.sort(key=lambda r: getattr(r, key) is None)
        by_index = {r.sample_index: r for r in rows}

        def render(key: Hashable) -> TableRow:
            row = by_index[cast(int, key)]
            cells = sample_cells(row, zero, pending=pending)
            return TableRow(row.sample_index, cells, "dim" if row.remove_sample else "")

        if self.row_filter is not None and not rows:
            table.placeholder = f"no sample matches {self.row_filter.text} (/ to change the filter, empty clears it)"
        elif not rows:
            table.placeholder = "this step has no samples"
        table.set_lazy_rows([r.sample_index for r in rows], render)
        parts = [f"{len(rows)}/{len(summary.rows)} samples"]
        if self.row_filter is not None:
            parts.append(f"filter: {self.row_filter.text}")
        if self.sort_key is not None:
            parts.append(f"sorted by {self.sort_key} {'↓' if self.sort_reverse else '↑'}")
        status.update(Text(" · ".join(parts), style="dim"))

    def _widths(self, summary: StepSummary) -> dict[str, int]:
        """Data-sized column widths of this summary (measured once per summary)."""
        if self._measured is None or self._measured[0] is not summary:
            self._measured = (summary, sample_widths(summary.rows))
        return self._measured[1]

    def _filter_error(self, message: str) -> None:
        self.query_one("#filter-status", Label).update(Text(f"filter error: {message}", style="bold red"))

    def _decorate(self, columns: tuple[Column, ...]) -> tuple[Column, ...]:
        if self.sort_key is None:
            return columns
        arrow = "▼" if self.sort_reverse else "▲"
        # replace, not a new Column: a new one lost ``grow``, and a sorted table cut eval ids to "100001…"
        return tuple(replace(c, label=arrow + c.label) if c.key == self.sort_key else c for c in columns)

    # -- live -----------------------------------------------------------------------

    @on(StepsSummarized)
    def _summarized(self, message: StepsSummarized) -> None:
        """The step's files changed (e.g. finished writing): update rows in place; or it became unreadable."""
        summary = message.summary_of(self.key)
        if summary is not None:
            self._show(summary)
            return
        failure = message.failure_of(self.key)
        if failure is not None and self.summary is None:
            self._show_failure(failure.message, failure.still_writing)

    # -- actions ----------------------------------------------------------------------

    @on(VirtualTable.Selected, "#samples")
    def _selected(self, message: VirtualTable.Selected) -> None:
        """Enter on a sample: its token view. On a group: back to its samples."""
        if self.show_groups:
            group = cast("tuple[str, int | None]", message.key)[1]
            self.show_groups = False
            self._render_rows()
            first = next((r for r in (self.summary.rows if self.summary else ()) if r.group_index == group), None)
            if first is not None:
                self.query_one("#samples", VirtualTable).move_to_key(first.sample_index)
            return
        self.open_sample(cast(int, message.key))

    def open_sample(self, sample_index: int) -> None:
        """Show the sample (its step's per-token data loads in the background)."""
        table = self.query_one("#samples", VirtualTable)
        self.miles.navigation.show_sample(self.rollout_id, self.evaluation, sample_index, busy=table)

    def action_back(self) -> None:
        if self.query_one("#filter", Input).display:
            self._close_filter()
            self._render_rows()  # the status says the filter in force again, not the error of the one left
            return
        self.app.pop_screen()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.value = self.row_filter.text if self.row_filter else ""
        self.focus_now(box)

    def _close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = False
        self.focus_now(self.query_one("#samples", VirtualTable))

    @on(Input.Submitted, "#filter")
    def _apply_filter(self, message: Input.Submitted) -> None:
        """Apply the typed filter (empty clears it)."""
        zero = zero_std_groups(self.summary) if self.summary else set()
        try:
            row_filter = parse_filter(message.value, zero)
            if row_filter is not None and self.summary is not None:
                for row in self.summary.rows:  # a term that fails on a row is reported here, not while drawing
                    row_filter(row)
        except Exception as err:  # FilterError, or anything a predicate raises: inline, the app keeps running
            self._filter_error(str(err))
            return
        self.row_filter = row_filter
        self.show_groups = False
        self._close_filter()
        self._render_rows()

    def action_sort(self) -> None:
        table = self.query_one("#samples", VirtualTable)
        column = table.cursor_column_key
        if column is None:
            return
        if self.sort_key == column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_key, self.sort_reverse = column, False
        self._render_rows()

    def action_rollout_order(self) -> None:
        if self.sort_key is None:
            self.notify("already in rollout order (s sorts by the column under the cursor)", timeout=3)
            return
        self.sort_key, self.sort_reverse = None, False
        self._render_rows()

    def action_toggle_groups(self) -> None:
        self.show_groups = not self.show_groups
        self._render_rows()

    def _switch(self, rollout_id: int, evaluation: bool) -> None:
        self.rollout_id, self.evaluation = rollout_id, evaluation
        self._toggled_from = None
        self.summary = None
        table = self.query_one("#samples", VirtualTable)
        table.placeholder = "loading the step…"
        table.set_rows([])
        self._load()

    def action_step(self, delta: int) -> None:
        model = self.miles.model
        ids = model.evaluation if self.evaluation else model.train
        later: Callable[[int], bool] = (
            (lambda rid: rid > self.rollout_id) if delta > 0 else (lambda rid: rid < self.rollout_id)
        )
        candidates = [rid for rid in ids if later(rid)]
        if not candidates:
            self.notify("no further step that way", timeout=2)
            return
        self._switch(min(candidates) if delta > 0 else max(candidates), self.evaluation)

    def action_toggle_eval(self) -> None:
        model = self.miles.model
        ids = model.train if self.evaluation else model.evaluation
        if not ids:
            self.notify("this run has no " + ("train" if self.evaluation else "eval") + " steps", timeout=3)
            return
        back = self._toggled_from
        if back is not None and back[1] != self.evaluation and back[0] in ids:
            target = back[0]  # e then e: back to the step it started from, not to the nearest of its kind
        else:
            target = min(ids, key=lambda rid: (abs(rid - self.rollout_id), rid))
            if target != self.rollout_id:
                kind = "train" if self.evaluation else "eval"
                self.notify(f"no {kind} step {self.rollout_id}: showing {kind} step {target}, the nearest", timeout=3)
        origin = StepKey(self.rollout_id, self.evaluation)
        self._switch(target, not self.evaluation)
        self._toggled_from = origin

    def action_outliers(self) -> None:
        self.miles.navigation.show_outliers(self.rollout_id, self.evaluation)

    def action_scatter(self) -> None:
        """Reward against response length for this step; enter on a point opens that sample."""
        self.miles.navigation.show_scatter(self.rollout_id, self.evaluation)

    def action_anatomy(self) -> None:
        """This step's samples as lifecycle lanes (queued, generating, tool calls, consumed)."""
        self.miles.navigation.show_anatomy(self.rollout_id, self.evaluation)

    def action_compare(self) -> None:
        """Compare this step (B) with the previous visible one (A), on the sample under the cursor."""
        table = self.query_one("#samples", VirtualTable)
        sample = None if self.show_groups else cast("int | None", table.cursor_key)
        self.miles.navigation.show_compare(self.rollout_id, self.evaluation, sample)

    def _shown_rows(self) -> list[SampleRow]:
        if self.summary is None:
            return []
        if self.show_groups:
            return list(self.summary.rows)
        by_index = {r.sample_index: r for r in self.summary.rows}
        table = self.query_one("#samples", VirtualTable)
        return [by_index[cast(int, key)] for key in table.keys]

    def action_copy_row(self) -> None:
        from miles_tui.tui.views.clipboard import copy_sample_row

        table = self.query_one("#samples", VirtualTable)
        if self.summary is None or self.show_groups or table.cursor_key is None:
            return
        row = next(r for r in self.summary.rows if r.sample_index == table.cursor_key)
        copy_sample_row(self.app, row)

    def action_save_csv(self) -> None:
        rows = self._shown_rows()
        if not rows:
            self.notify("nothing to save yet", timeout=3)
            return
        self.miles.navigation.show_save_csv(rows, self.rollout_id, self.evaluation)
