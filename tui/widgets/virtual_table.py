"""A keyboard-driven table that renders only the rows on screen.

Textual's DataTable builds every row up front (seconds for 8,192 samples);
this one keeps rows as plain tuples of Rich Text and draws a line only when
it is visible, so a step of any size opens and scrolls at the same cost.
Rows have stable keys: replacing the rows keeps the cursor on the same key
and the scroll position where it was. The owner decides what the rows are
(sorting and filtering happen before :meth:`VirtualTable.set_rows`).
Column widths come from the data where a column allows it (``Column.grow``):
rows given whole are measured here, lazy rows are measured by their owner
(:func:`fitted`), so an id or a state never reads ``100000…`` while space is
free. The placeholder (shown while there are no rows) wraps to the width.

No cell is cut at the pane's edge: the table scrolls sideways a whole column at
a time (``table_layout``), pinned columns (a row's identity) stay put, the
header marks hidden columns (``‹`` ``›``), a column is never narrower than its
label (a sort arrow never costs the name), and a number too wide for its column
(owners format to fit: ``number_within``) reads ``…``, never a prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from miles_tui.tui.formatting import OVERFLOW
from miles_tui.tui.views.lazy_rows import LazyRows, TableRow
from miles_tui.tui.views.table_layout import Column, Window, fitted, narrowed, pinned_count, visible_window

FIT_SAMPLE = 200
"""Lazy rows measured for growing columns when the rows are set (the newest, on screen first)."""


class VirtualTable(ScrollView, can_focus=True):
    """Header + rows, cursor row and column, drawn line by line."""

    DEFAULT_CSS = """
    VirtualTable {
        height: 1fr;
        scrollbar-size-vertical: 1;
        scrollbar-size-horizontal: 1;
    }
    VirtualTable > .virtual-table--header { text-style: bold; background: $panel; }
    VirtualTable > .virtual-table--cursor { background: $accent 40%; text-style: bold; }
    VirtualTable > .virtual-table--column { background: $accent 20%; }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "virtual-table--header",
        "virtual-table--cursor",
        "virtual-table--column",
    }

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        # not g: screens bind g (the step screen's groups), and a focused table's binding would win
        Binding("home", "jump_first", "First row", show=False),
        Binding("end,G", "jump_last", "Last row", show=False),
        Binding("left,h", "column(-1)", "Column left", show=False),
        Binding("right,l", "column(1)", "Column right", show=False),
        Binding("enter", "select", "Open", show=True),
    ]

    cursor_row: reactive[int] = reactive(0, always_update=True, init=False)
    cursor_column: reactive[int] = reactive(0, init=False)

    @dataclass
    class Highlighted(Message):
        """The cursor moved onto a row."""

        table: VirtualTable
        key: Hashable | None

        @property
        def control(self) -> VirtualTable:
            return self.table

    @dataclass
    class Selected(Message):
        """Enter was pressed on a row."""

        table: VirtualTable
        key: Hashable

        @property
        def control(self) -> VirtualTable:
            return self.table

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.columns: tuple[Column, ...] = ()
        """The columns as drawn (widened to their data where they may grow)."""
        self._declared: tuple[Column, ...] = ()
        self._whole: tuple[TableRow, ...] | None = None
        """The rows when they were given whole (measured for growing columns), else None."""
        self.rows: Sequence[TableRow] = ()
        self._keys: Sequence[Hashable] = ()
        self._index: dict[Hashable, int] = {}
        self._strip_cache: dict[tuple[Hashable, int, bool, int], Strip] = {}
        self._placeholder_cache: tuple[tuple[str, int] | None, list[Strip]] = (None, [])
        self._laid_out: tuple[object, tuple[Column, ...]] = (None, ())
        self.placeholder = ""
        """What the table says while it has no rows (wrapped to the width)."""

    # -- data -----------------------------------------------------------------

    def set_columns(self, columns: Sequence[Column]) -> None:
        """Replace the columns (clears the line cache); growing columns fit the next rows given whole.

        A column narrower than its label is widened to it (a sorted column's arrow never cuts its name)."""
        self._declared = tuple(replace(c, width=max(c.width, Text(c.label).cell_len)) for c in columns)
        self._whole = None  # rows of other columns say nothing about these
        self.columns = self._declared
        self.cursor_column = min(self.cursor_column, max(len(self.columns) - 1, 0))
        self._strip_cache.clear()
        self._resize()
        self._keep_cursor_column()

    def _keep_cursor_column(self) -> None:
        """After widths change (a sort arrow, new rows, a resize), scroll so the cursor's column is drawn."""
        if self.is_mounted:
            self.call_after_refresh(lambda: self._scroll_column_into_view(self.cursor_column))

    def on_resize(self) -> None:
        self._strip_cache.clear()  # the columns as laid out depend on the width
        self._resize()
        self._keep_cursor_column()

    def _fit(self, rows: Sequence[TableRow]) -> tuple[Column, ...]:
        needed: dict[str, int] = {}
        for i, column in enumerate(self._declared):
            if column.grow > column.width:
                needed[column.key] = max((row.cells[i].cell_len for row in rows if i < len(row.cells)), default=0)
        return fitted(self._declared, needed)

    def set_rows(self, rows: Sequence[TableRow], keep_key: bool = True) -> None:
        """Replace the rows; the cursor stays on the same key when it still exists."""
        rows = tuple(rows)
        self._whole = rows
        self.columns = self._fit(rows)
        by_key = {row.key: row for row in rows}
        self._replace([row.key for row in rows], LazyRows([row.key for row in rows], by_key.__getitem__), keep_key)

    def set_lazy_rows(
        self, keys: Sequence[Hashable], render: Callable[[Hashable], TableRow], keep_key: bool = True
    ) -> None:
        """Replace the rows by their keys; ``render(key)`` formats a row only when it is drawn.

        Growing columns are measured on the first :data:`FIT_SAMPLE` rows only (formatting every
        row is what lazy rows avoid), and widen as rows are refreshed (:meth:`refresh_keys`). The rows
        measured are not kept: only rows drawn are (a screenful, not a sample of a long run).
        """
        self._whole = None
        lazy = LazyRows(keys, render)
        self._widen(render(keys[i]) for i in range(min(len(keys), FIT_SAMPLE)))
        self._replace(keys, lazy, keep_key)

    def _widen(self, rows: Iterable[TableRow]) -> None:
        """Widen growing columns to fit ``rows`` (never narrower than now: a refresh must not jitter)."""
        if not any(column.grow > column.width for column in self._declared):
            return
        fitted_now = self._fit(list(rows))
        if len(fitted_now) != len(self.columns):
            self.columns = fitted_now
        else:
            self.columns = tuple(
                new if new.width > old.width else old for new, old in zip(fitted_now, self.columns, strict=True)
            )
        self._strip_cache.clear()

    def _replace(self, keys: Sequence[Hashable], rows: Sequence[TableRow], keep_key: bool) -> None:
        current = self.cursor_key if keep_key else None
        self._keys = keys
        self.rows = rows
        self._index = {key: i for i, key in enumerate(keys)}
        self._strip_cache.clear()
        self._resize()
        self._keep_cursor_column()
        if current is not None and current in self._index:
            self.set_reactive(VirtualTable.cursor_row, self._index[current])
        else:
            self.set_reactive(VirtualTable.cursor_row, min(self.cursor_row, max(len(self.rows) - 1, 0)))
        self.refresh()

    def refresh_keys(self, keys: Iterable[Hashable]) -> None:
        """Rows whose content changed (same keys, same order): format and draw only those again.

        Work is per changed row, not per row of the table; a row off screen is
        only forgotten (formatted again when it scrolls into view).
        """
        forget = getattr(self.rows, "forget", None)
        changed = {key for key in keys if key in self._index}
        if not changed:
            return
        if callable(forget):
            forget(changed)
        before = self.columns
        self._widen(self.rows[self._index[key]] for key in changed)
        if self.columns != before:
            self.refresh()
            return
        for cache_key in [k for k in self._strip_cache if k[0] in changed]:
            del self._strip_cache[cache_key]
        top, height = self.scroll_offset.y, self.size.height
        for key in changed:
            y = self._index[key] - top + 1
            if 0 < y < height:
                self.refresh(Region(0, y, self.size.width, 1))

    def visible_keys(self) -> tuple[Hashable, ...]:
        """The keys of the rows on screen, top to bottom."""
        top = self.scroll_offset.y
        return tuple(self._keys[top : top + max(self.scrollable_content_region.height - 1, 0)])

    @property
    def keys(self) -> Sequence[Hashable]:
        """Row keys in display order."""
        return self._keys

    @property
    def cursor_key(self) -> Hashable | None:
        """The key of the row under the cursor."""
        if 0 <= self.cursor_row < len(self._keys):
            return self._keys[self.cursor_row]
        return None

    @property
    def cursor_column_key(self) -> str | None:
        """The key of the column under the cursor."""
        if 0 <= self.cursor_column < len(self.columns):
            return self.columns[self.cursor_column].key
        return None

    def move_to_key(self, key: Hashable, scroll: bool = True) -> bool:
        """Put the cursor on a row by key; False when no row has it."""
        index = self._index.get(key)
        if index is None:
            return False
        self.cursor_row = index
        if scroll:
            self._scroll_cursor_into_view(center=True)
        return True

    @property
    def laid_out(self) -> tuple[Column, ...]:
        """The columns as drawn at this width: a scrolled column wider than the room beside the pinned ones is
        narrowed to it (its text ends in …, a number reads …), so every column can be shown whole."""
        key = (self.columns, self.scrollable_content_region.width if self.is_mounted else 0)
        if self._laid_out[0] != key:
            self._laid_out = (key, narrowed(*key))
        return self._laid_out[1]

    @property
    def table_width(self) -> int:
        return sum(c.width + 1 for c in self.laid_out)

    def _resize(self) -> None:
        self.virtual_size = Size(self.table_width, len(self.rows) + 1)

    # -- drawing ----------------------------------------------------------------

    def window(self) -> Window:
        """The columns drawn at the current scroll position and width."""
        return visible_window(self.laid_out, self.scroll_offset.x, self.scrollable_content_region.width)

    def column_x(self, index: int) -> int:
        """Where column ``index`` starts in a full (unscrolled) line."""
        return sum(c.width + 1 for c in self.laid_out[:index])

    def drawn_columns(self) -> tuple[tuple[Column, int], ...]:
        """Each column on screen with the cell its text starts at, left to right: what a line shows."""
        window = self.window()
        out: list[tuple[Column, int]] = []
        x = 0
        for index in window.drawn():
            out.append((self.laid_out[index], x))
            x += self.laid_out[index].width + 1
        return tuple(out)

    def _visible(self, full: Strip, width: int, style: Style, marks: bool = False) -> Strip:
        """The whole columns of ``full`` (a line of every column) that fit ``width`` at the scroll position."""
        window = self.window()
        pinned_end = self.column_x(window.pinned)
        parts = [full.crop(0, pinned_end), full.crop(self.column_x(window.first), self.column_x(window.stop))]
        strip = Strip.join(parts).crop(0, width).extend_cell_length(width, style)
        if not marks:
            return strip
        if window.first > pinned_count(self.laid_out) and window.pinned and pinned_end - 1 < width:
            strip = Strip.join([strip.crop(0, pinned_end - 1), Strip([Segment("‹", style)]), strip.crop(pinned_end)])
        if window.stop < len(self.laid_out) and width > 0:
            strip = Strip.join([strip.crop(0, width - 1), Strip([Segment("›", style)])])
        return strip

    def _cell_segments(self, text: Text, column: Column, style: Style) -> list[Segment]:
        cell = text.copy()
        if cell.cell_len > column.width and column.justify == "right":
            cell = Text(OVERFLOW, style=cell.style)  # a number cut to a prefix reads as another number
        cell.truncate(column.width, overflow="ellipsis")
        if column.justify == "right":
            cell.pad_left(column.width - cell.cell_len)
        elif column.justify == "center":
            left = (column.width - cell.cell_len) // 2
            cell.pad_left(left)
            cell.pad_right(column.width - cell.cell_len)
        else:
            cell.pad_right(column.width - cell.cell_len)
        # Text.render leaves out the Text's own base style: apply it under the spans' styles.
        base = style + Style.parse(cell.style) if isinstance(cell.style, str) and cell.style else style
        if isinstance(cell.style, Style):
            base = style + cell.style
        segments = [Segment(s.text, base + s.style if s.style else base) for s in cell.render(self.app.console)]
        return [*segments, Segment(" ", style)]

    def _header_strip(self, width: int) -> Strip:
        base = self.get_component_rich_style("virtual-table--header")
        column_style = base + self.get_component_rich_style("virtual-table--column")
        segments: list[Segment] = []
        for i, column in enumerate(self.laid_out):
            style = column_style if i == self.cursor_column else base
            segments += self._cell_segments(Text(column.label), column, style)
        return self._visible(Strip(segments), width, base, marks=True)

    def _row_strip(self, index: int, width: int) -> Strip:
        row = self.rows[index]
        is_cursor = index == self.cursor_row
        key = (row.key, index, is_cursor, self.cursor_column if is_cursor else -1)
        cached = self._strip_cache.get(key)
        if cached is None:
            base = self.rich_style + Style.parse(row.style) if row.style else self.rich_style
            if is_cursor:
                base = base + self.get_component_rich_style("virtual-table--cursor")
            segments: list[Segment] = []
            for i, (column, cell) in enumerate(zip(self.laid_out, row.cells, strict=False)):
                style = base
                if is_cursor and i == self.cursor_column:
                    style = base + self.get_component_rich_style("virtual-table--column")
                segments += self._cell_segments(cell, column, style)
            cached = Strip(segments)
            if len(self._strip_cache) > 4096:
                self._strip_cache.clear()
            self._strip_cache[key] = cached
        return self._visible(cached, width, self.rich_style)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return self._header_strip(width)
        index = self.scroll_offset.y + y - 1
        if 0 <= index < len(self.rows):
            return self._row_strip(index, width)
        if not self.rows and y >= 1 and self.placeholder:
            lines = self._placeholder_lines(width)
            if y - 1 < len(lines):
                return lines[y - 1]
        return Strip.blank(width, self.rich_style)

    def _placeholder_lines(self, width: int) -> list[Strip]:
        """The placeholder wrapped to ``width`` cells (a long hint is never cut at the pane's edge)."""
        key = (self.placeholder, width)
        if self._placeholder_cache[0] != key:
            style = self.rich_style + Style(dim=True)
            wrapped = Text(self.placeholder).wrap(self.app.console, max(width, 1))
            strips = [
                Strip([Segment(line.plain.rstrip(), style)]).extend_cell_length(width, self.rich_style)
                for line in wrapped
            ]
            self._placeholder_cache = (key, strips)
        return self._placeholder_cache[1]

    # -- cursor -----------------------------------------------------------------

    def watch_cursor_row(self, old: int, new: int) -> None:
        clamped = max(0, min(new, len(self.rows) - 1)) if self.rows else 0
        if clamped != new:
            self.cursor_row = clamped
            return
        self._refresh_row(old)
        self._refresh_row(new)
        self._scroll_cursor_into_view()
        self.post_message(self.Highlighted(self, self.cursor_key))

    def watch_cursor_column(self, old: int, new: int) -> None:
        self._strip_cache.clear()
        self.refresh()
        self._scroll_column_into_view(new)

    def _scroll_column_into_view(self, index: int) -> None:
        """Scroll sideways (a whole column at a time) until column ``index`` is drawn."""
        pinned = pinned_count(self.laid_out)
        if not self.laid_out or index < pinned:
            return
        window = self.window()
        start = self.column_x(pinned)
        if index < window.first:
            self.scroll_to(x=self.column_x(index) - start, animate=False)
        elif index >= window.stop:
            room = self.scrollable_content_region.width - self.column_x(pinned) - 1
            first = index
            while first > pinned and self.column_x(index + 1) - 1 - self.column_x(first - 1) <= room:
                first -= 1
            self.scroll_to(x=self.column_x(first) - start, animate=False)

    def _refresh_row(self, index: int) -> None:
        y = index - self.scroll_offset.y + 1
        if 0 < y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def _scroll_cursor_into_view(self, center: bool = False) -> None:
        visible = max(self.scrollable_content_region.height - 1, 1)
        top = self.scroll_offset.y
        row = self.cursor_row
        if center:
            self.scroll_to(y=max(0, row - visible // 2), animate=False)
        elif row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False)

    def action_move(self, delta: int) -> None:
        if self.rows:
            self.cursor_row = max(0, min(self.cursor_row + delta, len(self.rows) - 1))

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(self.scrollable_content_region.height - 2, 1))

    def action_jump_first(self) -> None:
        self.action_move(-len(self.rows))

    def action_jump_last(self) -> None:
        self.action_move(len(self.rows))

    def action_column(self, delta: int) -> None:
        if self.columns:
            self.cursor_column = max(0, min(self.cursor_column + delta, len(self.columns) - 1))

    def action_select(self) -> None:
        key = self.cursor_key
        if key is not None:
            self.post_message(self.Selected(self, key))

    def on_click(self, event: events.Click) -> None:
        row = self.scroll_offset.y + event.y - 1
        if event.y >= 1 and 0 <= row < len(self.rows):
            if row == self.cursor_row and event.chain >= 2:
                self.action_select()
            self.cursor_row = row

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strip_cache.clear()
