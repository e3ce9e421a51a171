"""The line-API table: cells keep their styles, rows are formatted lazily, keys keep the cursor."""

from __future__ import annotations

from collections.abc import Hashable

from rich.text import Text
from textual.app import App, ComposeResult

from miles_tui.tui.widgets.virtual_table import Column, TableRow, VirtualTable


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield VirtualTable(id="t")


async def test_a_cells_own_style_is_drawn() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 6)) as pilot:
        table = app.query_one(VirtualTable)
        table.set_columns([Column("a", "a", 12, "left")])
        table.set_rows([TableRow(1, (Text("ok"),)), TableRow(2, (Text("UNREADABLE", style="bold red"),))])
        await pilot.pause()
        strip = table.render_line(2)
        styled = [s for s in strip if "UNREADABLE" in s.text]
        assert styled and styled[0].style is not None
        assert styled[0].style.bold and styled[0].style.color is not None and styled[0].style.color.name == "red"


async def test_only_drawn_rows_are_formatted_and_the_cursor_follows_its_key() -> None:
    app = TableApp()
    formatted: list[Hashable] = []

    def render(key: Hashable) -> TableRow:
        formatted.append(key)
        return TableRow(key, (Text(str(key)),))

    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(VirtualTable)
        table.set_columns([Column("k", "k", 8)])
        table.set_lazy_rows(list(range(100_000)), render)
        await pilot.pause()
        assert 0 < len(formatted) < 50
        await pilot.press("down", "down")
        assert table.cursor_key == 2
        table.set_lazy_rows([-1, *range(100_000)], render)  # a row arrives above
        assert table.cursor_key == 2 and table.cursor_row == 3
