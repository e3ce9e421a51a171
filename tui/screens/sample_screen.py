"""What happened in one sample, token by token: per-token series, a cursor, the conversation.

Contract: :class:`SampleScreen` shows one sample of an open step. It reads
nothing itself: the step, the detokenizer and the conversation sidecar are
handed in, and every per-token value comes from :func:`miles_tui.core.dump.token_view.token_view`
(NaN at loss-masked positions, never 0; UNREADABLE series say so, NOT_DUMPED
ones are listed on one line). All per-sample arrays are prepared once when a
sample is shown; a cursor key only moves reactives on widgets that already
exist, so a key costs the same on a 32k-token response as on a short one.
``<``/``>`` replace the sample in place with its GRPO-group neighbour and post
:class:`SampleScreen.SampleShown`. Esc/Backspace pop the screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane, Tabs

from miles_tui.core.dump.resolve import FieldState
from miles_tui.core.dump.step import OpenStep
from miles_tui.core.dump.summary import SampleRow
from miles_tui.core.dump.token_view import SERIES, TokenView, token_view
from miles_tui.core.dump.tokenizer import Detokenizer
from miles_tui.core.dump.trajectory import Conversation, Sidecar, tool_call
from miles_tui.core.dump.trajectory import Message as ChatMessage
from miles_tui.core.errors import MilesTuiError
from miles_tui.core.inert_text import inert
from miles_tui.tui.clipboard import copy_sample_row, copy_token_window
from miles_tui.tui.formatting import MISSING, number, version_span
from miles_tui.tui.renderers.sparkline import Band, BandArray, FloatArray
from miles_tui.tui.widgets.series_chart import ChartSeries, SeriesChart
from miles_tui.tui.widgets.token_sparkline import TokenSeries, TokenSparkline, reading_text

LABELS = {
    "rollout_log_probs": "rollout logp",
    "train_log_probs": "train logp",
    "ref_log_probs": "ref logp",
    "lp_diff": "lp diff",
    "imp_ratio": "imp ratio",
    "entropy": "entropy",
    "ref_entropy": "ref entropy",
    "advantages": "advantage",
    "returns": "return",
}
"""Series names on the panels, in core's SERIES order."""

SHORT_LABELS = {
    "rollout_log_probs": "rollout",
    "train_log_probs": "train",
    "ref_log_probs": "ref",
    "lp_diff": "lp diff",
    "imp_ratio": "ratio",
    "entropy": "entropy",
    "ref_entropy": "ref ent",
    "advantages": "adv",
    "returns": "return",
}
"""Series names on the cursor line."""

WINDOWS: tuple[int | None, ...] = (256, 1024, 4096, None)
"""Visible window sizes in tokens, ``w`` cycles; None is the whole sequence."""


