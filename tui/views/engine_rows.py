"""Core's engines view as text: the per-engine table, the title and each chart's name and value. Pure formatting.

Every state that a colour shows is also written out: the selected engine has
a ``▶``, restarts read ``↺N`` with the age of the newest, a missing value is an
en dash (never 0), so the view reads under NO_COLOR.
"""

from __future__ import annotations

import math
from typing import Final

from rich.text import Text

from miles_tui.core.analysis import ABORT_RATE, EngineBlock, EngineView
from miles_tui.core.base.inert_text import inert
from miles_tui.core.telemetry import CACHE_HIT_RATE, GEN_THROUGHPUT, QUEUED, RUNNING, TOKEN_USAGE
from miles_tui.tui.formatting import MISSING, OVERFLOW, cadence, duration, fixed, magnitude, percent_fine

TITLES: Final = {
    RUNNING: "running reqs",
    QUEUED: "queued reqs",
    TOKEN_USAGE: "KV token usage",
    CACHE_HIT_RATE: "prefix cache hit",
    GEN_THROUGHPUT: "gen tok/s",
    ABORT_RATE: "aborted reqs/s",
}
"""Chart titles by panel."""

FRACTIONS: Final = frozenset({TOKEN_USAGE, CACHE_HIT_RATE})
"""Panels whose values are fractions: drawn on a 0..1 axis, written as percentages."""

RESTART_MARK: Final = "↺"


def engine_name(addr: str | None) -> str:
    """An engine address without its scheme (``http://rollout-alpha`` -> ``rollout-alpha``), made inert."""
    if addr is None:
        return "(no address)"
    return inert(addr.split("://", 1)[-1])


def value_text(metric: str, value: float | None) -> str:
    """A panel's value: a percentage for fractions, k/M for throughput, a rate with two decimals."""
    if value is None or not math.isfinite(value):
        return MISSING
    if metric in FRACTIONS:
        return percent_fine(value)
    if metric == ABORT_RATE:
        return fixed(value, 2)
    return magnitude(value)


def restarts_text(block: EngineBlock, until: float) -> str:
    """``none``, or ``↺2 -5m`` (how many restarts, and how long before the window's end the newest was)."""
    if not block.restarts:
        return "none"
    return f"{RESTART_MARK}{len(block.restarts)} -{duration(until - block.restarts[-1], minutes=True)}"


def aborted_text(block: EngineBlock) -> str:
    """``4/1100 0.4%``: aborted of finished requests in the window."""
    if block.requests <= 0 and block.aborted <= 0:
        return MISSING
    share = f" {percent_fine(block.aborted / block.requests)}" if block.requests > 0 else ""
    return f"{fixed(block.aborted, 0)}/{fixed(block.requests, 0)}{share}"


_COLUMNS: Final = (
    ("engine", 0),
    ("dp", 3),
    ("run", 5),
    ("queue", 5),
    ("KV", 6),
    ("hit", 6),
    ("tok/s", 7),
    ("aborted", 13),
    ("restarts", 9),
)
"""Heading and width (0: the engine name takes what is left)."""


def _cells(block: EngineBlock, until: float) -> list[str]:
    panels = block.panels
    return [
        engine_name(block.addr),
        str(len(block.dp_ranks)) if block.dp_ranks else MISSING,
        value_text(RUNNING, panels[RUNNING].latest),
        value_text(QUEUED, panels[QUEUED].latest),
        value_text(TOKEN_USAGE, panels[TOKEN_USAGE].latest),
        value_text(CACHE_HIT_RATE, panels[CACHE_HIT_RATE].latest),
        value_text(GEN_THROUGHPUT, panels[GEN_THROUGHPUT].latest),
        aborted_text(block),
        restarts_text(block, until),
    ]


NAME_MIN = 6
"""Cells the engine name keeps at the least (a longer name gives way first, ending in …)."""
MORE = "›"
"""Ends the heading when columns did not fit: more columns than the width shows (their values are in the
charts of the selected engine)."""


def _name_cell(name: str, width: int) -> str:
    return name.ljust(width) if len(name) <= width else name[: width - 1] + OVERFLOW


def _widths(rows: list[list[str]]) -> list[int]:
    """Each figure column's width: its declared size, widened to its widest cell (never cut)."""
    return [max(size, *(len(row[i]) for row in rows)) for i, (_, size) in enumerate(_COLUMNS) if i > 0]


def _layout(rows: list[list[str]], width: int) -> tuple[int, list[int]]:
    """The name's width and the figure columns drawn whole in ``width`` cells (after the two-cell mark);
    the columns that do not fit are left out from the right, never cut."""
    room = width - 2
    widths = _widths(rows)
    longest = max((len(row[0]) for row in rows), default=NAME_MIN)
    shown: list[int] = []
    used = NAME_MIN
    for size in widths:
        last = len(shown) == len(widths) - 1
        if used + 1 + size + (0 if last else 2) > room:  # a cut-off table keeps room for " ›"
            break
        shown.append(size)
        used += 1 + size
    more = 2 if len(shown) < len(widths) else 0
    name_width = max(NAME_MIN, min(longest, room - more - (used - NAME_MIN)))
    return name_width, shown


def _line(cells: list[str], name_width: int, shown: list[int]) -> str:
    parts = [_name_cell(cells[0], name_width)]
    parts += [cell.rjust(size) for cell, size in zip(cells[1:], shown, strict=False)]
    return " ".join(parts)


def table_lines(view: EngineView, selected: int, width: int) -> list[Text]:
    """The heading and one line per engine (latest values in the window), the selected one marked ``▶``;
    ``width`` cells wide at most: the engine name gives way first (ending in …), then whole columns from the
    right (the heading then ends in ›). No value is ever cut."""
    rows = [_cells(block, view.bins.until) for block in view.engines]
    heading_cells = [name for name, _ in _COLUMNS]
    name_width, shown = _layout([heading_cells, *rows], width)
    more = f" {MORE}" if len(shown) < len(_COLUMNS) - 1 else ""
    heading = Text("  " + _line(heading_cells, name_width, shown) + more, style="bold")
    lines = [heading]
    for index, (block, cells) in enumerate(zip(view.engines, rows, strict=True)):
        mark = "▶ " if index == selected else "  "
        line = Text(mark + _line(cells, name_width, shown))
        if index == selected:
            line.stylize("reverse")
        if block.restarts and len(shown) == len(_COLUMNS) - 1:
            line.highlight_words([restarts_text(block, view.bins.until)], style="bold yellow")
        lines.append(line)
    return lines


def title(view: EngineView, selected: int) -> Text:
    """Window, engine count, scrape interval, which engine the charts show."""
    text = Text()
    text.append("Engines", style="bold")
    text.append(f" · {'whole run' if view.span is None else f'last {duration(view.span, minutes=True)}'}")
    if view.anchored_to_data:
        ago = duration(view.now - view.bins.until, padded=True)
        text.append(f" (ends at the last scrape, {ago} ago)", style="yellow")
    count = len(view.engines)
    text.append(f" · {count} engine{'s' if count != 1 else ''}")
    if view.interval:
        text.append(f" · every {cadence(view.interval)}")
    if view.engines:
        block = view.engines[selected]
        ranks = f", {len(block.dp_ranks)} DP ranks" if block.dp_ranks else ""
        text.append(f" · charts: {engine_name(block.addr)}{ranks}", style="bold")
        text.append(" (n/N: engine, ←/→: window)" if count > 1 else " (←/→: window)", style="dim")
    if view.skipped:
        text.append(f" · {view.skipped} non-numeric samples skipped", style="yellow")
    return text
