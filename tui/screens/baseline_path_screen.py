"""A small modal asking for a baseline run's folder (the palette's "Add baseline run…").

Contract: :class:`BaselinePathScreen` takes a path, opens it as a baseline through
the app (:meth:`~miles_tui.tui.runtime.baseline_watch.BaselineApp.follow_baseline`, in a
thread) and dismisses with it; a folder that cannot be one is said in the
modal as one line naming it, and the modal stays for another try. Esc cancels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from miles_tui.core.base.errors import MilesTuiError

if TYPE_CHECKING:
    from miles_tui.tui.model.monitor_app import MonitorApp


class BaselinePathScreen(ModalScreen[str | None]):
    """Add a baseline run: a path input, errors in place."""

    DEFAULT_CSS = """
    BaselinePathScreen { align: center middle; }
    BaselinePathScreen #dialog {
        width: 90%; max-width: 100; height: auto; border: round $accent; background: $surface; padding: 0 1;
    }
    BaselinePathScreen #path { margin: 1 0 0 0; }
    BaselinePathScreen #message { height: auto; min-height: 1; }
    BaselinePathScreen #hint { height: 1; color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Content.from_markup("[b]Add a baseline run[/b]"), id="title")
            yield Static(
                Content("another --dump-details folder: its series are drawn beside this run's, Δ at the same step"),
                id="what",
            )
            yield Input(placeholder="/path/to/other/run", id="path")
            yield Static("", id="message")
            yield Static(Content("enter: add · esc: cancel"), id="hint")

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    def _say(self, text: str, style: str) -> None:
        self.query_one("#message", Static).update(Content.styled(text, style))

    @on(Input.Submitted, "#path")
    def _submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        if not path:
            self._say("✗ type the folder of another run", "bold $text-error")
            return
        self._add(path)

    @work(exclusive=True, group="add-baseline", exit_on_error=False)
    async def _add(self, path: str) -> None:
        self._say(f"opening {path}…", "$text-muted")
        try:
            await cast("MonitorApp", self.app).follow_baseline(path)
        except MilesTuiError as err:
            self._say(f"✗ {err}", "bold $text-error")
            return
        self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)
