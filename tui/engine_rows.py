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
from miles_tui.core.inert_text import inert
from miles_tui.core.telemetry import CACHE_HIT_RATE, GEN_THROUGHPUT, QUEUED, RUNNING, TOKEN_USAGE
from miles_tui.tui.formatting import MISSING, age
from miles_tui.tui.renderers.heat_strip import short_span

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
        return f"{value:.1%}"
    if metric == ABORT_RATE:
        return f"{value:.2f}"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def restarts_text(block: EngineBlock, until: float) -> str:
    """``none``, or ``↺2 -5m`` (how many restarts, and how long before the window's end the newest was)."""
    if not block.restarts:
        return "none"
    return f"{RESTART_MARK}{len(block.restarts)} -{short_span(until - block.restarts[-1])}"


def aborted_text(block: EngineBlock) -> str:
    """``4/1100 0.4%``: aborted of finished requests in the window."""
    if block.requests <= 0 and block.aborted <= 0:
        return MISSING
    share = f" {block.aborted / block.requests:.1%}" if block.requests > 0 else ""
    return f"{block.aborted:.0f}/{block.requests:.0f}{share}"


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


def _line(cells: list[str], width: int, name_width: int) -> str:
    parts = [cells[0][:name_width].ljust(name_width)]
    parts += [cell.rjust(size) for cell, (_, size) in zip(cells[1:], _COLUMNS[1:], strict=True)]
    return " ".join(parts)[: max(width - 2, 0)]  # after the two-cell mark


def table_lines(view: EngineView, selected: int, width: int) -> list[Text]:
    """The heading and one line per engine (latest values in the window), the selected one marked ``▶``;
    ``width`` cells wide at most (the engine name gives way first)."""
    fixed = sum(size + 1 for _, size in _COLUMNS[1:]) + 2
    names = [engine_name(block.addr) for block in view.engines]
    name_width = max(6, min(max((len(n) for n in names), default=6), width - fixed))
    heading = Text("  " + _line([name for name, _ in _COLUMNS], width, name_width), style="bold")
    lines = [heading]
    for index, block in enumerate(view.engines):
        mark = "▶ " if index == selected else "  "
        line = Text(mark + _line(_cells(block, view.bins.until), width, name_width))
        if index == selected:
            line.stylize("reverse")
        if block.restarts:
            line.highlight_words([restarts_text(block, view.bins.until)], style="bold yellow")
        lines.append(line)
    return lines


def title(view: EngineView, selected: int) -> Text:
    """Window, engine count, scrape interval, which engine the charts show."""
    text = Text()
    text.append("Engines", style="bold")
    text.append(f" · {'whole run' if view.span is None else f'last {short_span(view.span)}'}")
    if view.anchored_to_data:
        text.append(f" (ends at the last scrape, {age(view.now - view.bins.until)} ago)", style="yellow")
    count = len(view.engines)
    text.append(f" · {count} engine{'s' if count != 1 else ''}")
    if view.interval:
        text.append(f" · every {short_span(view.interval)}")
    if view.engines:
        block = view.engines[selected]
        ranks = f", {len(block.dp_ranks)} DP ranks" if block.dp_ranks else ""
        text.append(f" · charts: {engine_name(block.addr)}{ranks}", style="bold")
        text.append(" (n/N: engine, ←/→: window)" if count > 1 else " (←/→: window)", style="dim")
    if view.skipped:
        text.append(f" · {view.skipped} non-numeric samples skipped", style="yellow")
    return text
