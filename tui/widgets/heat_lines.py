"""Rows of token text, each token in the look its decile gives it: drawn line by line, cheap on every key.

Contract: :meth:`HeatLines.show` takes lines of (text, look) pairs from
:func:`miles_tui.tui.views.token_text_lines.page_cells` and repaints. Looks map to
styles here and nowhere else: ``decile-0`` … ``decile-9`` to the ramp of
:data:`~miles_tui.tui.views.token_text_lines.RAMP` (white text on the dark half,
black on the light), ``decile-9`` also bold and underlined; ``prompt``,
``masked``, ``no-value`` and ``cursor`` come from the widget's component
classes (so the theme and NO_COLOR apply): italic, struck, struck bold,
reversed. Lines are drawn as segments straight into strips (no Rich layout),
so a repaint costs the same whatever the sample's length. It never computes
a level.
"""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from miles_tui.tui.views.token_text_lines import RAMP, TOP_LOOK

_COMPONENT_LOOKS = ("prompt", "masked", "no-value", "cursor")


def _ramp_styles() -> dict[str, Style]:
    styles = {}
    for level, background in enumerate(RAMP):
        foreground = "#ffffff" if level < len(RAMP) * 6 // 10 else "#000000"
        top = f"decile-{level}" == TOP_LOOK
        styles[f"decile-{level}"] = Style(color=foreground, bgcolor=background, bold=top, underline=top)
    return styles


RAMP_STYLES = _ramp_styles()
"""The look of each decile."""


class HeatLines(Widget):
    """Lines of styled token text."""

    DEFAULT_CSS = """
    HeatLines { height: 3; }
    HeatLines > .heat-lines--prompt { color: $text-muted; text-style: italic; }
    HeatLines > .heat-lines--masked { color: $text-muted; text-style: strike; }
    HeatLines > .heat-lines--no-value { color: $text-error; text-style: strike bold; }
    HeatLines > .heat-lines--cursor { text-style: reverse bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {f"heat-lines--{look}" for look in _COMPONENT_LOOKS}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[list[tuple[str, str]]] = []
        """What is shown: per line, (text, look) pairs."""
        self._styles: dict[str, Style] | None = None
        self._strips: dict[int, Strip] = {}

    def show(self, lines: list[list[tuple[str, str]]]) -> None:
        """Show ``lines`` in place of what was shown."""
        self.lines = lines
        self._strips.clear()
        self.refresh()

    def look_style(self, look: str) -> Style:
        """The Rich style a look is drawn in (over the widget's own)."""
        if self._styles is None:
            components = {look: self.get_component_rich_style(f"heat-lines--{look}") for look in _COMPONENT_LOOKS}
            self._styles = {"": Style(), "flat": Style(), **RAMP_STYLES, **components}
            self._styles["cursor-top"] = components["cursor"] + Style(underline=True)
        return self._styles.get(look, Style())

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            cells = self.lines[y] if 0 <= y < len(self.lines) else []
            strip = self._strip(cells, width)
            self._strips[y] = strip
        return strip

    def _strip(self, cells: list[tuple[str, str]], width: int) -> Strip:
        base = self.rich_style
        segments = []
        used = 0
        for text, look in cells:
            if used >= width:
                break
            fitted = set_cell_size(text, min(cell_len(text), width - used))
            segments.append(Segment(fitted, base + self.look_style(look)))
            used += cell_len(fitted)
        if used < width:
            segments.append(Segment(" " * (width - used), base))
        return Strip(segments, width)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None
        self._strips.clear()
