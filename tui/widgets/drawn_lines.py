"""A widget drawn whole as strips: built again only when what it draws, its size or its colours change.

Contract: a subclass says what it draws (:meth:`DrawnLines.source`, compared with ``==`` to the last
drawing's) and draws it (:meth:`DrawnLines.draw`, one strip per row, given the content size, whether colour
is on and the base style). The widget keeps the strips, hands Textual each row, and
:meth:`DrawnLines.drawn_text` gives the rows' characters (what tests read).
"""

from __future__ import annotations

from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


class DrawnLines(Widget):
    """Rows drawn by :meth:`draw`, cached until the source, the size or the colours change."""

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._drawn: tuple[object, ...] | None = None
        self._lines: list[Strip] = []

    def source(self) -> object:
        """What is drawn (a new drawing when it compares unequal to the last one's)."""
        raise NotImplementedError

    def draw(self, width: int, height: int, color: bool, base: Style) -> list[Strip]:
        """The rows for a content area of ``width`` × ``height`` cells."""
        raise NotImplementedError

    def lines(self) -> list[Strip]:
        """The rows as drawn now (built again when the source, size or colours changed)."""
        width, height = self.content_size
        base = self.rich_style
        key = (self.source(), width, height, not self.app.no_color, base)
        if key != self._drawn:
            self._lines = self.draw(width, height, not self.app.no_color, base)
            self._drawn = key
        return self._lines

    def drawn_text(self) -> str:
        """The characters of every row (what tests read)."""
        return "\n".join(strip.text for strip in self.lines())

    def render_lines(self, crop: Region) -> list[Strip]:
        self.lines()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(self.content_size.width)
