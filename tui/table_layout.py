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


def narrowed(columns: tuple[Column, ...], room: int) -> tuple[Column, ...]:
    """``columns`` as a line of ``room`` cells draws them: a scrolled column wider than the room beside the
    pinned ones is narrowed to it (its text then ends in …, a number reads …), so every column can be shown
    whole. ``room`` 0 (not laid out yet): unchanged."""
    pinned = pinned_count(columns)
    limit = room - sum(c.width + 1 for c in columns[:pinned]) - 1
    if room <= 0 or limit < 1:
        return columns
    return tuple(c if i < pinned or c.width <= limit else replace(c, width=limit) for i, c in enumerate(columns))
