"""A table's columns and which of them fit: pure layout, no widget.

Contract: :class:`Column` describes a column (key, label, width, alignment, how far it may grow, whether it
is pinned); :func:`fitted` widens growing columns to their data; :func:`visible_window` says which whole
columns a line of a given width shows at a sideways scroll position: the pinned ones first, then every
scrolled column that fits whole. A column is never drawn in part, so a number is never cut at the edge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Column:
    """One column: key, header label, width in cells and alignment."""

    key: str
    """Identifier the owner sorts by."""
    label: str
    """Header text."""
    width: int
    """Width in terminal cells."""
    justify: str = "right"
    """left, right or center."""
    grow: int = 0
    """Cells the column may widen to, to fit its widest cell (0: fixed at ``width``)."""
    pinned: bool = False
    """An identity column: it stays on screen while the others scroll (only a leading run of them counts)."""


@dataclass(frozen=True)
class Window:
    """Which columns are drawn at a horizontal scroll position: whole columns only."""

    pinned: int
    """The leading pinned columns drawn (all that fit)."""
    first: int
    """The first scrolled column drawn."""
    stop: int
    """One past the last column drawn."""

    def drawn(self) -> tuple[int, ...]:
        """The indices of the columns drawn, left to right."""
        return (*range(self.pinned), *range(self.first, self.stop))


def pinned_count(columns: Sequence[Column]) -> int:
    """How many leading columns are pinned."""
    count = 0
    for column in columns:
        if not column.pinned:
            break
        count += 1
    return count


def visible_window(columns: Sequence[Column], scroll_x: int, width: int) -> Window:
    """The whole columns that fit ``width`` cells when the scrolled columns are scrolled ``scroll_x`` cells.

    Pinned columns come first (as many as fit); the scrolled part starts at the first column that begins at
    or after ``scroll_x`` (a column half scrolled away is not drawn), and takes every following column that
    fits whole. At the largest scroll position the remaining columns all fit, so every column can be seen.
    """
    pinned = pinned_count(columns)
    used = 0
    shown_pinned = 0
    for column in columns[:pinned]:
        if used + column.width > width:
            break
        used += column.width + 1
        shown_pinned += 1
    if shown_pinned < pinned:
        return Window(shown_pinned, len(columns), len(columns))
    first, x = pinned, 0
    while first < len(columns) and x < scroll_x:
        x += columns[first].width + 1
        first += 1
    stop = first
    while stop < len(columns):
        last = stop == len(columns) - 1
        # a column with more after it leaves its separator cell free: the header's ``›`` goes there
        if used + columns[stop].width + (0 if last else 1) > width:
            break
        used += columns[stop].width + 1
        stop += 1
    return Window(pinned, first, stop)


def fitted(columns: Sequence[Column], needed: Mapping[str, int]) -> tuple[Column, ...]:
    """``columns`` widened to the cells each needs (``needed`` by key), within each column's ``grow``."""
    out = []
    for column in columns:
        want = needed.get(column.key, 0)
        limit = max(column.grow, column.width)
        width = min(max(want, column.width), limit)
        out.append(column if width == column.width else replace(column, width=width))
    return tuple(out)


PINNED_TEXT_MIN = 8
"""Cells a pinned text column (an advisory's code) keeps at the least when it gives way to a number."""


def _room_beside(columns: Sequence[Column], pinned: int, room: int) -> int:
    return room - sum(c.width + 1 for c in columns[:pinned]) - 1


def _pinned_give_way(columns: tuple[Column, ...], pinned: int, room: int) -> tuple[Column, ...]:
    """Pinned text columns narrowed (never below their label, nor :data:`PINNED_TEXT_MIN`) until the widest
    scrolled number, and every scrolled label, fits whole beside them: a text may end in …, a number may not."""
    scrolled = columns[pinned:]
    want = max((c.width if c.justify == "right" else len(c.label) for c in scrolled), default=0)
    short = want - _room_beside(columns, pinned, room)
    out = list(columns)
    for i in range(pinned):
        if short <= 0:
            break
        column = out[i]
        if column.justify != "left":
            continue
        floor = max(len(column.label), PINNED_TEXT_MIN)
        give = min(short, column.width - floor)
        if give > 0:
            out[i] = replace(column, width=column.width - give)
            short -= give
    return tuple(out)


def narrowed(columns: tuple[Column, ...], room: int) -> tuple[Column, ...]:
    """``columns`` as a line of ``room`` cells draws them, so every column can be shown whole: pinned text
    columns give way first (their text ends in …) until each scrolled number and label fits beside them;
    then a scrolled column still wider than the room is narrowed to it (its text ends in …, a number reads
    …). ``room`` 0 (not laid out yet): unchanged."""
    pinned = pinned_count(columns)
    if room <= 0:
        return columns
    columns = _pinned_give_way(columns, pinned, room)
    limit = _room_beside(columns, pinned, room)
    if limit < 1:
        return columns
    return tuple(c if i < pinned or c.width <= limit else replace(c, width=limit) for i, c in enumerate(columns))