@dataclass(frozen=True, eq=False)
class _Sample:
    """One sample prepared for drawing: computed once per sample, read on every key."""

    row: SampleRow
    view: TokenView
    tracks: dict[str, TokenSeries]
    """OK series over every token position (NaN on prompt and masked positions)."""
    bands: BandArray
    outliers: npt.NDArray[np.int64]
    texts: list[str] | None
    unreadable_note: str

    @classmethod
    def load(cls, step: OpenStep, sample_index: int, detokenizer: Detokenizer | None) -> _Sample:
        row = step.row(sample_index)  # StepNotFoundError for an unknown sample
        view = token_view(step, sample_index)
        trained = view.trained()
        bands = np.full(view.total_length, int(Band.PROMPT), dtype=np.int8)
        bands[view.prompt_length :] = np.where(trained, int(Band.TRAINED), int(Band.MASKED))
        tracks = {}
        for name in SERIES:
            masked = view.masked(name)
            if masked is not None:
                values: FloatArray = np.full(view.total_length, np.nan)
                values[view.prompt_length :] = masked
                tracks[name] = TokenSeries(values, bands)
        texts = detokenizer.texts(view.token_ids) if detokenizer is not None else None
        note = (
            "UNREADABLE: its train file could not be loaded"
            if sample_index in step.unreadable
            else "UNREADABLE: dumped, but its slices could not be placed"
        )
        return cls(row, view, tracks, bands, view.outlier_positions(), texts, note)

    def value(self, name: str, response_position: int) -> float | None:
        """A series at a response position; None where it has no value."""
        track = self.tracks.get(name)
        if track is None or not 0 <= response_position < self.view.response_length:
            return None
        value = float(track.values[self.view.prompt_length + response_position])
        return None if np.isnan(value) else value


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
        Binding("s", "cycle_series(1)", "Series"),
        Binding("S", "cycle_series(-1)", "Previous series", show=False),
        Binding("c", "toggle_chart", "Chart"),
        Binding("t", "toggle_tab", "Conversation"),
        Binding("less_than_sign", "sibling(-1)", "Previous in group", key_display="<"),
        Binding("greater_than_sign", "sibling(1)", "Next in group", key_display=">"),
        Binding("y", "copy_window", "Copy tokens"),
        Binding("Y", "copy_row", "Copy row", show=False),
    ]
    _TOKEN_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"move", "move_to_end", "outlier", "cycle_window", "cycle_series", "toggle_chart"}
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
    ) -> None:
        super().__init__()
        self._start_cursor = cursor
        """Response position to open on (None: the first response token)."""
        self.step = step
        self.detokenizer = detokenizer
        self.sidecar = sidecar
        self.sample = _Sample.load(step, sample_index, detokenizer)
        self.cursor = 0
        """Response position under the cursor."""
        self.window_choice = 0
        self.window = (0, 0)
        self.selected = next((n for n in ("lp_diff", *SERIES) if n in self.sample.tracks), SERIES[0])
        self.outlier_rank = -1
        self._charted: tuple[TokenSeries, tuple[int, int]] | None = None
        self._on_tokens_tab = True

    @property
    def sample_index(self) -> int:
        return self.sample.row.sample_index

    def compose(self) -> ComposeResult:
        yield Static(id="chips")
        with TabbedContent(id="tabs"):
            with TabPane("Tokens", id="tokens"):
                yield Static(id="cursor-line")
                yield Static(id="not-dumped")
                yield TokenSparkline(axis=True, id="axis")
                with VerticalScroll(id="panels", can_focus=False):
                    for name in SERIES:
                        yield TokenSparkline(name, id=f"series-{name}", classes="series")
                yield SeriesChart(id="chart")
            with TabPane("Conversation", id="conversation"):
                yield VerticalScroll(id="messages")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Tabs).can_focus = False
        self.query_one("#chart", SeriesChart).display = False
        self._show_sample()
        if self._start_cursor is not None:
            self._move(self._start_cursor)

    # ---- showing a sample --------------------------------------------------------------------

    def _panels(self) -> list[TokenSparkline]:
        return list(self.query(".series").results(TokenSparkline))

    def _show_sample(self) -> None:
        sample = self.sample
        self._show_chips()
        self.window = (0, 0)
        self.window_choice = min(self.window_choice, len(self._window_sizes()) - 1)
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
        self._show_conversation()
        self.outlier_rank = -1
        self._move(0)

    def _show_chips(self) -> None:
        chips = self.query_one("#chips", Static)
        chips.update(_chip_lines(_chips(self.step, self.sample), self.size.width - 2))
        self.query_one("#cursor-line", Static).styles.height = self._cursor_rows()

    def on_resize(self) -> None:
        """Re-wrap the chips and the cursor line; on short terminals, flatter panels so more fit."""
        self.set_class(self.size.height < 32, "-short")
        self._show_chips()
        self._move(self.cursor)

    def _show_conversation(self) -> None:
        messages = self.query_one("#messages", VerticalScroll)
        messages.remove_children()
        conversation = None if self.sidecar is None else self.sidecar.conversations.get(self.sample_index)
        messages.mount_all(_conversation_widgets(conversation, None if self.sidecar is None else self.sidecar.problem))

    # ---- the cursor ----------------------------------------------------------------------------

    def _window_sizes(self) -> list[int | None]:
        total = self.sample.view.total_length
        return [size for size in WINDOWS if size is None or size < total]

    def _place_window(self, position: int) -> tuple[int, int]:
        total = self.sample.view.total_length
        size = self._window_sizes()[self.window_choice] or total
        start, stop = self.window
        if stop - start == size and start <= position < stop:
            return self.window
        lead = size * 3 // 4 if position >= stop and stop - start == size else size // 4
        start = max(0, min(position - lead, total - size))
        return start, start + size

    def _move(self, response_position: int) -> None:
        """Put the cursor on a response position and redraw what depends on it."""
        sample = self.sample
        length = sample.view.response_length
        self.cursor = max(0, min(response_position, length - 1)) if length else 0
        position = sample.view.prompt_length + self.cursor
        self.window = self._place_window(position)
        axis = self.query_one("#axis", TokenSparkline)
        size = self._window_sizes()[self.window_choice]
        axis.title = f"window {'all' if size is None else size}"
        axis.window, axis.cursor = self.window, position
        for panel in self._panels():
            if panel.display:
                panel.window = self.window
                panel.cursor = position if length else None
                panel.reading = sample.value(panel.series, self.cursor)
        self.query_one("#cursor-line", Static).update(self._cursor_line(), layout=False)
        self._show_chart()

    def _show_chart(self) -> None:
        chart = self.query_one("#chart", SeriesChart)
        track = self.sample.tracks.get(self.selected)
        if not chart.display or track is None:
            return
        start, stop = self.window
        if self._charted != (track, self.window):  # a new ChartSeries redraws the whole chart
            chart.series = ChartSeries(LABELS[self.selected], start, track.values[start:stop])
            self._charted = (track, self.window)
        chart.cursor = self.sample.view.prompt_length + self.cursor

    def _value_rows(self) -> list[list[str]]:
        """The series on the cursor line, split in two rows when one would not fit the width."""
        names = [name for name in SERIES if name in self.sample.tracks]
        needed = sum(len(SHORT_LABELS[name]) + 13 for name in names)
        if needed <= self.size.width - 2 or len(names) < 2:
            return [names]
        half = (len(names) + 1) // 2
        return [names[:half], names[half:]]

    def _cursor_rows(self) -> int:
        texts = 1 if self.sample.texts is not None or self.detokenizer is not None else 0
        unreadable = 1 if any(s is FieldState.UNREADABLE for s in self.sample.view.states.values()) else 0
        return 1 + texts + max(len(self._value_rows()), unreadable)

    def _cursor_line(self) -> Content:
        """Exactly ``_cursor_rows()`` lines (the widget does not wrap them): a key press never relayouts."""
        sample, r = self.sample, self.cursor
        view = sample.view
        if view.response_length == 0:
            return Content("this sample has an empty response: no per-token values")
        position = view.prompt_length + r
        trained = bool(view.trained()[r])
        parts: list[str | tuple[str, str]] = [
            ("token ", "$text-muted"),
            (f"{position}", "bold"),
            (f"  response {r + 1}/{view.response_length}  id ", "$text-muted"),
            (str(view.token_ids[position]), "bold"),
        ]
        if sample.texts is not None:
            parts += [("  text ", "$text-muted"), (repr(sample.texts[position]), "bold")]
        if view.loss_mask is None:
            parts.append(("  no loss mask (trained)", "$text-success"))
        else:
            mask = int(view.loss_mask[r])
            parts.append(
                (f"  mask {mask} (trained)", "$text-success")
                if trained
                else (f"  mask {mask} (loss-masked)", "$text-warning")
            )
        outliers = sample.outliers
        if 0 <= self.outlier_rank < len(outliers) and outliers[self.outlier_rank] == r:
            parts.append((f"  outlier #{self.outlier_rank + 1}/{len(outliers)}", "$text-error"))
        if sample.texts is not None:
            parts.append("\n")
            parts += _context(sample.texts, view.prompt_length, position, view.trained(), self.size.width - 2)
        elif self.detokenizer is not None and self.detokenizer.status.reason:
            parts += ["\n", (inert(self.detokenizer.status.reason), "$text-muted")]
        rows = self._value_rows()
        unreadable = [SHORT_LABELS[n] for n in SERIES if view.states[n] is FieldState.UNREADABLE]
        for index in range(max(len(rows), 1 if unreadable else 0)):
            parts.append("\n")
            for name in rows[index] if index < len(rows) else ():
                value = sample.value(name, r)
                parts += [
                    (f"{SHORT_LABELS[name]} ", "$text-muted"),
                    (f"{reading_text(value)}  ", "bold" if value is not None else ""),
                ]
            if unreadable and index == len(rows) - 1:
                parts.append((f"UNREADABLE: {', '.join(unreadable)}", "$text-error"))
        return Content.assemble(*parts)

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
        self._move(self.cursor + delta)

    def action_move_to_end(self, last: bool) -> None:
        """Jump to the first or last response token."""
        self._move(self.sample.view.response_length - 1 if last else 0)

    def action_outlier(self, step: int) -> None:
        """Jump to the next (or previous) token in order of |lp diff|, largest first."""
        outliers = self.sample.outliers
        if len(outliers) == 0:
            self.notify("no lp diff for this sample (needs train and rollout log-probs): no outliers", timeout=4)
            return
        rank = self.outlier_rank + step
        if not 0 <= rank < len(outliers):
            self.notify("no more outliers" if step > 0 else "already at the largest |lp diff|", timeout=2)
            return
        self.outlier_rank = rank
        self._move(int(outliers[rank]))

    def action_cycle_window(self) -> None:
        """Show 256 / 1k / 4k / all tokens around the cursor."""
        self.window_choice = (self.window_choice + 1) % len(self._window_sizes())
        self.window = (0, 0)
        self._move(self.cursor)

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

    def action_toggle_tab(self) -> None:
        """Switch between the token panels and the conversation."""
        tabs = self.query_one("#tabs", TabbedContent)
        tabs.active = "conversation" if tabs.active == "tokens" else "tokens"

    def action_sibling(self, step: int) -> None:
        """Show the previous/next sample of the same GRPO group, in place."""
        group = self.sample.row.group_index
        if group is None:
            self.notify("this sample has no group", timeout=2)
            return
        members = [row.sample_index for row in self.step.summary.rows if row.group_index == group]
        index = members.index(self.sample_index) + step
        if not 0 <= index < len(members):
            self.notify(f"{'first' if step < 0 else 'last'} sample of group {group}", timeout=2)
            return
        try:
            self.sample = _Sample.load(self.step, members[index], self.detokenizer)
        except MilesTuiError as err:  # e.g. the sibling's token ids are unreadable
            self.notify(inert(str(err)), severity="error", markup=False, timeout=8)
            return
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
            self.query_one("#messages", VerticalScroll).focus()
        self.refresh_bindings()

    @on(TokenSparkline.PositionClicked)
    def _clicked(self, event: TokenSparkline.PositionClicked) -> None:
        """Move the cursor to a clicked token (a click on the prompt goes to the first response token)."""
        self._move(event.position - self.sample.view.prompt_length)


