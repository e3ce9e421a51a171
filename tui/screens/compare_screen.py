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
    Delta,
    GroupComparison,
    GroupInStep,
    StepComparison,
    compare_steps,
    group_across_steps,
    group_of,
)
from miles_tui.core.dump import StepSummary, group_reward
from miles_tui.core.inert_text import inert
from miles_tui.tui.formatting import MISSING, number, percent, unread_text, unreadable
from miles_tui.tui.messages import StepsSummarized
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.step_rows import group_rewards_unreadable
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.virtual_table import Column, TableRow, VirtualTable

BETTER_UP = {"reward_mean": True, "truncated_frac": False, "avg_staleness": False, "zero_std_group_frac": False}
BETTER_UP |= {"mean_abs_lp_diff": False, "mixed_version_frac": False, "alignment_failed": False}
"""Figures where a rise is good (True) or bad (False); any other figure's change is neutral."""

FRACTIONS = frozenset({"truncated_frac", "zero_std_group_frac", "mixed_version_frac"})
"""Figures shown as percentages."""

HEADLINE = (
    ("reward_mean", "reward"),
    ("reward_std", "reward σ"),
    ("response_length_mean", "resp len"),
    ("truncated_frac", "trunc"),
    ("zero_std_group_frac", "0-std groups"),
    ("avg_staleness", "stale"),
    ("mean_abs_lp_diff", "|lpΔ|"),
    ("mean_entropy", "entropy"),
    ("n_samples", "samples"),
)
"""Step-level figures in the header, in order (mixed versions and unreadable samples join when non-zero)."""

GROUP_COLUMNS = (
    Column("group", "group", 5, grow=10),
    Column("n", "n A/B", 5, grow=13),
    Column("reward_a", "rwd A", 6),
    Column("reward_b", "rwd B", 6),
    Column("reward_d", "rwd Δ", 7),
    Column("std_a", "σ A", 6),
    Column("std_b", "σ B", 6),
    Column("std_d", "σ Δ", 7),
    Column("zero_std", "0σ A/B", 7, "center"),
    Column("len_a", "len A", 6),
    Column("len_b", "len B", 6),
    Column("len_d", "len Δ", 7),
    Column("trunc_a", "trc A", 5),
    Column("trunc_b", "trc B", 5),
    Column("trunc_d", "trc Δ", 6),
    Column("stale_a", "stl A", 5),
    Column("stale_b", "stl B", 5),
    Column("stale_d", "stl Δ", 6),
)

TRACE_COLUMNS = (
    Column("step", "step", 7, "left", grow=12),
    Column("sample", "sample", 7, grow=12),
    Column("n", "n", 3, grow=6),
    Column("reward", "reward", 7),
    Column("std", "σ", 6),
    Column("zero_std", "0σ", 3, "center"),
    Column("len", "len", 6),
    Column("trunc", "trunc", 5),
    Column("stale", "stale", 5),
    Column("status", "status", 10, "left"),
)


def figure_text(name: str, value: float | None) -> str:
    """A figure's value as the tables show it."""
    if name in FRACTIONS:
        return percent(value)
    if name in ("n", "n_samples", "alignment_failed"):
        return MISSING if value is None else str(round(value))
    if name in ("response_length_mean",):
        return number(value, 1)
    if name == "avg_staleness":
        return number(value, 2)
    return number(value)


def delta_text(delta: Delta) -> Text:
    """B − A as an arrow and a size (readable without colour), coloured by whether the change is good."""
    if delta.delta is None:
        return Text.styled(MISSING, "dim")
    if delta.delta == 0:
        return Text.styled("=", "dim")
    up = delta.delta > 0
    size = abs(delta.delta)
    shown = f"{size * 100:.0f}pt" if delta.name in FRACTIONS else figure_text(delta.name, size)
    better = BETTER_UP.get(delta.name)
    style = "cyan" if better is None else ("green" if better == up else "red")
    return Text.styled(("↑" if up else "↓") + shown, style)


def headline(comparison: StepComparison, width: int) -> Text:
    """The step-level figures, ``reward 0.500→0.417 ↓0.083`` each, wrapped between figures to ``width`` cells."""
    extra = [
        (name, label)
        for name, label in (("mixed_version_frac", "mixed"), ("alignment_failed", "unreadable"))
        if comparison.figure(name).a or comparison.figure(name).b
    ]
    text, used = Text(), 0
    for name, label in [*HEADLINE, *extra]:
        delta = comparison.figure(name)
        chip = Text.assemble(
            (f"{label} ", "dim"), f"{figure_text(name, delta.a)}→{figure_text(name, delta.b)} ", delta_text(delta)
        )
        if used and used + 3 + chip.cell_len > width:
            text.append("\n")
            used = 0
        elif used:
            text.append(" │ ", style="dim")
            used += 3
        text.append_text(chip)
        used += chip.cell_len
    return text


def _zero_std(group: GroupComparison, unread_a: bool, unread_b: bool) -> Text:
    def mark(present: bool, zero: bool, unread: bool) -> str:
        return MISSING if not present else ("?" if unread else "0σ" if zero else "·")

    a = mark(group.a is not None, group.a is not None and group.a.zero_std, unread_a)
    b = mark(group.b is not None, group.b is not None and group.b.zero_std, unread_b)
    return Text.styled(f"{a}/{b}", "yellow" if "0σ" in (a + b) else "")


