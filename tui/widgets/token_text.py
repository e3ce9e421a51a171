"""The token text around the cursor, coloured by a statistic, under its legend.

Contract: the screen hands the widget a sample's tokens
(:class:`~miles_tui.tui.views.token_text_lines.TokenSource`), its prompt length
and a core :class:`~miles_tui.core.analysis.token_heat.TokenHeat` with
:meth:`TokenText.show` (with the cursor's token position), a moved cursor
with :meth:`TokenText.move`, and how many text rows to use with
:meth:`TokenText.set_rows`. It keeps the page of text it shows (so the text
stays put while the cursor moves inside it), lays it out with the pure
functions of :mod:`miles_tui.tui.views.token_text_lines` and draws it with a
:class:`~miles_tui.tui.widgets.heat_lines.HeatLines`; a cursor move repaints
the text rows and never changes the widget's height. It never reads files
or computes a statistic.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from miles_tui.core.analysis import TokenHeat
from miles_tui.tui.views.token_text_lines import TextPage, TokenSource, legend, page_cells, page_for, shown_rows
from miles_tui.tui.widgets.heat_lines import HeatLines


class TokenText(Vertical):
    """Legend, then rows of coloured token text."""

    DEFAULT_CSS = """
    TokenText { height: auto; }
    TokenText > #heat-legend { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._source: TokenSource | None = None
        self._prompt_length = 0
        self._heat: TokenHeat | None = None
        self._note = ""
        self._rows = 3
        self._cursor = 0
        self.page: TextPage | None = None
        """The page of text shown."""

    def compose(self) -> ComposeResult:
        yield Static(id="heat-legend")
        yield HeatLines(id="heat-text")

    def show(self, source: TokenSource, prompt_length: int, heat: TokenHeat, unreadable_note: str, cursor: int) -> None:
        """Colour ``source`` by ``heat``, the cursor on token ``cursor`` (a new sample starts a new page)."""
        if source is not self._source:
            self.page = None
        self._source, self._prompt_length, self._heat, self._note = source, prompt_length, heat, unreadable_note
        self._cursor = cursor
        self._draw_legend()
        self._draw_text()

    def set_rows(self, rows: int) -> None:
        """Use at most ``rows`` rows of text (the legend comes on top)."""
        self._rows = rows
        self._draw_legend()
        self._draw_text()

    def move(self, position: int) -> None:
        """Put the cursor on token ``position``."""
        self._cursor = position
        self._draw_text()

    def on_resize(self) -> None:
        self._draw_legend()
        self._draw_text()

    def _draw_legend(self) -> None:
        legend_line = self.query_one("#heat-legend", Static)
        if self._heat is not None and legend_line.content_size.width:
            legend_line.update(legend(self._heat, self._note, legend_line.content_size.width))

    def _draw_text(self) -> None:
        source, heat = self._source, self._heat
        lines = self.query_one(HeatLines)
        width = lines.content_size.width
        if source is None or heat is None or not self.display or not width:
            return
        self.page = page_for(source, self._cursor, width, self._rows, self.page)
        rows = shown_rows(self.page, source)  # fewer than asked only when the whole sample fits
        if lines.styles.height is None or lines.styles.height.value != rows:
            lines.styles.height = rows
        lines.show(page_cells(self.page, source, self._prompt_length, heat, self._cursor))
