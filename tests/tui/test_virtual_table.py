"""The line-API table: cells keep their styles, rows are formatted lazily, keys keep the cursor."""

from __future__ import annotations

from collections.abc import Hashable

from rich.text import Text
from textual.app import App, ComposeResult

from miles_tui.tui.views.lazy_rows import TableRow
from miles_tui.tui.views.table_layout import Column, narrowed
from miles_tui.tui.widgets.virtual_table import VirtualTable


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


async def test_growing_columns_fit_their_widest_cell_and_the_placeholder_wraps() -> None:
    from miles_tui.tui.views.table_layout import fitted

    app = TableApp()
    async with app.run_test(size=(30, 8)) as pilot:
        table = app.query_one(VirtualTable)
        table.set_columns([Column("id", "id", 4, grow=10), Column("fixed", "fix", 4)])
        table.set_rows([TableRow(1, (Text("10000000"), Text("abcdefgh"))), TableRow(2, (Text("7"), Text("x")))])
        assert [c.width for c in table.columns] == [8, 4]  # the id fits; the fixed column cuts with …
        table.set_columns([Column("id", "id", 4, grow=10), Column("fixed", "fixed", 4)])
        assert [c.width for c in table.columns] == [4, 5]  # never narrower than its label
        table.set_columns([Column("id", "id", 4, grow=10), Column("fixed", "fix", 4)])
        table.set_rows([TableRow(3, (Text("123456789012345"), Text("")))])
        assert table.columns[0].width == 10  # never past grow
        table.set_columns([Column("id", "id", 4, grow=10)])
        assert table.columns[0].width == 4  # new columns: the old rows are not measured against them
        table.set_lazy_rows([1, 2], lambda key: TableRow(key, (Text("123456789"),)))
        assert table.columns[0].width == 9  # lazy rows: the first FIT_SAMPLE are measured
        table.refresh_keys([1])
        assert table.columns[0].width == 9  # a refresh widens, never narrows
        assert fitted(table.columns, {"id": 9})[0].width == 9
        table.set_rows([])
        table.placeholder = "a long hint that does not fit on one line of this narrow table"
        table.refresh()
        await pilot.pause()
        lines = ["".join(s.text for s in table.render_line(y)).rstrip() for y in range(1, 5)]
        assert " ".join(line for line in lines if line) == table.placeholder


def test_a_pinned_text_gives_way_before_a_number_or_a_label_is_cut() -> None:
    """The advisory log at 40 columns: its pinned code (22 cells) left 7 beside it, so 'first step' (10) read …."""
    columns = (
        Column("level", "level", 6, "left", pinned=True),
        Column("code", "advisory", 22, "left", pinned=True),
        Column("message", "message", 40, "left"),
        Column("first_step", "first step", 10),
    )
    level, code, message, first = narrowed(columns, 38)
    assert level.width == 6 and first.width == 10  # the number column and its label whole
    assert code.width == 38 - 7 - 1 - 10 - 1 and code.width >= len(code.label)  # the code gave way (ends in …)
    assert message.width == first.width  # a text wider than the room is narrowed to it
    assert narrowed(columns, 160) == columns  # room enough: nothing changes
    tight = narrowed(columns, 20)  # the code never goes below its label: then the number reads …
    assert tight[1].width == len("advisory") and tight[3].width < 10


def test_a_window_holds_whole_columns_only_with_the_pinned_ones_first() -> None:
    from miles_tui.tui.views.table_layout import visible_window

    columns = [Column("id", "id", 4, pinned=True), *(Column(f"c{i}", f"c{i}", 5) for i in range(6))]
    # 4+1 pinned, then 5+1 per column: 20 cells hold the id, c0, c1 whole and a free cell for the mark
    assert visible_window(columns, 0, 20).drawn() == (0, 1, 2)
    assert visible_window(columns, 0, 17).drawn() == (0, 1, 2)  # 5 + 6 + 5 and a separator cell
    assert visible_window(columns, 0, 16).drawn() == (0, 1)  # c1 would end on the last cell: not drawn
    assert visible_window(columns, 3, 20).drawn() == (0, 2, 3)  # a column half scrolled away is not drawn
    assert visible_window(columns, 6, 20).drawn() == (0, 2, 3)
    assert visible_window(columns, 30, 20).drawn() == (0, 6)  # the last column ends on the last cell
    assert visible_window(columns, 0, 3).drawn() == ()  # not even the id fits: nothing, not a cut id


async def test_cells_never_cut_at_the_edge_and_the_header_marks_hidden_columns() -> None:
    app = TableApp()
    async with app.run_test(size=(24, 6)) as pilot:
        table = app.query_one(VirtualTable)
        columns = [Column("id", "id", 3, pinned=True), *(Column(f"c{i}", f"c{i}", 6) for i in range(5))]
        table.set_columns(columns)
        table.set_rows([TableRow(1, (Text("7"), *(Text(f"0.0{i}8") for i in range(5))))])
        await pilot.pause()
        line = table.render_line(1).text
        assert line.split() == ["7", "0.008", "0.018", "0.028"][: len(line.split())]
        assert table.render_line(0).text.rstrip().endswith("›")
        table.cursor_column = 5
        await pilot.pause()
        await pilot.pause()
        assert table.render_line(1).text.split()[0] == "7"  # the id stays
        assert "0.048" in table.render_line(1).text.split()
        assert "‹" in table.render_line(0).text
        table.set_rows([TableRow(1, (Text("7"), *(Text("-12345.678") for _ in range(5))))])
        await pilot.pause()
        assert "…" in table.render_line(1).text and "-1234" not in table.render_line(1).text
