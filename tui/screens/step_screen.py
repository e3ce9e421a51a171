"""The step screen: the rollout table of one step, sortable, filterable, live.

Rows are core's SampleRow values formatted by tui.formatting; nothing is
recomputed here (staleness and every statistic come from core). Sorting and
filtering reorder rows by their raw values; row keys are sample indices, so
the cursor stays on its sample when the step refreshes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any, ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Input, Label

from core.step import StepSummary
from core.summary import GroupRow, SampleRow
from tui.formatting import MISSING, number, percent, version_span
from tui.messages import FollowToggled, RunStatusChanged, StepsChanged, StepsSummarized
from tui.row_filter import FilterError, RowFilter, parse_filter
from tui.screens.monitor_screen import MonitorScreen
from tui.widgets.run_header import RunHeader
from tui.widgets.virtual_table import Column, TableRow, VirtualTable

SAMPLE_COLUMNS = (
    Column("sample_index", "sample", 7),
    Column("group_index", "group", 7),
    Column("status", "status", 9, "left"),
    Column("reward", "reward", 7),
    Column("raw_reward", "raw", 7),
    Column("normalized_reward", "norm", 7),
    Column("staleness", "stale", 5),
    Column("weight_version", "version", 9, "left"),
    Column("response_length", "resp", 6),
    Column("total_length", "total", 6),
    Column("turns", "turns", 5),
    Column("tool_calls", "tools", 5),
    Column("mean_abs_lp_diff", "|lpΔ|", 7),
    Column("max_abs_lp_diff", "max|lpΔ|", 8),
    Column("mean_imp_ratio", "ratio", 7),
    Column("mean_entropy", "entropy", 7),
    Column("max_entropy", "maxH", 7),
    Column("adv_mean", "adv", 7),
    Column("adv_std", "adv σ", 7),
    Column("return_mean", "return", 7),
    Column("dumped_rank", "rank", 5),
    Column("spec_accept_rate", "spec", 5),
    Column("prefix_cache_hit_rate", "cache", 5),
    Column("non_generation_time", "ngen s", 7),
    Column("alignment_failed", "per-token", 11, "left"),
)

GROUP_COLUMNS = (
    Column("group_index", "group", 7),
    Column("n", "n", 4),
    Column("reward_mean", "reward", 8),
    Column("reward_std", "std", 8),
    Column("response_length_mean", "resp len", 9),
    Column("truncated_frac", "trunc", 6),
    Column("zero_std", "degenerate", 11, "left"),
)

STATUS_STYLE = {"completed": "", "truncated": "yellow", "aborted": "red", "failed": "bold red", "pending": "dim"}


def _sort_value(value: Any) -> tuple[int, Any]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return (1, 0)
    if isinstance(value, str):
        return (0, (1, value))
    return (0, (0, value))


def sample_cells(row: SampleRow, zero_std_groups: set[int | None], pending: bool = False) -> tuple[Text, ...]:
    """Format one ROW for the table (``pending``: the step is still being written)."""
    group = Text(MISSING if row.group_index is None else str(row.group_index))
    if row.group_index in zero_std_groups:
        group.append(" 0σ", style="yellow")
    status = Text(row.status or MISSING, style=STATUS_STYLE.get(row.status or "", ""))
    if row.remove_sample:
        status.append("✗", style="red")
    if row.alignment_failed and pending:
        align = Text("pending…", style="yellow")
    elif row.alignment_failed:
        align = Text("UNREADABLE", style="bold red")
    elif row.dumped_rank is None:
        align = Text("no train row", style="dim")
    else:
        align = Text("ok", style="green")
    return (
        Text(str(row.sample_index)),
        group,
        status,
        Text(number(row.reward)),
        Text(number(row.raw_reward)),
        Text(number(row.normalized_reward)),
        Text(number(row.staleness), style="yellow" if (row.staleness or 0) >= 2 else ""),
        Text(version_span(row), style="magenta" if row.mixed_version else ""),
        Text(str(row.response_length), style="yellow" if row.truncated else ""),
        Text(str(row.total_length)),
        Text(str(row.turns)),
        Text(number(row.tool_calls)),
        Text(number(row.mean_abs_lp_diff)),
        Text(number(row.max_abs_lp_diff)),
        Text(number(row.mean_imp_ratio)),
        Text(number(row.mean_entropy)),
        Text(number(row.max_entropy)),
        Text(number(row.adv_mean)),
        Text(number(row.adv_std)),
        Text(number(row.return_mean)),
        Text(number(row.dumped_rank)),
        Text(percent(row.spec_accept_rate)),
        Text(percent(row.prefix_cache_hit_rate)),
        Text(number(row.non_generation_time, 2)),
        align,
    )


def group_cells(group: GroupRow) -> tuple[Text, ...]:
    """Format one GROUP row."""
    return (
        Text(MISSING if group.group_index is None else str(group.group_index)),
        Text(str(group.n)),
        Text(number(group.reward_mean)),
        Text(number(group.reward_std)),
        Text(number(group.response_length_mean, 1)),
        Text(percent(group.truncated_frac)),
        Text("ZERO STD", style="bold yellow") if group.zero_std else Text("–", style="dim"),
    )


class StepScreen(MonitorScreen):
    """One step's samples (or groups)."""

    CSS_PATH = "step_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("s", "sort", "Sort by column"),
        Binding("o", "rollout_order", "Rollout order", show=False),
        Binding("g", "toggle_groups", "Groups"),
        Binding("left_square_bracket", "step(-1)", "Prev step", key_display="["),
        Binding("right_square_bracket", "step(1)", "Next step", key_display="]"),
        Binding("e", "toggle_eval", "Train/eval", show=False),
        Binding("O", "outliers", "Outliers"),
        Binding("c", "compare", "Compare"),
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

    @property
    def key(self) -> tuple[int, bool]:
        return (self.rollout_id, self.evaluation)

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
        self.query_one(RunHeader).live = self.miles.live
        self._refresh_header()
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
            self._show_failure(str(err), "still being written" in str(err))
            return
        table.loading = False
        self.miles.model.summaries[self.key] = summary
        self._show(summary)

    def _show_failure(self, message: str, still_writing: bool) -> None:
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
        text.append(f" · 0-std {percent(a.zero_std_group_frac)} · trunc {percent(a.truncated_frac)}")
        text.append(f" · stale {number(a.avg_staleness, 2)} · |lpΔ| {number(a.mean_abs_lp_diff)}")
        if a.alignment_failed:
            text.append(f" · {a.alignment_failed} unreadable", style="bold red")
        if not summary.complete:
            text.append(" · still being written: fills in when complete", style="yellow")
        for problem in summary.problems:
            if problem.kind.value != "still_writing":
                text.append(f"\n✗ {problem.message}", style="red")
        self.query_one("#step-title", Label).update(text)

    def _render_rows(self) -> None:
        summary = self.summary
        if summary is None:
            return
        table = self.query_one("#samples", VirtualTable)
        status = self.query_one("#filter-status", Label)
        if self.show_groups:
            table.set_columns(self._decorate(GROUP_COLUMNS))
            groups = list(summary.groups)
            if self.sort_key is not None and self.sort_key in GroupRow.__dataclass_fields__:
                groups.sort(key=lambda g: _sort_value(getattr(g, cast(str, self.sort_key))), reverse=self.sort_reverse)
            table.set_rows([TableRow(("group", g.group_index), group_cells(g)) for g in groups])
            status.update(Text(f"{len(groups)} groups · g: back to samples", style="dim"))
            return
        table.set_columns(self._decorate(SAMPLE_COLUMNS))
        zero = {g.group_index for g in summary.groups if g.zero_std}
        rows = list(summary.rows)
        if self.row_filter is not None:
            rows = [r for r in rows if self.row_filter(r)]
        if self.sort_key is not None and self.sort_key in SampleRow.__dataclass_fields__:
            key = self.sort_key
            rows.sort(key=lambda r: _sort_value(getattr(r, key)), reverse=self.sort_reverse)
            # None stays last whatever the direction
            if self.sort_reverse:
                rows.sort(key=lambda r: getattr(r, key) is None)
        by_index = {r.sample_index: r for r in rows}

        def render(key: Hashable) -> TableRow:
            row = by_index[cast(int, key)]
            cells = sample_cells(row, zero, pending=not summary.complete)
            return TableRow(row.sample_index, cells, "dim" if row.remove_sample else "")

        table.set_lazy_rows([r.sample_index for r in rows], render)
        parts = [f"{len(rows)}/{len(summary.rows)} samples"]
        if self.row_filter is not None:
            parts.append(f"filter: {self.row_filter.text}")
        if self.sort_key is not None:
            parts.append(f"sorted by {self.sort_key} {'↓' if self.sort_reverse else '↑'}")
        status.update(Text(" · ".join(parts), style="dim"))

    def _decorate(self, columns: tuple[Column, ...]) -> tuple[Column, ...]:
        if self.sort_key is None:
            return columns
        arrow = "▼" if self.sort_reverse else "▲"
        return tuple(
            Column(c.key, (arrow + c.label) if c.key == self.sort_key else c.label, c.width, c.justify) for c in columns
        )

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

    @on(StepsChanged)
    @on(RunStatusChanged)
    @on(FollowToggled)
    def _status(self, message: StepsChanged | RunStatusChanged | FollowToggled) -> None:
        """Keep the header current."""
        self._refresh_header()

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
        """Load the step's per-token data (in the background) and show the sample."""
        self._open_sample(sample_index)

    @work(exclusive=True, group="open-sample", exit_on_error=False)
    async def _open_sample(self, sample_index: int) -> None:
        import asyncio

        from core.trajectory import read_sidecar
        from tui.screens.sample_screen import SampleScreen

        table = self.query_one("#samples", VirtualTable)
        if self.miles.reader.cached_open(self.rollout_id, self.evaluation) is None:
            table.loading = True
            self.notify(f"loading step {self.rollout_id}'s per-token data…", timeout=3)
        try:
            opened = await self.miles.watcher.open(self.rollout_id, self.evaluation)
            sidecar = await asyncio.to_thread(read_sidecar, self.miles.reader.path, self.rollout_id, self.evaluation)
        except Exception as err:
            table.loading = False
            self.notify(str(err), severity="error", timeout=8)
            return
        table.loading = False
        self.app.push_screen(SampleScreen(opened, sample_index, self.miles.reader.detokenizer, sidecar))

    def action_back(self) -> None:
        if self.query_one("#filter", Input).display:
            self._close_filter()
            return
        self.app.pop_screen()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.value = self.row_filter.text if self.row_filter else ""
        box.focus()

    def _close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = False
        self.query_one("#samples", VirtualTable).focus()

    @on(Input.Submitted, "#filter")
    def _apply_filter(self, message: Input.Submitted) -> None:
        """Apply the typed filter (empty clears it)."""
        zero = {g.group_index for g in self.summary.groups if g.zero_std} if self.summary else set()
        try:
            self.row_filter = parse_filter(message.value, zero)
        except FilterError as err:
            self.query_one("#filter-status", Label).update(Text(f"filter error: {err}", style="bold red"))
            return
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
        self.sort_key, self.sort_reverse = None, False
        self._render_rows()

    def action_toggle_groups(self) -> None:
        self.show_groups = not self.show_groups
        self._render_rows()

    def _switch(self, rollout_id: int, evaluation: bool) -> None:
        self.rollout_id, self.evaluation = rollout_id, evaluation
        self.summary = None
        self.query_one("#samples", VirtualTable).set_rows([])
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
        nearest = min(ids, key=lambda rid: (abs(rid - self.rollout_id), rid))
        self._switch(nearest, not self.evaluation)

    def action_outliers(self) -> None:
        from tui.screens.outlier_screen import OutlierScreen

        self.app.push_screen(OutlierScreen(self.rollout_id, self.evaluation))

    def action_compare(self) -> None:
        """Compare this step (B) with the previous visible one (A), on the sample under the cursor."""
        from tui.screens.compare_screen import CompareScreen

        model = self.miles.model
        ids = model.evaluation if self.evaluation else model.train
        earlier = [rid for rid in ids if rid < self.rollout_id]
        if not earlier:
            self.notify("no earlier step to compare with", timeout=3)
            return
        table = self.query_one("#samples", VirtualTable)
        sample = None if self.show_groups else cast("int | None", table.cursor_key)
        self.app.push_screen(CompareScreen(earlier[-1], self.rollout_id, self.evaluation, sample_index=sample))

    def _shown_rows(self) -> list[SampleRow]:
        if self.summary is None:
            return []
        if self.show_groups:
            return list(self.summary.rows)
        by_index = {r.sample_index: r for r in self.summary.rows}
        table = self.query_one("#samples", VirtualTable)
        return [by_index[cast(int, key)] for key in table.keys]

    def action_copy_row(self) -> None:
        from tui.clipboard import copy_sample_row

        table = self.query_one("#samples", VirtualTable)
        if self.summary is None or self.show_groups or table.cursor_key is None:
            return
        row = next(r for r in self.summary.rows if r.sample_index == table.cursor_key)
        copy_sample_row(self.app, row)

    def action_save_csv(self) -> None:
        from tui.clipboard import default_csv_path
        from tui.screens.save_csv_screen import SaveCsvScreen

        rows = self._shown_rows()
        if not rows:
            self.notify("nothing to save yet", timeout=3)
            return
        run_dir = self.miles.reader.path
        self.app.push_screen(SaveCsvScreen(rows, default_csv_path(self.rollout_id, self.evaluation, run_dir), run_dir))
