"""The outlier finder: the tokens (or samples) that stand out in a step or the last few steps.

Contract: every figure comes from :mod:`miles_tui.core.analysis.outliers` (ranked off the event
loop); this screen only loads steps through the app's watcher, formats rows
and navigates. Token rankings need a step's per-token data: steps already open
cost nothing, the others are opened on demand, one at a time, with a progress
line, and results fill in as each step is done. Sample rankings need only
summaries. Enter on a token opens the sample screen with its cursor on that
token; on a sample, on the sample's top token of the kind shown. The result
is a snapshot of when it was computed: ``r`` recomputes it. Reads through
the watcher are shielded: a worker cancelled by a new toggle must not release
the watcher's lock while its read still runs in a thread.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Footer, Label, ProgressBar, Tab, Tabs

from miles_tui.core.analysis import (
    KINDS,
    LAST_STEPS,
    TOP_K,
    OutlierKind,
    StepOutliers,
    merge_outliers,
    peak_position,
    recent_steps,
    sample_outliers,
    step_outliers,
)
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import OpenStep, StepKey, StepSummary
from miles_tui.tui.formatting import UNREAD_STYLE, count_text
from miles_tui.tui.screens.monitor_screen import MonitorScreen
from miles_tui.tui.views.lazy_rows import TableRow
from miles_tui.tui.views.outlier_rows import (
    KIND_LABELS,
    RANKED_BY,
    SAMPLE_COLUMNS,
    SAMPLE_LABELS,
    TOKEN_COLUMNS,
    SampleKey,
    TokenKey,
    sample_cells,
    token_cells,
)
from miles_tui.tui.views.table_layout import Column
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.virtual_table import VirtualTable


class OutlierScreen(MonitorScreen):
    """Top tokens (or samples) of a step, or of the last few steps, for one kind at a time."""

    CSS_PATH = "outlier_screen.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "Back"),
        # t, not k: k is "up" in every table, here too
        Binding("t", "cycle_kind(1)", "Kind"),
        Binding("T", "cycle_kind(-1)", "Previous kind", show=False),
        Binding("1", "kind('lp_diff')", "|lpΔ|", show=False),
        Binding("2", "kind('imp_ratio')", "ratio", show=False),
        Binding("3", "kind('entropy')", "entropy", show=False),
        Binding("a", "toggle_scope", f"Step/last {LAST_STEPS}", show=False),
        Binding("s", "toggle_level", "Tokens/samples"),
        Binding("r", "recompute", "Recompute", show=False),
    ]

    def __init__(self, rollout_id: int, evaluation: bool = False) -> None:
        super().__init__()
        self.rollout_id = rollout_id
        self.evaluation = evaluation
        self.kind = OutlierKind.LP_DIFF
        self.recent = False
        """Whether the ranking spans the last LAST_STEPS steps (else this step)."""
        self.samples_level = False
        """Whether the table ranks samples (else tokens)."""
        self.computed: dict[int, StepOutliers] = {}
        """Token rankings of the steps done so far."""
        self.summaries: dict[int, StepSummary] = {}
        self.failures: dict[int, str] = {}
        """Steps that could not be loaded, and why."""
        self.texts: dict[int, str] = {}
        """Decoded token text by id (only the ids shown)."""
        self._own_step: OpenStep | None = None
        """This screen's step as ranked: Enter opens it without a re-read, however many steps were opened since."""

    def compose(self) -> ComposeResult:
        yield RunHeader()
        yield Label("", id="title")
        yield Tabs(*(Tab(KIND_LABELS[kind], id=kind.value) for kind in KINDS), id="kinds")
        with Horizontal(id="progress-row"):
            yield Label("", id="progress-label")
            yield ProgressBar(show_eta=False, show_percentage=False, id="progress")
        table = VirtualTable(id="outliers")
        table.placeholder = "finding outliers…"
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#progress-row").display = False
        self.query_one(Tabs).can_focus = False
        self.query_one("#outliers", VirtualTable).focus()
        self._show_rankings()
        self._load()

    # -- which steps ------------------------------------------------------------------

    def steps(self) -> tuple[int, ...]:
        """The steps the ranking spans, newest first."""
        if not self.recent:
            return (self.rollout_id,)
        model = self.miles.model
        return recent_steps(model.evaluation if self.evaluation else model.train, self.rollout_id, LAST_STEPS)

    # -- loading ------------------------------------------------------------------------

    def _progress(self, done: int, total: int, text: str) -> None:
        row = self.query_one("#progress-row")
        row.display = bool(text)
        self.query_one("#progress-label", Label).update(text)
        self.query_one("#progress", ProgressBar).update(total=max(total, 1), progress=done)

    @work(exclusive=True, group="outliers", exit_on_error=False)
    async def _load(self) -> None:
        """Fetch what the current view needs (summaries, or per-token rankings), step by step."""
        steps = self.steps()
        todo = [rid for rid in steps if rid not in (self.summaries if self.samples_level else self.computed)]
        todo = [rid for rid in todo if rid not in self.failures]
        for done, rid in enumerate(todo):
            self._progress(
                done,
                len(todo),
                f"{'summarizing' if self.samples_level else 'ranking'} step {rid} ({done + 1}/{len(todo)})…",
            )
            try:
                if self.samples_level:
                    self.summaries[rid] = await self._summary(rid)
                else:
                    opened = self.miles.reader.cached_open(rid, self.evaluation)
                    if opened is None:
                        self._progress(done, len(todo), f"opening step {rid} ({done + 1}/{len(todo)})…")
                        opened = await asyncio.shield(self.miles.watcher.open(rid, self.evaluation))
                    if rid == self.rollout_id:
                        self._own_step = opened
                    self.summaries[rid] = opened.summary
                    self.computed[rid] = await asyncio.to_thread(step_outliers, opened, TOP_K)
                    await self._decode(self.computed[rid])
            except Exception as err:  # a step that cannot be read is reported, the others still rank
                self.failures[rid] = str(err)
            self._show_rankings()
        self._progress(len(todo), len(todo), "")
        self._show_rankings()

    async def _summary(self, rid: int) -> StepSummary:
        cached = self.miles.model.summaries.get(StepKey(rid, self.evaluation))
        if cached is not None:
            return cached
        return await asyncio.shield(self.miles.watcher.summary(rid, self.evaluation))

    async def _decode(self, found: StepOutliers) -> None:
        ids = sorted({o.token_id for records in found.tokens.values() for o in records} - set(self.texts) - {-1})
        if not ids:
            return
        reader = self.miles.reader
        texts = await asyncio.to_thread(lambda: reader.detokenizer.texts(ids))  # loads tokenizer.json once
        if texts is not None:
            self.texts.update(zip(ids, texts, strict=True))

    # -- drawing ------------------------------------------------------------------------

    def _show_rankings(self, top: bool = False) -> None:
        """Draw the current ranking; ``top`` puts the cursor on its first row (a new ranking), else it
        stays on its token while more steps fill in (unless it is on the first row: then it stays first)."""
        table = self.query_one("#outliers", VirtualTable)
        top = top or table.cursor_row == 0
        steps = self.steps()
        if self.samples_level:
            ranked_samples = sample_outliers([self.summaries[r] for r in steps if r in self.summaries], self.kind)
            columns = tuple(
                Column(c.key, SAMPLE_LABELS[self.kind], c.width) if c.key == "value" else c for c in SAMPLE_COLUMNS
            )
            table.set_columns(columns)
            sample_rows = [
                TableRow(("sample", o.rollout_id, o.sample_index), sample_cells(rank, o))
                for rank, o in enumerate(ranked_samples, 1)
            ]
            table.set_rows(sample_rows, keep_key=not top)
            shown, population = len(sample_rows), sum(len(self.summaries[r].rows) for r in steps if r in self.summaries)
        else:
            ranked_tokens = merge_outliers([self.computed[r] for r in steps if r in self.computed], self.kind)
            table.set_columns(TOKEN_COLUMNS[self.kind])
            token_rows = [
                TableRow(("token", o.rollout_id, o.sample_index, o.position), token_cells(rank, o, self.texts))
                for rank, o in enumerate(ranked_tokens, 1)
            ]
            table.set_rows(token_rows, keep_key=not top)
            shown = len(token_rows)
            population = sum(self.computed[r].ranked[self.kind] for r in steps if r in self.computed)
        table.placeholder = self._empty_reason(steps)
        if top and table.rows:
            table.move_to_key(table.rows[0].key)
        self._title(steps, shown, population)
        tabs = self.query_one(Tabs)
        if tabs.active != self.kind.value:
            tabs.active = self.kind.value

    def _unreadable(self, steps: tuple[int, ...]) -> int:
        """Samples of ``steps`` whose per-token data is unreadable (they cannot be ranked)."""
        return sum(r.alignment_failed for rid in steps if rid in self.summaries for r in self.summaries[rid].rows)

    def _empty_reason(self, steps: tuple[int, ...]) -> str:
        done = self.summaries if self.samples_level else self.computed
        if any(r not in done and r not in self.failures for r in steps):
            return "finding outliers…"
        if self.failures and all(r in self.failures for r in steps):
            return "✗ " + self.failures[steps[0]]
        what = "tokens" if not self.samples_level else "samples"
        unread = self._unreadable(steps)
        if unread:
            return f"no {what} to rank: the per-token data of {unread} sample{'s' if unread != 1 else ''} is unreadable"
        if self.evaluation:
            return f"no {what} to rank: eval steps have no train-side per-token data"
        needs = "train and rollout log-probs" if self.kind is not OutlierKind.ENTROPY else "entropy (a dump flag)"
        return f"no {what} to rank: this needs {needs} at trained positions, and the dump has none"

    def _title(self, steps: tuple[int, ...], shown: int, population: int) -> None:
        text = Text()
        text.append("outliers ", style="bold")
        kind = "eval step" if self.evaluation else "step"
        if self.recent:
            span = f"{steps[-1]}–{steps[0]}" if len(steps) > 1 else str(steps[0])
            text.append(f"· {kind}s {span} ", style="bold")
        else:
            text.append(f"· {kind} {self.rollout_id} ", style="bold")
        tokens_by, samples_by = RANKED_BY[self.kind]
        text.append(f"· samples by {samples_by}" if self.samples_level else f"· {tokens_by}")
        if population:
            what = "samples" if self.samples_level else "trained tokens"
            text.append(f" · top {shown} of {count_text(population)} {what}")
        unread = self._unreadable(steps)
        if unread:
            text.append(f" · {unread} UNREADABLE sample{'s' if unread != 1 else ''} not ranked", style=UNREAD_STYLE)
        for rid in steps:
            if rid in self.failures:
                text.append(f"\n✗ step {rid}: {inert(self.failures[rid])}", style="red")
        self.query_one("#title", Label).update(text)

    # -- actions ------------------------------------------------------------------------

    @on(Tabs.TabActivated, "#kinds")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        """A click on a kind tab shows that kind."""
        kind = OutlierKind(event.tab.id)
        if kind is not self.kind:
            self.kind = kind
            self._show_rankings(top=True)

    def action_cycle_kind(self, step: int) -> None:
        """Show the next (previous) kind: lp diff → imp ratio → entropy."""
        self.kind = KINDS[(KINDS.index(self.kind) + step) % len(KINDS)]
        self._show_rankings(top=True)

    def action_kind(self, name: str) -> None:
        """Show one kind."""
        self.kind = OutlierKind(name)
        self._show_rankings(top=True)

    def action_toggle_scope(self) -> None:
        """This step ↔ the last LAST_STEPS steps (ending at this one)."""
        self.recent = not self.recent
        self._show_rankings(top=True)
        self._load()

    def action_toggle_level(self) -> None:
        """Rank tokens ↔ rank samples by their per-sample statistics."""
        self.samples_level = not self.samples_level
        self._show_rankings(top=True)
        self._load()

    def action_recompute(self) -> None:
        """Forget the rankings and compute them again from the current files."""
        self.computed.clear()
        self.summaries.clear()
        self.failures.clear()
        self._own_step = None
        self._show_rankings(top=True)
        self._load()

    def action_back(self) -> None:
        self.app.pop_screen()

    @on(VirtualTable.Selected, "#outliers")
    def _selected(self, message: VirtualTable.Selected) -> None:
        """Enter: the sample screen, cursor on the token (a sample row: on its top token of this kind)."""
        key = message.key
        if isinstance(key, tuple) and key[0] == "token":
            _, rid, sample_index, position = cast(TokenKey, key)
            self._open_sample(rid, sample_index, position)
        elif isinstance(key, tuple) and key[0] == "sample":
            _, rid, sample_index = cast(SampleKey, key)
            self._open_sample(rid, sample_index, None)

    def _open_sample(self, rid: int, sample_index: int, position: int | None) -> None:
        """The sample screen with the cursor on ``position`` (None: on the sample's peak token)."""
        kind = self.kind
        cursor = position if position is not None else (lambda step: peak_position(step, sample_index, kind))
        self.miles.navigation.show_sample(
            rid, self.evaluation, sample_index, cursor=cursor, busy=self.query_one("#outliers", VirtualTable)
        )
