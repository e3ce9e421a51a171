"""The `?` help screen, built from the bindings of the screen it was opened over."""

from __future__ import annotations

import re
import textwrap
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from miles_tui.core.dump import ROW_COLUMNS
from miles_tui.tui.views.glossary import GLOSSARY
from miles_tui.tui.views.row_filter import ALIASES, STATUSES

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
    "AnatomyScreen": "batch anatomy",
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


GAP = 2
"""Spaces between the help's columns."""

MIN_ACTION = 12
"""The action column never gets narrower than this (a narrow terminal wraps the whole line instead)."""


class KeyList:
    """The help's rows in three aligned columns, key · action · where; an action too long for its column wraps
    under itself. (A rich Table was measured and rendered two or three times per `?`: 25 ms of a 45 ms key.)"""

    HEADER = ("key", "action", "where")

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        self.rows = rows
        every = [self.HEADER, *rows]
        self.widths = tuple(max(cell_len(row[column]) for row in every) for column in range(3))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        keys, actions, places = self.widths
        width = min(keys + actions + places + 2 * GAP, options.max_width)
        return Measurement(width, width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        keys, actions, places = self.widths
        room = max(MIN_ACTION, min(actions, options.max_width - keys - places - 2 * GAP))
        gap = " " * GAP
        for index, (key, action, place) in enumerate([self.HEADER, *self.rows]):
            lines = textwrap.wrap(action, room) or [""]
            for number, part in enumerate(lines):
                line = Text(no_wrap=False)
                line.append(_pad(key if number == 0 else "", keys), "bold" if index == 0 else "bold cyan")
                line.append(gap + _pad(part, room) + gap, "bold" if index == 0 else "")
                if number == 0:
                    line.append(place, "bold" if index == 0 else "dim")
                yield line


class GlossaryList:
    """The glossary in two columns, term · meaning; a meaning too long for the width wraps under itself (a
    plain text wrapped under the terms, where a reader looks for the next term)."""

    def __init__(self, entries: tuple[tuple[str, str], ...]) -> None:
        self.entries = entries
        self.width = max(cell_len(term) for term, _meaning in entries)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max(self.width + GAP + cell_len(meaning) for _term, meaning in self.entries)
        return Measurement(min(widest, options.max_width), min(widest, options.max_width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        room = max(MIN_ACTION, options.max_width - self.width - GAP)
        for term, meaning in self.entries:
            for number, part in enumerate(textwrap.wrap(meaning, room) or [""]):
                yield Text.assemble((_pad(term if number == 0 else "", self.width), "bold cyan"), " " * GAP, part)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - cell_len(text))


def _describe(screen: Screen[object]) -> KeyList:
    """One row per key: the screen's, its widgets', then the app's (a key already described is skipped)."""
    rows: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for node in [screen, *screen.walk_children(with_self=False), screen.app]:
        for binding in _own_bindings(node):
            keys = [k.strip() for k in binding.key.split(",")]
            if not binding.description or seen.issuperset(keys):
                continue
            seen.update(keys)
            shown = binding.key_display or ", ".join("esc" if key == "escape" else key for key in keys)
            rows.append((shown, binding.description, _place(node)))
    rows.append(("ctrl+p", "Command palette", "everywhere"))
    return KeyList(rows)


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
            more = getattr(self._over, "HELP_TEXT", None)  # a screen's own grammar or tools, where it has some
            if isinstance(more, str):
                yield Static(Text("\n" + more, style="dim"))
            yield Static(Text("\nwords and marks on screen", style="bold"))
            yield Static(GlossaryList(GLOSSARY))

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)
