"""The overview's starvation rows: MFU, the wait (bubble) strip and the data-buffer depth, one line each.

Contract: laid out as the trends above them (name, line, the text beside it, newest value), from
:func:`~miles_tui.tui.views.starvation_lines.starvation_rows`; the text beside every line gets the width of the
widest, so the lines end in one column and no number is cut. A figure the run does not write says so
where its line would be. :meth:`StarvationRows.show` redraws only when given other figures.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label

from miles_tui.core.analysis.starvation import Starvation
from miles_tui.tui.views.starvation_lines import starvation_rows
from miles_tui.tui.widgets.step_trends import TrendLine

ROWS = ("mfu", "wait", "buffer")


class StarvationRows(Vertical):
    """MFU, wait ratio per step and data-buffer depth (see the module docstring)."""

    DEFAULT_CSS = """
    StarvationRows { height: auto; }
    StarvationRows > Horizontal { height: 1; }
    StarvationRows Label.starve-name { width: 10; }
    StarvationRows Label.starve-note { width: 1fr; color: $text-muted; }
    StarvationRows Label.starve-beside { color: $text-muted; text-align: right; padding: 0 0 0 1; }
    StarvationRows Label.starve-value { width: auto; min-width: 9; text-align: right; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.figures: Starvation | None = None
        """The figures drawn last."""

    def compose(self) -> ComposeResult:
        for key in ROWS:
            with Horizontal():
                yield Label(key, id=f"starve-name-{key}", classes="starve-name")
                yield TrendLine(id=f"starve-line-{key}")
                yield Label("", id=f"starve-note-{key}", classes="starve-note")
                yield Label("", id=f"starve-beside-{key}", classes="starve-beside")
                yield Label("", id=f"starve-value-{key}", classes="starve-value")

    def show(self, figures: Starvation) -> None:
        """Draw these figures (nothing happens when they are the ones drawn)."""
        if figures is self.figures:
            return
        self.figures = figures
        rows = starvation_rows(figures)
        width = max(len(row.beside) for row in rows) + 1
        for key, row in zip(ROWS, rows, strict=True):
            line = self.query_one(f"#starve-line-{key}", TrendLine)
            note = self.query_one(f"#starve-note-{key}", Label)
            line.display, note.display = row.note is None, row.note is not None
            if row.note is None:
                line.show(row.values, row.scale)
            else:
                note.update(row.note)
            self.query_one(f"#starve-name-{key}", Label).update(row.name)
            beside = self.query_one(f"#starve-beside-{key}", Label)
            beside.styles.width = width
            beside.update(row.beside)
            self.query_one(f"#starve-value-{key}", Label).update(row.newest)

    def texts(self) -> list[str]:
        """Each row's words (name, note or range, newest) as plain text, for tests."""
        out = []
        for key in ROWS:
            parts = [self.query_one(f"#starve-{part}-{key}", Label).render() for part in ("name", "note", "beside")]
            parts.append(self.query_one(f"#starve-value-{key}", Label).render())
            out.append(" ".join(str(p).strip() for p in parts if str(p).strip()))
        return out
