"""Rows of ``label  heat strip  suffix``, drawn line by line, scrolling when there are more than fit.

Contract: the owner hands over finished rows (:meth:`HeatRows.set_rows`):
labels and suffixes already formatted, values already binned by core. The
widget only lays them out (a label column, the strip filling what is left,
a suffix column) and draws the visible lines through the heat-strip renderer,
caching each drawn line until the rows or the width change. Several of these
stacked with the same ``label_width`` and ``suffix_width`` line their strips up,
so one time axis serves them all. Row keys are stable: replacing the rows keeps
the scroll position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from miles_tui.tui.renderers.heat_strip import band_strip, heat_strip, heat_styles
from miles_tui.tui.views.heat_row import HeatRow

GAP = 1
"""Cells between the label, the strip and the suffix."""
OVERFLOW = "…"
"""Ends a suffix that lost its last words to a narrow pane."""


def suffix_room(label_width: int, suffix_width: int, width: int) -> int:
    """Cells the suffix gets at ``width``: its own width while a strip (of any width) fits beside the label,
    else what the label leaves (the strip gives way first, then the suffix; the label, a row's identity,
    last)."""
    return max(min(suffix_width, width - label_width - 2 * GAP), 0)


def whole_words(text: Text, width: int) -> Text:
    """``text`` in ``width`` cells: whole, or its leading words that fit followed by ``…``; a word (a
    number, an age) is never cut to a prefix of itself."""
    if text.cell_len <= width:
        return text
    plain = text.plain
    ends = [i for i in range(1, len(plain)) if plain[i] == " " and plain[i - 1] != " "]
    for end in reversed(ends):
        head = text[:end]
        if head.cell_len + 1 <= width:
            return Text.assemble(head, (OVERFLOW, "dim"))
    return Text(OVERFLOW if width >= 1 else "", style="dim")


class HeatRows(ScrollView, inherit_bindings=False):
    """Label / heat strip / suffix lines; see the module docstring."""

    DEFAULT_CSS = """
    HeatRows { height: auto; scrollbar-size-vertical: 1; scrollbar-gutter: stable; overflow-x: hidden; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [  # vertical only: the strips fit the width, ←/→ are the screen's
        Binding("up", "scroll_up", "Scroll up", show=False),
        Binding("down", "scroll_down", "Scroll down", show=False),
        Binding("home", "scroll_home", "Scroll to the top", show=False),
        Binding("end", "scroll_end", "Scroll to the bottom", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.rows: Sequence[HeatRow] = ()
        """The rows, top first (a lazy sequence is fine: only the visible ones are asked for)."""
        self.label_width = 12
        """Cells of the label column."""
        self.suffix_width = 20
        """Cells of the suffix column."""
        self.marker: int | None = None
        """A strip cell (0-based) drawn in reverse video on every strip: a cursor on the time axis (None: none)."""
        self._cache: dict[tuple[int, int], Strip] = {}
        self._base: Style | None = None

    def set_rows(self, rows: Sequence[HeatRow], label_width: int, suffix_width: int) -> None:
        """Replace the rows (the scroll position stays)."""
        self.rows = rows
        self.label_width, self.suffix_width = label_width, suffix_width
        self._cache.clear()
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.rows))
        self.refresh()

    def set_marker(self, cell: int | None) -> None:
        """Mark strip cell ``cell`` on every strip (None: no mark)."""
        if cell != self.marker:
            self.marker = cell
            self._cache.clear()
            self.refresh()

    @property
    def strip_width(self) -> int:
        """Cells left for the strip at the current width."""
        return max(self.scrollable_content_region.width - self.label_width - self.suffix_width - 2 * GAP, 0)

    def on_resize(self) -> None:
        self._cache.clear()
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.rows))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = None
        self._cache.clear()

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if self._base is None:
            self._base = self.rich_style  # resolving it walks the CSS: once per style change, not per line
        index = y + round(self.scroll_y)
        if not 0 <= index < len(self.rows):
            return Strip.blank(width, self._base)
        cached = self._cache.get((index, width))
        if cached is None:
            cached = self._cache[(index, width)] = self._draw(self.rows[index], width, self._base)
        return cached

    def _fit(self, text: Text, width: int, base: Style) -> list[Segment]:
        """``text`` cut (with an ellipsis) or padded to exactly ``width`` cells."""
        if width <= 0:
            return []
        cell = text.copy()
        if cell.style:  # Text.render drops the Text's own style: make it the lowest span, padding stays plain
            cell.spans.insert(0, Span(0, len(cell), cell.style))
            cell.style = ""
        cell.truncate(width, overflow="ellipsis", pad=True)
        return [Segment(s.text, base + s.style if s.style else base) for s in cell.render(self.app.console)]

    def _draw(self, row: HeatRow, width: int, base: Style) -> Strip:
        strip_width = max(width - self.label_width - self.suffix_width - 2 * GAP, 0)
        suffix_width = suffix_room(self.label_width, self.suffix_width, width)
        gap = Segment(" " * GAP, base)
        segments = [*self._fit(row.label, self.label_width, base), gap]
        if row.kinds is not None:
            styles = tuple(base + s for s in row.styles)
            segments += list(band_strip(row.kinds, strip_width, row.marks, styles, gap=base))
        elif row.values is not None:
            styles = tuple(base + s for s in row.styles) if row.styles else heat_styles(base=base)
            segments += list(heat_strip(row.values, strip_width, scale=row.scale, styles=styles, gap=base))
        else:
            segments += self._fit(row.text or Text(), strip_width, base)
        suffix = whole_words(row.suffix or Text(), suffix_width)
        segments += [gap, *self._fit(suffix, suffix_width, base)]
        drawn = self.label_width + suffix_width + 2 * GAP + strip_width
        strip = Strip(segments, drawn)
        has_strip = row.values is not None or row.kinds is not None
        if self.marker is not None and 0 <= self.marker < strip_width and has_strip:
            x = self.label_width + GAP + self.marker
            before, cell, after = strip.divide([x, x + 1, drawn])
            strip = Strip.join([before, cell.apply_style(Style(reverse=True)), after])
        if drawn == width:
            return strip
        return strip.crop(0, width).extend_cell_length(width, base)
