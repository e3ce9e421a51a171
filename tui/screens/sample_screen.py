"""What happened in one sample, token by token: per-token series, a cursor, the conversation.

Contract: :class:`SampleScreen` shows one sample of an open step. It reads
nothing itself: the step, the detokenizer and the conversation sidecar are
handed in, and every per-token value comes from :func:`miles_tui.core.dump.token_view.token_view`
(NaN at loss-masked positions, never 0; UNREADABLE series say so, NOT_DUMPED
ones are listed on one line). All per-sample arrays are prepared once when a
sample is shown (:class:`~miles_tui.tui.views.sample_tracks.SampleTracks`); a cursor
key only moves the :class:`~miles_tui.tui.views.token_window.TokenWindow` and
reactives on widgets that already exist, so a key costs the same on a
32k-token response as on a short one. The screen composes and routes: its
text lines come from :mod:`miles_tui.tui.views.sample_lines`, the conversation tab
is a :class:`~miles_tui.tui.widgets.conversation_view.ConversationView`.
``h`` shows the token text coloured by |lpΔ|, entropy or advantage
(deciles from :func:`miles_tui.core.analysis.token_heat.token_heat`, drawn
by :class:`~miles_tui.tui.widgets.token_text.TokenText`), then hides it.
``<``/``>`` replace the sample in place with its GRPO-group neighbour and post
:class:`SampleScreen.SampleShown`. Esc/Backspace pop the screen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane, Tabs

from miles_tui.core.analysis import HeatStatistic
from miles_tui.core.analysis.token_heat import token_heat
from miles_tui.core.base.errors import MilesTuiError
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import SERIES, Detokenizer, FieldState, OpenStep, Sidecar
from miles_tui.tui.views.clipboard import copy_sample_row, copy_token_window
from miles_tui.tui.views.sample_lines import LABELS, chip_lines, chips, cursor_line, cursor_rows
from miles_tui.tui.views.sample_tracks import SampleTracks, TokenSeries
from miles_tui.tui.views.token_text_lines import HEAT_CYCLE, TokenSource
from miles_tui.tui.views.token_window import TokenWindow
from miles_tui.tui.widgets.conversation_view import ConversationView
from miles_tui.tui.widgets.lifecycle_lane import LifecycleLane
from miles_tui.tui.widgets.series_chart import ChartSeries, SeriesChart
from miles_tui.tui.widgets.token_sparkline import TokenSparkline
from miles_tui.tui.widgets.token_text import TokenText


class SampleScreen(Screen[None]):
    """Per-token view of one sample, with its conversation."""

    CSS_PATH = "sample_screen.tcss"
    AUTO_FOCUS = ""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "close", "Back"),
        Binding("left", "move(-1)", "Previous token", show=False),
        Binding("right", "move(1)", "Next token", show=False),
        Binding("shift+left", "move(-10)", "10 tokens back", show=False),
        Binding("shift+right", "move(10)", "10 tokens on", show=False),
        Binding("home", "move_to_end(False)", "First response token", show=False),
        Binding("end", "move_to_end(True)", "Last response token", show=False),
        Binding("n", "outlier(1)", "Next outlier"),
        Binding("N", "outlier(-1)", "Previous outlier", show=False),
        Binding("w", "cycle_window", "Window"),
        Binding("s", "cycle_series(1)", "Series", show=False),
        Binding("S", "cycle_series(-1)", "Previous series", show=False),
        Binding("c", "toggle_chart", "Chart", show=False),
        Binding("h", "cycle_heat(1)", "Colour", show=False),
        Binding("H", "cycle_heat(-1)", "Previous colour", show=False),
        Binding("t", "toggle_tab", "Conversation"),
        Binding("z", "fold", "Fold system/tool", show=False),
        Binding("less_than_sign", "sibling(-1)", "Previous in group", key_display="<", show=False),
        Binding("greater_than_sign", "sibling(1)", "Next in group", key_display=">", show=False),
        Binding("y", "copy_window", "Copy tokens", show=False),
        Binding("Y", "copy_row", "Copy row", show=False),
    ]
    _TOKEN_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"move", "move_to_end", "outlier", "cycle_window", "cycle_series", "toggle_chart", "cycle_heat"}
    )

    @dataclass
    class SampleShown(Message):
        """The screen now shows another sample (after ``<``/``>``)."""

        rollout_id: int
        """The step."""
        evaluation: bool
        """Whether it is an eval step."""
        sample_index: int
        """The sample now shown."""

    def __init__(
        self,
        step: OpenStep,
        sample_index: int,
        detokenizer: Detokenizer | None,
        sidecar: Sidecar | None,
        cursor: int | None = None,
        tracks: SampleTracks | None = None,
    ) -> None:
        """``tracks``: the sample prepared off the event loop (None: prepared here, as tests do)."""
        super().__init__()
        self._start_cursor = cursor
        """Response position to open on (None: the first response token)."""
        self.step = step
        self.detokenizer = detokenizer
        self.sidecar = sidecar
        self.sample = tracks if tracks is not None else SampleTracks.load(step, sample_index, detokenizer)
        view = self.sample.view
        self.tokens = TokenWindow(view.prompt_length, view.response_length, self.sample.outliers)
        """The cursor and the visible window."""
        self.selected = next((n for n in ("lp_diff", *SERIES) if n in self.sample.tracks), SERIES[0])
        self._charted: tuple[TokenSeries, tuple[int, int]] | None = None
        self.heat: HeatStatistic | None = None
        """What the token text is coloured by (None: the coloured text is hidden)."""
        self._source = TokenSource(view.token_ids, self.sample.texts)
        self._on_tokens_tab = True
        self._sibling_target: int | None = None
        """The sibling whose tracks are being prepared off the event loop (None: none)."""

    @property
    def sample_index(self) -> int:
        return self.sample.row.sample_index

    @property
    def cursor(self) -> int:
        """Response position under the cursor."""
        return self.tokens.cursor

    @property
    def window(self) -> tuple[int, int]:
        """Visible token positions ``[start, stop)``."""
        return self.tokens.window

    def compose(self) -> ComposeResult:
        yield Static(id="chips")
        yield LifecycleLane(id="lifecycle")
        with TabbedContent(id="tabs"):
            with TabPane("Tokens", id="tokens"):
                yield Static(id="cursor-line")
                yield TokenText(id="token-text")
                yield Static(id="not-dumped")
                yield TokenSparkline(axis=True, id="axis")
                with VerticalScroll(id="panels", can_focus=False):
                    for name in SERIES:
                        yield TokenSparkline(name, id=f"series-{name}", classes="series")
                yield SeriesChart(id="chart")
            with TabPane("Conversation", id="conversation"):
                yield ConversationView(id="messages")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Tabs).can_focus = False
        self.query_one("#chart", SeriesChart).display = False
        self.query_one(TokenText).display = False
        self._show_sample()
        if self._start_cursor is not None:
            self._move(self.tokens.moved_to(self._start_cursor))

    # ---- showing a sample --------------------------------------------------------------------

    def _panels(self) -> list[TokenSparkline]:
        return list(self.query(".series").results(TokenSparkline))

    def _show_sample(self) -> None:
        sample = self.sample
        self._show_chips()
        if self.selected not in sample.tracks and sample.tracks:
            self.selected = next(n for n in SERIES if n in sample.tracks)
        not_dumped = []
        for panel in self._panels():
            state = sample.view.states[panel.series]
            panel.display = state is not FieldState.NOT_DUMPED
            if state is FieldState.NOT_DUMPED:
                not_dumped.append(LABELS[panel.series])
            panel.title = LABELS[panel.series]
            panel.state = state
            panel.note = sample.unreadable_note if state is FieldState.UNREADABLE else ""
            panel.data = sample.tracks.get(panel.series)
            panel.selected = panel.series == self.selected
        self.query_one("#axis", TokenSparkline).data = TokenSeries(np.full(len(sample.bands), np.nan), sample.bands)
        line = self.query_one("#not-dumped", Static)
        line.update(Content.assemble(("not dumped: ", "bold"), ", ".join(not_dumped)))
        line.display = bool(not_dumped)
        summary = self.step.summary
        self.query_one(LifecycleLane).show(summary.rollout_id, summary.evaluation, self.sample_index)
        conversation = None if self.sidecar is None else self.sidecar.conversations.get(self.sample_index)
        self.query_one(ConversationView).show(conversation, None if self.sidecar is None else self.sidecar.problem)
        view = sample.view
        self._source = TokenSource(view.token_ids, sample.texts)
        self.tokens = self.tokens.for_sample(view.prompt_length, view.response_length, sample.outliers)
        self._show_heat()
        self._move(self.tokens)

    def _show_chips(self) -> None:
        self.query_one("#chips", Static).update(chip_lines(chips(self.step, self.sample), self.size.width - 2))
        self.query_one("#cursor-line", Static).styles.height = cursor_rows(
            self.sample, self.detokenizer, self.size.width
        )

    def on_resize(self) -> None:
        """Re-wrap the chips and the cursor line; on short terminals, flatter panels so more fit."""
        self.set_class(self.size.height < 32, "-short")
        self.query_one(TokenText).set_rows(3 if self.size.height < 32 else 6)
        self._show_chips()
        self._move(self.tokens.moved_to(self.cursor))

    # ---- the cursor ----------------------------------------------------------------------------

    def _move(self, tokens: TokenWindow) -> None:
        """Take the new cursor and window, and redraw what depends on them."""
        self.tokens = tokens
        sample = self.sample
        length = sample.view.response_length
        position = tokens.position
        axis = self.query_one("#axis", TokenSparkline)
        axis.title = f"window {'all' if tokens.size is None else tokens.size}"
        axis.window, axis.cursor = tokens.window, position
        for panel in self._panels():
            if panel.display:
                panel.window = tokens.window
                panel.cursor = position if length else None
                panel.reading = sample.value(panel.series, tokens.cursor)
        line = cursor_line(sample, tokens, self.detokenizer, self.size.width)
        self.query_one("#cursor-line", Static).update(line, layout=False)
        if self.heat is not None:
            self.query_one(TokenText).move(position)
        self._show_chart()

    def _show_heat(self) -> None:
        """Show the token text coloured by the chosen statistic (hidden when none is chosen)."""
        text = self.query_one(TokenText)
        text.display = self.heat is not None
        if self.heat is not None:
            heat = token_heat(self.sample.view, self.heat)
            view, note = self.sample.view, self.sample.unreadable_note
            text.show(self._source, view.prompt_length, heat, note, self.tokens.position)

    def _show_chart(self) -> None:
        chart = self.query_one("#chart", SeriesChart)
        track = self.sample.tracks.get(self.selected)
        if not chart.display or track is None:
            return
        start, stop = self.window
        if self._charted != (track, self.window):  # a new ChartSeries redraws the whole chart
            chart.series = ChartSeries(LABELS[self.selected], start, track.values[start:stop])
            self._charted = (track, self.window)
        chart.cursor = self.tokens.position

    # ---- actions ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Token keys only on the tokens tab; dim what this sample cannot do."""
        if action in self._TOKEN_ACTIONS and not self._on_tokens_tab:
            return False
        if action == "outlier" and len(self.sample.outliers) == 0:
            return None
        if action == "sibling" and self.sample.row.group_index is None:
            return None
        return True

    def action_close(self) -> None:
        """Back to the screen below."""
        self.dismiss()

    def action_move(self, delta: int) -> None:
        """Move the token cursor by ``delta`` response positions."""
        self._move(self.tokens.moved_by(delta))

    def action_move_to_end(self, last: bool) -> None:
        """Jump to the first or last response token."""
        self._move(self.tokens.at_end(last))

    def action_outlier(self, step: int) -> None:
        """Jump to the next (or previous) token in order of |lpΔ|, largest first."""
        stepped = self.tokens.outlier_step(step)
        if stepped.note is not None:
            self.notify(stepped.note, timeout=4 if len(self.sample.outliers) == 0 else 2)
            return
        self._move(stepped.window)

    def action_cycle_window(self) -> None:
        """Show 256 / 1k / 4k / all tokens around the cursor (a sample shorter than 256 tokens is all shown)."""
        if len(self.tokens.sizes()) == 1:
            self.notify(f"all {self.tokens.total_length} tokens already fit in the window", timeout=3)
            return
        self._move(self.tokens.cycled())

    def action_cycle_series(self, step: int) -> None:
        """Select the series the chart draws."""
        names = [n for n in SERIES if n in self.sample.tracks]
        if not names:
            return
        index = names.index(self.selected) if self.selected in names else -1
        self.selected = names[(index + step) % len(names)]
        for panel in self._panels():
            panel.selected = panel.series == self.selected
            if panel.selected:
                self.query_one("#panels", VerticalScroll).scroll_to_widget(panel, animate=False)
        self._show_chart()

    def action_toggle_chart(self) -> None:
        """Show or hide the chart of the selected series."""
        chart = self.query_one("#chart", SeriesChart)
        chart.display = not chart.display
        self._show_chart()

    def action_cycle_heat(self, step: int = 1) -> None:
        """Colour the token text by the next (``step`` -1: the previous) per-token statistic of the nine, or
        hide it again (:data:`HEAT_CYCLE`)."""
        self.heat = HEAT_CYCLE[(HEAT_CYCLE.index(self.heat) + step) % len(HEAT_CYCLE)]
        self._show_heat()

    def action_fold(self) -> None:
        """Fold the conversation's system and tool messages to one line each, or unfold them."""
        if self._on_tokens_tab:
            self.notify("z folds the conversation's system and tool messages: t shows the conversation", timeout=4)
            return
        view = self.query_one(ConversationView)
        count = view.toggle_fold()
        if not count:
            self.notify("no system or tool message to fold in this conversation", timeout=4)

    def action_toggle_tab(self) -> None:
        """Switch between the token panels and the conversation."""
        tabs = self.query_one("#tabs", TabbedContent)
        tabs.active = "conversation" if tabs.active == "tokens" else "tokens"

    def action_sibling(self, step: int) -> None:
        """Show the previous/next sample of the same GRPO group, in place.

        With a tokenizer, the sibling's token texts are decoded off the event loop (a decode may take the
        detokenizer's whole budget); keys pressed meanwhile walk on from the sample being prepared.
        """
        group = self.sample.row.group_index
        if group is None:
            self.notify("this sample has no group", timeout=2)
            return
        members = [row.sample_index for row in self.step.summary.rows if row.group_index == group]
        current = self._sibling_target if self._sibling_target is not None else self.sample_index
        index = members.index(current) + step
        if not 0 <= index < len(members):
            self.notify(f"{'first' if step < 0 else 'last'} sample of group {group}", timeout=2)
            return
        if self.detokenizer is None or not self.detokenizer.status.available:
            self._shown_sibling(lambda: SampleTracks.load(self.step, members[index], None))
            return
        self._sibling_target = members[index]
        self._show_sibling(members[index])

    @work(exclusive=True, group="sample-sibling", exit_on_error=False)
    async def _show_sibling(self, sample_index: int) -> None:
        tracks = await asyncio.to_thread(self._sibling_tracks, sample_index)
        if self._sibling_target == sample_index:
            self._sibling_target = None
        self._shown_sibling(lambda: tracks)

    def _sibling_tracks(self, sample_index: int) -> SampleTracks | MilesTuiError:
        try:
            return SampleTracks.load(self.step, sample_index, self.detokenizer)
        except MilesTuiError as err:
            return err

    def _shown_sibling(self, load: Callable[[], SampleTracks | MilesTuiError]) -> None:
        try:
            tracks = load()
        except MilesTuiError as err:
            tracks = err
        if isinstance(tracks, MilesTuiError):  # e.g. the sibling's token ids are unreadable
            self._sibling_target = None
            self.notify(inert(str(tracks)), severity="error", markup=False, timeout=8)
            return
        self.sample = tracks
        self._show_sample()
        summary = self.step.summary
        self.post_message(self.SampleShown(summary.rollout_id, summary.evaluation, self.sample_index))

    def action_copy_window(self) -> None:
        """Copy the shown token window's per-token values (TSV) to the clipboard."""
        start, stop = self.window
        copy_token_window(self.app, self.sample.view, start, stop, self.sample.texts)

    def action_copy_row(self) -> None:
        """Copy the sample's ROW (TSV) to the clipboard."""
        copy_sample_row(self.app, self.sample.row)

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        """Focus the conversation for scrolling; give the token keys back on the tokens tab."""
        self._on_tokens_tab = event.pane.id == "tokens"
        if self._on_tokens_tab:
            self.set_focus(None)
        else:
            self.query_one(ConversationView).focus()
        self.refresh_bindings()

    @on(TokenSparkline.PositionClicked)
    def _clicked(self, event: TokenSparkline.PositionClicked) -> None:
        """Move the cursor to a clicked token (a click on the prompt goes to the first response token)."""
        self._move(self.tokens.moved_to(event.position - self.sample.view.prompt_length))
