"""How a cell on screen is checked against the value ``export`` (or core, where ``export`` has no such value)
gives: the matchers, and a walk over every column of a :class:`VirtualTable` at a set of widths.

A matcher takes the cell's text as drawn and the true value, and fails when the text reads as another value
at the precision it shows. ``…`` (the overflow mark) is honest for any value; a prefix of a number is not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable
from typing import Any

from textual.pilot import Pilot

from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.harness import settle

_NUMBER = re.compile(r"^-?\d+(\.(\d+))?(e(-?\d+))?$")

RowCheck = Callable[[str, str, Hashable, str], None]
"""(column key, cell text, row key, where) -> fails when the cell is not the row's value."""


def close(cell: str, value: Any, where: str) -> None:
    """``cell`` is ``value`` at the precision the cell shows (``–``: no value; ``…``: did not fit)."""
    if cell == "…":
        return  # a visible overflow mark is honest; a prefix is not
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        assert cell in ("–", "UNREAD"), f"{where}: {cell!r} for no value"
        return
    if isinstance(value, bool):
        assert cell == ("yes" if value else "no"), f"{where}: {cell!r} for {value}"
        return
    match = _NUMBER.match(cell.replace("−", "-"))
    assert match is not None, f"{where}: {cell!r} is not a number (the value is {value})"
    decimals = len(match.group(2) or "")
    exponent = int(match.group(4) or 0)
    tolerance = 0.5 * 10.0 ** (exponent - decimals)
    shown = float(cell.replace("−", "-"))
    assert abs(shown - float(value)) <= tolerance * (1 + 1e-9) + 1e-12, f"{where}: {cell!r} but the value is {value}"


def percent(cell: str, value: Any, where: str) -> None:
    """A fraction shown as a percentage."""
    if value is None:
        assert cell == "–", f"{where}: {cell!r} for no value"
        return
    assert cell.endswith("%"), f"{where}: {cell!r}"
    close(cell[:-1], float(value) * 100, where)


def first_int(cell: str, value: Any, where: str) -> None:
    """The cell's first word is ``value`` (an id)."""
    head = cell.split(maxsplit=1)[0] if cell.split() else ""
    assert head == ("–" if value is None else str(value)), f"{where}: {cell!r} for {value}"


def text(cell: str, full: str, where: str) -> None:
    """A text cell: the whole text, or a prefix of it ending in ``…`` (a text may give way; a number may not)."""
    assert cell == full.strip() or (cell.endswith("…") and full.startswith(cell[:-1])), (
        f"{where}: {cell!r} for {full!r}"
    )


def delta(cell: str, a: Any, b: Any, where: str, points: bool = False) -> None:
    """``B − A`` as the compare view writes it: ``↑x``/``↓x`` (``pt`` for fractions), ``=`` or ``–``."""
    if a is None or b is None:
        assert cell == "–", f"{where}: {cell!r} for {a} → {b}"
        return
    change = float(b) - float(a)
    if change == 0:
        assert cell == "=", f"{where}: {cell!r} for no change"
        return
    assert cell[:1] == ("↑" if change > 0 else "↓"), f"{where}: {cell!r} for {a} → {b}"
    size = cell[1:]
    if points:
        assert size.endswith("pt"), f"{where}: {cell!r}"
        close(size[:-2], abs(change) * 100, where)
    else:
        close(size, abs(change), where)


def check_drawn(table: VirtualTable, check: RowCheck, where: str) -> set[str]:
    """Check every cell drawn now, and the header; return the keys of the columns drawn."""
    drawn = table.drawn_columns()
    header = table.render_line(0).text
    width = table.scrollable_content_region.width
    end = max((x + column.width for column, x in drawn), default=0)
    for column, x in drawn:
        label = header[x : x + column.width].strip()
        assert label.lstrip("▲▼") == column.label.lstrip("▲▼"), f"{where}: header {label!r} for {column.label!r}"
    assert header[end:width].strip() in ("", "›"), f"{where}: past the last whole column: {header[end:]!r}"
    pinned = [column for column in table.columns if column.pinned]
    if pinned:
        assert drawn and drawn[0][0].pinned, f"{where}: the identity column scrolled away"
    top = table.scroll_offset.y
    for y in range(1, min(len(table.rows) - top, table.scrollable_content_region.height - 1) + 1):
        line = table.render_line(y).text
        assert not line[end:width].strip(), f"{where}: a cut cell past the last whole column: {line[end:]!r}"
        key = table.rows[top + y - 1].key
        for column, x in drawn:
            cell = line[x : x + column.width].strip()
            check(column.key, cell, key, f"{where} row {key} column {column.label!r}")
    return {column.key for column, _x in drawn}


def edge_widths(table: VirtualTable, low: int = 40, high: int = 200) -> set[int]:
    """The terminal widths at which the table's last column just fits, and one less (within low..high)."""
    chrome = table.app.size.width - table.scrollable_content_region.width
    full = sum(column.width + 1 for column in table.laid_out) - 1 + chrome
    return {w for w in (full - 1, full) if low <= w <= high}


async def walk_columns(
    pilot: Pilot[Any], table: VirtualTable, check: RowCheck, where: str, widths: tuple[int, ...], height: int = 24
) -> None:
    """At each width (and the table's own edge widths), move the cursor onto every column, right then back
    left (at a width that draws every column: to the last and back), checking every drawn cell at each stop;
    every column must have been drawn at every width."""
    done: set[int] = set()
    queue = list(widths)
    while queue:
        width = queue.pop(0)
        if width in done:
            continue
        done.add(width)
        await pilot.resize_terminal(width, height)
        await settle(pilot, rounds=2)
        queue += sorted(edge_widths(table) - done)
        seen: set[str] = set()
        count = len(table.columns)
        stops = [*range(count), *range(count - 2, -1, -1)]
        if len(table.drawn_columns()) == count:
            stops = [count - 1, 0]  # every column is drawn whole: the cursor moves nothing sideways
        for index in stops:
            table.cursor_column = index
            await pilot.pause()
            seen |= check_drawn(table, check, f"{where} at {width}x{height}, cursor on column {index}")
            assert table.columns[index].key in {c.key for c, _x in table.drawn_columns()}, where
        assert seen == {column.key for column in table.columns}, f"{where} at {width}: columns never shown"