def group_cells(group: GroupComparison, unread_a: bool = False, unread_b: bool = False) -> tuple[Text, ...]:
    """One group slot: A | B | Δ for each figure; ``unread_a``/``unread_b``: a reward of the group in that step
    is unreadable, so its reward figures there (and their deltas) read UNREAD (``?`` for degenerate)."""
    cells: list[Text] = [Text(MISSING if group.group_index is None else str(group.group_index))]
    n = group.delta("n")
    cells.append(Text(f"{figure_text('n', n.a)}/{figure_text('n', n.b)}"))
    for name in ("reward_mean", "reward_std"):
        delta = group.delta(name)
        a = unread_text() if unread_a else Text(figure_text(name, delta.a))
        b = unread_text() if unread_b else Text(figure_text(name, delta.b))
        cells += [a, b, unread_text() if unread_a or unread_b else delta_text(delta)]
        if name == "reward_std":
            cells.append(_zero_std(group, unread_a, unread_b))
    for name in ("response_length_mean", "truncated_frac", "avg_staleness"):
        delta = group.delta(name)
        cells += [Text(figure_text(name, delta.a)), Text(figure_text(name, delta.b)), delta_text(delta)]
    return tuple(cells)


def trace_rows(trace: tuple[GroupInStep, ...], a: int, b: int, evaluation: bool) -> list[TableRow]:
    """A group slot in every step: a bold line per step, then its samples (unreadable rewards read UNREAD)."""
    reward_column = "reward" if evaluation else "raw_reward"
    rows = []
    for found in trace:
        f = found.figures
        marker = " A" if f.rollout_id == a else (" B" if f.rollout_id == b else "")
        unread = any(unreadable(row, reward_column) for row in found.rows)
        rows.append(
            TableRow(
                ("step", f.rollout_id),
                (
                    Text(f"{f.rollout_id}{marker}"),
                    Text.styled("group", "dim"),
                    Text(str(f.n)),
                    unread_text() if unread else Text(number(f.reward_mean)),
                    unread_text() if unread else Text(number(f.reward_std)),
                    Text("?") if unread else Text.styled("0σ", "yellow") if f.zero_std else Text.styled("·", "dim"),
                    Text(number(f.response_length_mean, 1)),
                    Text(percent(f.truncated_frac)),
                    Text(number(f.avg_staleness, 2)),
                    Text(""),
                ),
                "bold",
            )
        )
        for row in found.rows:
            rows.append(
                TableRow(
                    ("sample", f.rollout_id, row.sample_index),
                    (
                        Text(""),
                        Text(str(row.sample_index)),
                        Text(""),
                        unread_text()
                        if unreadable(row, reward_column)
                        else Text(number(group_reward(row, evaluation))),
                        Text(""),
                        Text(""),
                        Text(str(row.response_length)),
                        Text.styled("yes" if row.truncated else "no", "yellow" if row.truncated else "dim"),
                        Text(number(row.staleness)),
                        Text.styled(inert(row.status or MISSING), "" if row.status == "completed" else "yellow"),
                    ),
                    "dim" if row.remove_sample else "",
                )
            )
    return rows


class CompareScreen(MonitorScreen):
    """Step A against step B, group by group."""

    CSS_PATH = "compare_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        Binding("left_square_bracket", "move('b', -1)", "B prev", key_display="["),
        Binding("right_square_bracket", "move('b', 1)", "B next", key_display="]"),
        Binding("left_curly_bracket", "move('a', -1)", "A prev", key_display="{"),
        Binding("right_curly_bracket", "move('a', 1)", "A next", key_display="}"),
        Binding("x", "swap", "Swap A/B", show=False),
    ]

    def __init__(self, a: int, b: int, evaluation: bool = False, sample_index: int | None = None) -> None:
        super().__init__()
        self.a = a
        self.b = b
        self.evaluation = evaluation
        self.sample_index = sample_index
        """A sample of step A: the screen opens on its group slot traced across steps."""
        self.comparison: StepComparison | None = None
        self.fetched: dict[int, StepSummary] = {}
        """Steps A and B as last fetched, by rollout id."""
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
        cached = self.miles.model.summaries.get((rid, self.evaluation))
        if cached is not None:
            return cached
        return await asyncio.shield(self.miles.watcher.summary(rid, self.evaluation))

    @work(exclusive=True, group="compare", exit_on_error=False)
    async def _load(self) -> None:
        table = self.query_one("#groups", VirtualTable)
        self._title()
        try:
            a = await self._summary(self.a)
            b = await self._summary(self.b)
            self.fetched = {self.a: a, self.b: b}
        except Exception as err:
            self.comparison = None
            table.placeholder = f"✗ {err}"
            table.set_rows([])
            self.query_one("#deltas", Label).update("")
            return
        self.comparison = compare_steps(a, b)
        if self.sample_index is not None:  # once: open on the sample's group slot across steps
            sample, self.sample_index = self.sample_index, None
            if any(row.sample_index == sample for row in a.rows):
                self.group, self.tracing = group_of(a, sample), True
            else:
                self.notify(f"step {self.a} has no sample {sample}", severity="warning", timeout=4)
        self._show()

    def _title(self) -> None:
        kind = "eval " if self.evaluation else ""
        text = Text()
        text.append("compare ", style="bold")
        if self.tracing:
            text.append(f"· group {MISSING if self.group is None else self.group} across steps ", style="bold")
            text.append("(group numbers restart every step: same slot, not necessarily the same prompt)", style="dim")
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
        table.placeholder = "neither step has groups"
        unread_a, unread_b = (
            group_rewards_unreadable(self.fetched[rid]) if rid in self.fetched else set() for rid in (self.a, self.b)
        )
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
        if which == "a":
            self.a = target
        else:
            self.b = target
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
        self.miles.show_sample(rid, self.evaluation, sample_index, busy=self.query_one("#groups", VirtualTable))
