"""One per-token series as a labelled sparkline: name, value at the cursor, range, bars.

Contract: the screen sets the reactives (data down): the series ``title``,
its :class:`~miles_tui.core.dump.resolve.FieldState` (with a ``note`` saying why when it is
not OK), the whole series as a :class:`~miles_tui.tui.views.sample_tracks.TokenSeries` (one value per token
position, NaN where there is none, plus bands), the visible ``window``, the
``cursor`` token position and the ``reading`` there (None: no value, shown
as "masked"). The widget only draws: a left gutter with the title, the
reading and the window's range, and the bars via
:mod:`miles_tui.tui.renderers.sparkline`, bucketed to its own width (recomputed only
when the window, the data or the width change; a cursor move re-styles
cached rows). An UNREADABLE series is drawn as its note, never as empty
bars. With ``axis=True`` it draws token-position ticks instead of bars. A
click on the bars posts :class:`TokenSparkline.PositionClicked`. It never
reads files or computes statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget
from typing_extensions import Self  # typing.Self is 3.11+; the package supports 3.10

from miles_tui.core.dump import FieldState
from miles_tui.tui.formatting import MISSING, number, reading_text
from miles_tui.tui.renderers.sparkline import SparkFrame, SparkPicture, SparkStyles, spark_frame
from miles_tui.tui.views.sample_tracks import TokenSeries

GUTTER = 18
"""Cells left of the bars: title, reading and range."""


@dataclass(frozen=True, eq=False)
class _Looks:
    """The widget's resolved styles (recomputed only when its CSS changes)."""

    base: Style
    spark: SparkStyles
    axis: SparkStyles
    title: Style
    muted: Style
    unreadable: Style

    @classmethod
    def of(cls, widget: Widget) -> _Looks:
        def style(name: str) -> Style:
            return widget.get_component_rich_style(f"token-sparkline--{name}")

        def partial(name: str) -> Style:
            return widget.get_component_rich_style(f"token-sparkline--{name}", partial=True)

        # Backgrounds from the full styles: CSS alpha colours come out blended over the widget's own.
        masked, prompt, cursor = (Style(bgcolor=style(name).bgcolor) for name in ("masked", "prompt", "cursor"))
        muted = partial("muted")
        return cls(
            base=widget.rich_style,
            spark=SparkStyles(bar=Style(color=style("bar").color), masked=masked, prompt=prompt, cursor=cursor),
            axis=SparkStyles(bar=muted, masked=masked, prompt=prompt, cursor=cursor),
            title=partial("title"),
            muted=muted,
            unreadable=partial("unreadable"),
        )


