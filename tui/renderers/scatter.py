"""Draw a step's reward-vs-length scatter as braille dots, with axes, marks and a cursor.

Pure: a :class:`~miles_tui.core.analysis.scatter.Scatter` and a size in, Rich ``Text`` lines
out. Each character cell holds 2 × 4 dots. A cell holding one sample shows its braille dot (``×``
when it is truncated), a cell holding several shows how many (``2``-``9``, ``+`` past nine; yellow
when one of them is truncated, and the legend counts them), and the cursor's cell ``◆``: no point
hides behind another without the plot saying so, and all of it reads without colour.
"""

from __future__ import annotations

from rich.text import Text

from miles_tui.core.analysis import Scatter, dot_of
from miles_tui.tui.formatting import number

BRAILLE_BASE = 0x2800
_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""Braille dot bit for (row within the cell, column within the cell)."""

TRUNCATED_MARK = "×"
CURSOR_MARK = "◆"
LEGEND = (
    f"⠶ sample  {TRUNCATED_MARK} truncated at the response cap  2-9 + samples in one cell (yellow: some "
    f"truncated)  {CURSOR_MARK} cursor"
)


def count_mark(count: int) -> str:
    """The mark of a cell holding ``count`` (≥ 2) samples."""
    return str(count) if count <= 9 else "+"


def legend(scatter: Scatter) -> str:
    """The legend with the step's counts (every sample and every truncated one is accounted for)."""
    truncated = sum(p.truncated for p in scatter.points)
    return f"{len(scatter.points)} samples, {truncated} truncated · {LEGEND}"


def scatter_lines(scatter: Scatter, width: int, height: int, cursor: int | None) -> list[Text]:
    """``height`` lines of ``width`` characters: a reward axis, the plot, a length axis."""
    y_labels = [number(scatter.reward_range[1]), number(scatter.reward_range[0])]
    gutter = max(len(label) for label in y_labels) + 1
    cols, rows = max(1, width - gutter - 1), max(1, height - 2)
    bits = [[0] * cols for _ in range(rows)]
    truncated = [[False] * cols for _ in range(rows)]
    counts = [[0] * cols for _ in range(rows)]
    for point in scatter.points:
        x, y = dot_of(scatter, point, cols, rows)
        bits[y // 4][x // 2] |= _BITS[y % 4][x % 2]
        truncated[y // 4][x // 2] |= point.truncated
        counts[y // 4][x // 2] += 1
    cursor_cell = None
    if cursor is not None and scatter.points:
        x, y = dot_of(scatter, scatter.points[cursor], cols, rows)
        cursor_cell = (y // 4, x // 2)
    lines = []
    for r in range(rows):
        label = y_labels[0] if r == 0 else y_labels[1] if r == rows - 1 else ""
        line = Text(label.rjust(gutter - 1) + " │", style="dim")
        for c in range(cols):
            if (r, c) == cursor_cell:
                line.append(CURSOR_MARK, style="bold reverse")
            elif counts[r][c] > 1:
                line.append(count_mark(counts[r][c]), style="bold yellow" if truncated[r][c] else "bold cyan")
            elif truncated[r][c]:
                line.append(TRUNCATED_MARK, style="bold yellow")
            elif bits[r][c]:
                line.append(chr(BRAILLE_BASE + bits[r][c]), style="cyan")
            else:
                line.append(" ")
        lines.append(line)
    lines.append(Text(" " * gutter + "└" + "─" * cols, style="dim"))
    low, high = (str(v) for v in scatter.length_range)
    axis = f"{low} tokens".ljust(cols - len(high) - 7) + f"{high} tokens"
    lines.append(Text(" " * (gutter + 1) + axis[:cols], style="dim"))
    return lines
