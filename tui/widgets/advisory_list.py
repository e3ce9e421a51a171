"""The advisory sidebar: alarms first, level in colour AND in text, Enter jumps to the target.

It lists log entries (core's ``LoggedAdvisory``): the active ones, then, dimmed, those cleared
within the last few steps ("cleared at step N"), so an advisory that flickers off is still there
to read and to jump to (its step is the one it was last seen at).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from miles_tui.core.analysis import Advisory
from miles_tui.core.analysis.advisory_log import LoggedAdvisory
from miles_tui.core.base.inert_text import inert
from miles_tui.tui.formatting import level_badge


class AdvisoryList(OptionList):
    """A list of core advisories; selecting one posts :class:`AdvisoryList.Jump`."""

    DEFAULT_CSS = """
    AdvisoryList { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]
    """The tables' j/k too (the arrows are OptionList's own)."""

    @dataclass
    class Jump(Message):
        """The user chose an advisory that points at a step (and maybe a sample)."""

        advisory: Advisory

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.advisories: tuple[Advisory, ...] = ()
        """The advisories listed, active then cleared."""
        self.entries: tuple[LoggedAdvisory, ...] = ()

    def show(self, entries: tuple[LoggedAdvisory, ...]) -> None:
        """Replace the list, keeping the highlight on the same advisory when it is still there."""
        if _shown(entries) == _shown(self.entries):  # when they were last seen changes every poll: not drawn
            self.entries = entries
            return
        self.entries = entries
        advisories = tuple(e.advisory for e in entries)
        highlighted = self.highlighted
        current = (
            self.advisories[highlighted] if highlighted is not None and highlighted < len(self.advisories) else None
        )
        self.advisories = advisories
        self.clear_options()
        if not advisories:
            return  # the pane's title says "none, nothing needs attention"
        options = []
        for entry in entries:
            advisory = entry.advisory
            text = Text(style="" if entry.active else "dim")
            if not entry.active:
                text.append(f"cleared at step {entry.cleared_at} ", style="dim italic")
            text.append_text(level_badge(advisory.level) if entry.active else Text(level_badge(advisory.level).plain))
            text.append(f" {inert(advisory.code)}", style="bold")
            if advisory.rollout_id is not None:
                where = f" step {advisory.rollout_id}{' eval' if advisory.evaluation else ''}"
                if advisory.sample_index is not None:
                    where += f" · sample {advisory.sample_index}"
                text.append(where, style="dim")
            text.append("\n")
            text.append(inert(advisory.message))
            options.append(Option(text))
        self.add_options(options)
        if current in advisories:
            self.highlighted = advisories.index(current)

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        """Enter on an advisory: jump to what it names."""
        event.stop()
        if event.option_index < len(self.advisories):
            advisory = self.advisories[event.option_index]
            self.post_message(self.Jump(advisory))


def _shown(entries: tuple[LoggedAdvisory, ...]) -> tuple[tuple[Advisory, bool, int | None], ...]:
    """What the list draws of its entries."""
    return tuple((e.advisory, e.active, e.cleared_at) for e in entries)