def _chips(step: OpenStep, sample: _Sample) -> list[tuple[str, str]]:
    row, view = sample.row, sample.view
    summary = step.summary
    members = [r.sample_index for r in summary.rows if r.group_index == row.group_index]
    status_style = {"completed": "$text-success", "truncated": "$text-warning"}.get(row.status or "", "$text-error")
    states = set(view.states.values())
    if FieldState.UNREADABLE in states:
        reason = (
            "its train file failed to load" if row.sample_index in step.unreadable else "slices could not be placed"
        )
        alignment = (f"per-token data UNREADABLE ({reason})", "bold $text-error")
    elif states == {FieldState.NOT_DUMPED}:
        alignment = ("per-token data not dumped", "$text-muted")
    elif FieldState.NOT_DUMPED in states:
        missing = sum(state is FieldState.NOT_DUMPED for state in view.states.values())
        alignment = (f"per-token ok ({missing} series not dumped)", "$text-success")
    else:
        alignment = ("per-token ok", "$text-success")
    chips: list[tuple[str, str]] = [
        (f"{'eval ' if summary.evaluation else ''}step {summary.rollout_id} · sample {row.sample_index}", "bold"),
        (
            f"group {MISSING if row.group_index is None else row.group_index}"
            + (f" {members.index(row.sample_index) + 1}/{len(members)}" if row.group_index is not None else ""),
            "",
        ),
        (inert(row.status or MISSING), status_style),
        (f"reward {number(row.reward)}", ""),
        (f"staleness {MISSING if row.staleness is None else row.staleness}", ""),
        (version_span(row) + (" mixed" if row.mixed_version else ""), "$text-warning" if row.mixed_version else ""),
        (f"prompt {view.prompt_length} + response {view.response_length} = {view.total_length} tok", ""),
        alignment,
    ]
    return chips