class TokenSparkline(Widget):
    """A labelled sparkline of one per-token series (or, with ``axis``, the position ruler)."""

    DEFAULT_CSS = """
    TokenSparkline {
        height: 3;
        min-height: 1;
    }
    TokenSparkline > .token-sparkline--bar { color: $primary; }
    TokenSparkline > .token-sparkline--masked { background: $warning 18%; }
    TokenSparkline > .token-sparkline--prompt { background: $foreground 8%; }
    TokenSparkline > .token-sparkline--cursor { background: $foreground 45%; }
    TokenSparkline > .token-sparkline--title { text-style: bold; }
    TokenSparkline > .token-sparkline--muted { color: $text-muted; }
    TokenSparkline > .token-sparkline--unreadable { color: $text-error; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "token-sparkline--bar",
        "token-sparkline--masked",
        "token-sparkline--prompt",
        "token-sparkline--cursor",
        "token-sparkline--title",
        "token-sparkline--muted",
        "token-sparkline--unreadable",
    }

    title: reactive[str] = reactive("")
    """The series name."""
    state: reactive[FieldState] = reactive(FieldState.OK)
    """Whether the series has values; otherwise ``note`` is drawn instead of bars."""
    note: reactive[str] = reactive("")
    """Why the series has no values (drawn when ``state`` is not OK)."""
    data: reactive[TokenSeries | None] = reactive(None)
    """The whole series."""
    window: reactive[tuple[int, int]] = reactive((0, 0))
    """Token positions ``[start, stop)`` on screen."""
    cursor: reactive[int | None] = reactive(None)
    """Token position under the cursor."""
    reading: reactive[float | None] = reactive(None)
    """The series' value at the cursor (None: no value there)."""
    selected: reactive[bool] = reactive(False)
    """Whether this is the series the chart and ``s`` refer to."""

    @dataclass
    class PositionClicked(Message):
        """The user clicked the bars at a token position."""

        sparkline: TokenSparkline
        """The sparkline clicked."""
        position: int
        """Token position under the click."""

    def __init__(
        self,
        series: str = "",
        *,
        axis: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.series = series
        """The series key this sparkline shows (the screen's, opaque here)."""
        self.axis = axis
        self._frame: tuple[tuple[object, ...], SparkFrame] | None = None
        self._picture: tuple[SparkFrame, int, SparkPicture] | None = None
        self._lines: tuple[tuple[object, ...], list[Strip]] | None = None
        """The rendered lines, with the size and looks they were drawn for (None: stale)."""
        self._looks_cache: _Looks | None = None

    @property
    def bar_width(self) -> int:
        """Cells available for bars at the current size."""
        return max(self.size.width - GUTTER, 1)

    @property
    def frame(self) -> SparkFrame | None:
        """The window bucketed to the current bar width (None without data)."""
        data = self.data
        if data is None:
            return None
        key = (data, self.window, self.bar_width)
        if self._frame is None or self._frame[0] != key:
            start, stop = self.window
            self._frame = (key, spark_frame(data.values, data.bands, self.bar_width, start, stop))
        return self._frame[1]

    def watch_selected(self, selected: bool) -> None:
        self.set_class(selected, "-selected")

    def watch_state(self, state: FieldState) -> None:
        self.set_class(state is not FieldState.OK, "-no-data")

    @property
    def _looks(self) -> _Looks:
        # Textual clears its component-style cache on every repaint; these only change with the CSS.
        if self._looks_cache is None:
            self._looks_cache = _Looks.of(self)
        return self._looks_cache

    def _gutter(self, height: int, looks: _Looks) -> list[Strip]:
        title = (("▸ " if self.selected else "  ") + self.title, looks.title)
        lines: list[list[tuple[str, Style]]] = [[title]]
        frame = self.frame
        if self.axis:
            lines = [[("  " + self.title, looks.muted)]]
        elif self.state is FieldState.OK:
            span = MISSING
            if frame is not None and frame.lo is not None and frame.hi is not None:
                span = f"{number(frame.lo, 2)} … {number(frame.hi, 2)}"
            value = ("  " + reading_text(self.reading), Style())
            lines = [[title, value]] if height == 1 else [[title], [value], [("  " + span, looks.muted)]]
        return [_cells(lines[y] if y < len(lines) else [], GUTTER, looks.base) for y in range(height)]

    def _body(self, height: int, looks: _Looks) -> list[Strip]:
        width = self.bar_width
        frame = self.frame
        if not self.axis and self.state is not FieldState.OK:
            note = [(self.note, looks.unreadable if self.state is FieldState.UNREADABLE else looks.muted)]
            return [_cells(note if y == 0 else [], width, looks.base) for y in range(height)]
        if frame is None:
            return [Strip.blank(width, looks.base) for _ in range(height)]
        if self._picture is None or self._picture[0] is not frame or self._picture[1] != height:
            picture = SparkPicture.axis(frame, height) if self.axis else SparkPicture.draw(frame, height)
            self._picture = (frame, height, picture)
        styles = looks.axis if self.axis else looks.spark
        return self._picture[2].strips(styles, width, self.cursor, looks.base)

    def _render_all(self) -> list[Strip]:
        height = max(self.size.height, 1)
        if self._lines is not None and self._lines[0] == (self.size, self._looks):
            return self._lines[1]
        looks = self._looks
        gutter, body = self._gutter(height, looks), self._body(height, looks)
        lines = [Strip.join([g, b]) for g, b in zip(gutter, body, strict=True)]
        self._lines = ((self.size, looks), lines)
        return lines

    def render_line(self, y: int) -> Strip:
        lines = self._render_all()
        return lines[y] if 0 <= y < len(lines) else Strip.blank(self.size.width, self._looks.base)

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        # Every reactive change and resize repaints through here: draw the lines once per repaint.
        if repaint:
            self._lines = None
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._looks_cache = None
        self._lines = None

    def on_click(self, event: events.Click) -> None:
        """Report the token position under a click on the bars."""
        frame = self.frame
        if frame is None or event.x < GUTTER or (not self.axis and self.state is not FieldState.OK):
            return
        position = frame.position_at(event.x - GUTTER)
        if position is not None:
            self.post_message(self.PositionClicked(self, position))


def _cells(parts: list[tuple[str, Style]], width: int, base: Style) -> Strip:
    """Styled text cut or padded to exactly ``width`` cells (no Rich layout: this runs on every key)."""
    segments = []
    used = 0
    for text, style in parts:
        if used >= width:
            break
        fitted = set_cell_size(text, min(cell_len(text), width - used))
        segments.append(Segment(fitted, base + style))
        used += cell_len(fitted)
    if used < width:
        segments.append(Segment(" " * (width - used), base))
    return Strip(segments, width)
