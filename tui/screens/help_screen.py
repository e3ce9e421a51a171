"""The `?` help screen, built from the bindings of the screen it was opened over."""

from __future__ import annotations

import re
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from miles_tui.core.dump import ROW_COLUMNS
from miles_tui.tui.row_filter import ALIASES, STATUSES

FILTER_HELP = (
    "Filter (/): terms separated by spaces, all must hold. COLUMN OP VALUE with OP in = != > >= < <= ~ "
    "(e.g. reward>0.5 stale>=2 status=truncated; version~v4 matches the version as shown, version>8 compares "
    f"numbers); words: {', '.join(STATUSES)}, unreadable, mixed, removed, "
    f"zero-std; prefix not- to negate. Columns: {', '.join(ROW_COLUMNS)} (as exported); "
    f"short names: {', '.join(sorted(ALIASES))}."
)


_PLACE = {
    "MilesApp": "everywhere",
    "OverviewScreen": "overview",
    "StepScreen": "step",
    "SampleScreen": "sample",
    "MetricsScreen": "metrics view",
    "ComputeScreen": "GPUs view",
    "EnginesScreen": "engines view",
    "OutlierScreen": "outliers view",
    "CompareScreen": "compare view",
    "ScatterScreen": "scatter view",
    "VirtualTable": "tables",
    "AdvisoryList": "advisories",
}
"""Where a binding works, as the user calls it (never a class name)."""

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _place(node: object) -> str:
    """The human name of where ``node``'s keys work (a class name unknown here becomes words)."""
    name = type(node).__name__
    if name in _PLACE:
        return _PLACE[name]
    if name.endswith("Screen"):
        return _CAMEL.sub(" ", name.removesuffix("Screen")).lower() + " view"
    return _CAMEL.sub(" ", name).lower()


def _own_bindings(node: object) -> list[Binding]:
    """The bindings miles-tui declares on ``node``'s class and its miles-tui bases (Textual's own keys
    (page up in a list ...) are what anyone expects, and would list the same key twice)."""
    found: list[Binding] = []
    for cls in reversed(type(node).__mro__):
        if cls.__module__.startswith("miles_tui.tui.") and "BINDINGS" in vars(cls):
            found += [b for b in vars(cls)["BINDINGS"] if isinstance(b, Binding)]
    return found


def _describe(screen: Screen[object]) -> Table:
    """One row per key: the screen's, its widgets', then the app's (a key already described is skipped)."""
    table = Table(box=None, show_header=True, header_style="bold", expand=True)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("action")
    table.add_column("where", style="dim")
    seen: set[str] = set()
    for node in [screen, *screen.walk_children(with_self=False), screen.app]:
        for binding in _own_bindings(node):
            keys = [k.strip() for k in binding.key.split(",")]
            if not binding.description or seen.issuperset(keys):
                continue
            seen.update(keys)
            shown = binding.key_display or ", ".join("esc" if key == "escape" else key for key in keys)
            table.add_row(shown, binding.description, _place(node))
    table.add_row("ctrl+p", "Command palette", "everywhere")
    return table


class HelpScreen(ModalScreen[None]):
    """Keys of the current screen, then the global ones (and the filter grammar where the screen filters rows)."""

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
            if hasattr(self._over, "row_filter"):  # the rollout table's filter grammar, where there is one
                yield Static(Text("\n" + FILTER_HELP, style="dim"))

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)
