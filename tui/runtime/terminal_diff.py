"""Only what changed goes to the terminal: a cell-by-cell copy of the screen, and the least output to update it.

Textual repaints whole regions: a widget that refreshes with the same text, or
a table whose rows did not change, is written out again, and every segment
carries its full colour codes. :class:`TerminalDiff` keeps what the terminal
shows (character and rendered style per cell) and turns each compositor
update into the changed cells only: runs of changed cells with one cursor
move each, consecutive cells of the same style under one colour code. An
update that changes nothing writes nothing. Wide characters are never split.

A whole-screen update for another screen than the last (a screen pushed or
popped) is written in full (compactly), so the terminal matches the app after
each change of screen, whatever happened to it before; a whole-screen update
of the same screen (a layout change: a row added, a label resized) is diffed
like any other. The copy is also forgotten when the screen size changes or
the app comes back from a suspend.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import get_character_cell_size
from rich.color import ColorSystem
from rich.console import COLOR_SYSTEMS, Console
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from miles_tui.tui.runtime.textual_private import ChopsUpdate, CompositorUpdate, LayoutUpdate

GAP = 6
"""Unchanged cells shorter than this between two changes are written again (cheaper than a cursor move)."""

Cell = tuple[str, str, Style | None]
"""(identity, text, style): identity is the text and its rendered style codes (two cells that look the same
have the same identity, whatever Textual's metadata says); text is "" for the right half of a wide character."""

_BLANK: Cell = (" \x00", " ", None)


class _Precomputed(CompositorUpdate):
    """An update whose terminal output is already known."""

    def __init__(self, sequence: str) -> None:
        self.sequence = sequence

    def render_segments(self, console: Console) -> str:
        return self.sequence


class TerminalDiff:
    """What the terminal shows, cell by cell."""

    def __init__(self) -> None:
        self.lines: dict[int, list[str | None]] = {}
        """Per screen line, the identity of every cell (None: unknown)."""
        self.size: tuple[int, int] | None = None
        self._screen: object = None
        """The screen of the last whole-screen update."""
        self.written = 0
        """Characters of cell output produced (for tests and benchmarks)."""
        self.skipped = 0
        """Updates that changed nothing on screen and wrote nothing."""

    def reset(self) -> None:
        """Forget the terminal's content (resize, resume): the next updates write everything they cover."""
        self.lines.clear()

    def update(
        self, renderable: CompositorUpdate, console: Console, size: tuple[int, int], screen: object = None
    ) -> CompositorUpdate | None:
        """The part of ``renderable`` that changes the screen (None: nothing does).

        A whole-screen update of another ``screen`` than the last one is written whole.
        """
        if size != self.size:
            self.reset()
            self.size = size
        color_system = COLOR_SYSTEMS.get(console.color_system or "", ColorSystem.TRUECOLOR)  # what Strip.render uses
        pieces: list[str] = []
        full = isinstance(renderable, LayoutUpdate) and screen is not self._screen
        if isinstance(renderable, LayoutUpdate):
            self._screen = screen
        for y, x, cells in _covered(renderable, color_system):
            pieces += self._line(y, x, cells, color_system, full)
        if not pieces:
            self.skipped += 1
            return None
        sequence = "".join(pieces)
        self.written += len(sequence)
        return _Precomputed(sequence)

    def _line(self, y: int, x: int, cells: list[Cell | None], color_system: ColorSystem, full: bool) -> list[str]:
        """Output for cells[.] at (x.., y), and the copy updated; unknown cells (None) are left alone.

        ``full``: write every cell (a new screen), so whatever the terminal shows, it shows the app's
        screen after it.
        """
        width = self.size[0] if self.size else x + len(cells)
        shown = self.lines.setdefault(y, [None] * width)
        if len(shown) < x + len(cells):
            shown.extend([None] * (x + len(cells) - len(shown)))
        changed = []
        for i, cell in enumerate(cells):
            if cell is not None and (full or shown[x + i] != cell[0]):
                changed.append(i)
                shown[x + i] = cell[0]
        out: list[str] = []
        for start, end in _runs(changed, cells):
            out.append(f"\x1b[{y + 1};{x + start + 1}H")
            out.append(_render(cells[start:end], color_system))
        return out


def _runs(changed: list[int], cells: list[Cell | None]) -> Iterable[tuple[int, int]]:
    """[start, end) ranges covering the changed cells: near changes merged, wide characters kept whole."""
    if not changed:
        return
    start = end = changed[0]
    for i in changed[1:]:
        if i - end > GAP or any(c is None for c in cells[end + 1 : i]):
            yield _whole(start, end + 1, cells)
            start = i
        end = i
    yield _whole(start, end + 1, cells)


def _whole(start: int, end: int, cells: list[Cell | None]) -> tuple[int, int]:
    while start > 0 and (cell := cells[start]) is not None and cell[1] == "":
        start -= 1  # the right half of a wide character: start at its left half
    while end < len(cells) and (cell := cells[end]) is not None and cell[1] == "":
        end += 1
    return start, end


def _render(cells: list[Cell | None], color_system: ColorSystem) -> str:
    out: list[str] = []
    run: list[str] = []
    style: Style | None = None
    codes: str | None = None
    for cell in cells:
        identity, text, cell_style = cell if cell is not None else _BLANK
        cell_codes = identity[len(text) :]
        if cell_codes != codes:
            if run:
                out.append(_styled("".join(run), style, color_system))
            run, style, codes = [], cell_style, cell_codes
        run.append(text)
    if run:
        out.append(_styled("".join(run), style, color_system))
    return "".join(out)


def _styled(text: str, style: Style | None, color_system: ColorSystem) -> str:
    return text if style is None else Strip.render_style(style, text, color_system)


def _cells(segments: Iterable[Segment], color_system: ColorSystem) -> list[Cell | None]:
    """One entry per terminal cell."""
    cells: list[Cell | None] = []
    for text, style, control in segments:
        if control:
            continue
        codes = "\x00"
        if style is not None:
            codes += Strip.render_ansi(style, color_system)
            if style.link:
                codes += "\x00" + style.link
        for character in text:
            size = get_character_cell_size(character)
            if size == 0:  # a combining mark: part of the cell before it
                if cells and (last := cells[-1]) is not None:
                    cells[-1] = (last[1] + character + codes, last[1] + character, last[2])
                continue
            cells.append((character + codes, character, style))
            if size == 2:
                cells.append((codes, "", style))
    return cells


def _covered(renderable: CompositorUpdate, color_system: ColorSystem) -> Iterable[tuple[int, int, list[Cell | None]]]:
    """(y, x, cells) for every line part the update paints."""
    if isinstance(renderable, LayoutUpdate):
        x, y0 = renderable.region.x, renderable.region.y
        for offset, strips in enumerate(renderable.strips):
            yield y0 + offset, x, _cells((segment for strip in strips for segment in strip), color_system)
    elif isinstance(renderable, ChopsUpdate):
        for y, x1, x2 in renderable.spans:
            line: list[Cell | None] = [None] * (x2 - x1)
            for end, (x, strip) in zip(renderable.chop_ends[y], renderable.chops[y].items(), strict=False):
                if strip is None or x >= x2 or end <= x1:
                    continue
                cells = _cells(strip, color_system)
                for i, cell in enumerate(cells):
                    if x1 <= x + i < x2:
                        line[x + i - x1] = cell
            yield y, x1, line
    else:
        raise TypeError(f"unexpected compositor update {type(renderable).__name__}")