def _chip_lines(chips: list[tuple[str, str]], width: int) -> Content:
    """Chips separated by bars, wrapped between chips (never inside one) to ``width`` cells."""
    parts: list[str | tuple[str, str]] = []
    used = 0
    for text, style in chips:
        if used and used + 3 + len(text) > width:
            parts.append("\n")
            used = 0
        elif used:
            parts.append((" │ ", "$text-muted"))
            used += 3
        parts.append((text, style))
        used += len(text)
    return Content.assemble(*parts)


def _escape(text: str) -> str:
    return repr(text)[1:-1]


def _context(
    texts: list[str], prompt_length: int, position: int, trained: npt.NDArray[np.bool_], width: int
) -> list[str | tuple[str, str]]:
    """The tokens around the cursor as text, the cursor token centred and reversed, within ``width``."""
    budget = max(width - len(_escape(texts[position])) - 2, 0) // 2
    lo, used = position, 0
    while lo > 0 and used + len(_escape(texts[lo - 1])) <= budget:
        lo -= 1
        used += len(_escape(texts[lo]))
    hi, used = position + 1, 0
    while hi < len(texts) and used + len(_escape(texts[hi])) <= budget:
        used += len(_escape(texts[hi]))
        hi += 1
    parts: list[str | tuple[str, str]] = [("…" if lo > 0 else "", "$text-muted")]
    for index in range(lo, hi):
        if index == position:
            style = "reverse bold"
        elif index < prompt_length:
            style = "$text-muted italic"
        elif not trained[index - prompt_length]:
            style = "$text-warning"
        else:
            style = "underline" if index % 2 else ""
        parts.append((_escape(texts[index]), style))
    parts.append(("…" if hi < len(texts) else "", "$text-muted"))
    return parts


