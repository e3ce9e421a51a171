"""The `?` help screen, built from the bindings of the screen it was opened over."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from miles_tui.tui.row_filter import ALIASES, STATUSES

FILTER_HELP = (
    "Filter (/): terms separated by spaces, all must hold. COLUMN OP VALUE with OP in = != > >= < <= ~ "
    "(e.g. reward>0.5 stale>=2 status=truncated; version~v4 matches the version as shown, version>8 compares "
    f"numbers); words: {', '.join(STATUSES)}, unreadable, mixed, removed, "
    f"zero-std; prefix not- to negate. Column names: ROW columns or {', '.join(sorted(ALIASES))}."
)


_PLACE = {
    "MilesApp": "everywhere",
    "OverviewScreen": "overview",
    "StepScreen": "step",
    "SampleScreen": "sample",
    "VirtualTable": "tables",
    "AdvisoryList": "advisories",
}


def _describe(screen: Screen[object]) -> Table:
    table = Table(box=None, show_header=True, header_style="bold", expand=True)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("action")
    table.add_column("where", style="dim")
    seen: set[tuple[str, str]] = set()
    sources: list[tuple[str, list[Binding]]] = []
    for node in [screen, *screen.walk_children(with_self=False), screen.app]:
        if not type(node).__module__.startswith("miles_tui.tui."):
            continue  # Textual's own widgets' keys (page up in a list ...) are what anyone expects
        bindings = [b for b in getattr(node, "BINDINGS", []) if isinstance(b, Binding)]
        if bindings:
            sources.append((_PLACE.get(type(node).__name__, type(node).__name__), bindings))
    for where, bindings in sources:
        for binding in bindings:
            if not binding.description:
                continue
            keys = binding.key_display or ", ".join(k.strip() for k in binding.key.split(","))
            if (keys, binding.description) in seen:
                continue
            seen.add((keys, binding.description))
            table.add_row(keys, binding.description, where)
    table.add_row("esc, backspace", "Back", "every screen")
    table.add_row("ctrl+p", "Command palette", "App")
    return table


class HelpScreen(ModalScreen[None]):
    """Keys of the current screen, then the global ones."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90%; max-width: 100; height: 90%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace,q,question_mark", "dismiss", "Close help", show=False),
    ]

    def __init__(self, over: Screen[object]) -> None:
        super().__init__()
        self._over = over

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("miles-tui keys", style="bold"))
            yield Static(_describe(self._over))
            yield Static(Text("\n" + FILTER_HELP, style="dim"))

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)