def _conversation_widgets(conversation: Conversation | None, problem: str | None = None) -> list[Static]:
    if conversation is None:
        why = problem or "this run recorded no conversation for this sample"  # problem: why the sidecar was not read
        return [Static(Content(why), classes="no-conversation")]
    header = Content.assemble(
        ("recorded conversation", "bold"),
        f" · status {inert(conversation.status or MISSING)} · reward {inert(repr(conversation.reward))}"
        f" · {len(conversation.messages)} messages",
    )
    widgets = [Static(header, classes="conversation-header")]
    for message in conversation.messages:
        widgets.append(_message_widget(message))
    return widgets


def _message_widget(message: ChatMessage) -> Static:
    parts: list[str | tuple[str, str]] = []
    if message.reasoning_content:
        reasoning = inert(message.reasoning_content, multiline=True)
        parts += [("reasoning: ", "italic $text-muted"), (reasoning + "\n", "italic $text-muted")]
    parts.append(inert(message.content, multiline=True))
    for raw in message.tool_calls:
        call = tool_call(raw)
        arguments = "" if call.arguments is None else call.arguments
        parts.append((inert(f"\n→ {call.name or '?'}({arguments})", multiline=True), "$text-accent"))
    role_class = "".join(c if c.isalnum() else "-" for c in message.role.lower())
    widget = Static(Content.assemble(*parts), classes=f"message -{role_class}")
    widget.border_title = Content(inert(message.role + (f" · {message.name}" if message.name else "")))  # not markup
    return widget
