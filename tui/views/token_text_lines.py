"""The sample's token text coloured by a statistic: the page of text around the cursor, and its legend.

Contract: pure functions over core values. The levels come from
:func:`miles_tui.core.analysis.token_heat.token_heat`; this module only gives
each token a *look* (``decile-0`` … ``decile-9``, ``masked``, ``no-value``,
``flat``, ``prompt``, ``cursor``), which
:class:`~miles_tui.tui.widgets.heat_lines.HeatLines` maps to styles: the
deciles to a ten-step colour ramp, the top decile also **bold and
underlined**, every position without a value (loss-masked, NaN, or a series
unreadable / not dumped) **struck through** (dim when loss-masked), the
prompt *italic*, the cursor reversed. So the text reads without colour:
underline = top 10 %, struck = no value, and a missing value never passes
for a low one. :func:`legend` says so in words (Content).

The text is laid out in pages (:class:`TextPage`): tokens in order, wrapped
between tokens to the width, a new line after a token that holds a newline,
a token wider than a line cut with "…". A page keeps its place while the
cursor moves inside it; when the cursor moves past its end the next page
keeps the last line for context; any other jump puts the cursor's line about
a third of the way down. Token texts are shown escaped as ``repr`` does
(``\\n``, ``\\x1b``) and inert; without a tokenizer each token is its id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rich.cells import cell_len, set_cell_size
from textual.content import Content

from miles_tui.core.analysis import MASKED, NO_VALUE, TOP, HeatStatistic, TokenHeat
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import FieldState
from miles_tui.tui.formatting import number
from miles_tui.tui.views.sample_lines import Part

HEAT_CYCLE: Final[tuple[HeatStatistic | None, ...]] = (
    None,
    HeatStatistic.LP_DIFF,
    HeatStatistic.ENTROPY,
    HeatStatistic.ADVANTAGE,
    HeatStatistic.RATIO,
    HeatStatistic.RETURN,
    HeatStatistic.REF_ENTROPY,
    HeatStatistic.TRAIN_LOGP,
    HeatStatistic.ROLLOUT_LOGP,
    HeatStatistic.REF_LOGP,
)
"""What ``h`` steps through: off, then each statistic (the three most asked for first)."""

RAMP: Final = (
    "#440154",
    "#482878",
    "#3e4989",
    "#31688e",
    "#26828e",
    "#1f9e89",
    "#35b779",
    "#6ece58",
    "#b5de2b",
    "#fde725",
)
"""Background of deciles 0 … 9 (viridis: ordered in lightness, so a greyscale terminal keeps the order)."""

TOP_LOOK: Final = f"decile-{TOP}"
"""The look of the top decile (drawn bold and underlined as well)."""

PROMPT_STYLE: Final = "italic $text-muted"
MASKED_STYLE: Final = "strike $text-muted"
NO_VALUE_STYLE: Final = "strike bold $text-error"


@dataclass(frozen=True, eq=False)
class TokenSource:
    """What each token position shows: its text, or its id without a tokenizer (compared by identity)."""

    token_ids: Sequence[int]
    """Prompt + response token ids."""
    texts: Sequence[str] | None
    """Each token's text (None: show ids)."""

    @property
    def total(self) -> int:
        return len(self.token_ids)

    @property
    def separator(self) -> str:
        """Between two tokens on a line: nothing for text (tokens carry their spaces), a space between ids."""
        return "" if self.texts is not None else " "

    def label(self, position: int) -> str:
        """A token as shown: its text escaped as ``repr`` does, or its id."""
        if self.texts is None:
            return str(self.token_ids[position])
        return inert(repr(self.texts[position])[1:-1])

    def ends_line(self, position: int) -> bool:
        return self.texts is not None and "\n" in self.texts[position]


@dataclass(frozen=True)
class TextPage:
    """Token positions laid out in lines."""

    first: int
    """The first token position shown."""
    stop: int
    """One past the last token position shown."""
    lines: tuple[tuple[tuple[int, str], ...], ...]
    """Per line: each token position on it and its label as shown."""
    width: int
    """Cells per line."""
    rows: int
    """Lines a page holds."""

    def holds(self, position: int) -> bool:
        return self.first <= position < self.stop


def lay_out(source: TokenSource, first: int, width: int, rows: int) -> TextPage:
    """Tokens from ``first`` on, wrapped between tokens into at most ``rows`` lines of ``width`` cells."""
    width = max(width, 2)
    gap = cell_len(source.separator)
    lines: list[tuple[tuple[int, str], ...]] = []
    line: list[tuple[int, str]] = []
    used = 0
    position = first
    while position < source.total and len(lines) < rows:
        label = source.label(position)
        if cell_len(label) > width:
            label = set_cell_size(label, width - 1) + "…"
        needed = cell_len(label) + (gap if line else 0)
        if line and used + needed > width:
            lines.append(tuple(line))
            line, used = [], 0
            continue
        line.append((position, label))
        used += needed
        position += 1
        if source.ends_line(position - 1):
            lines.append(tuple(line))
            line, used = [], 0
    if line and len(lines) < rows:
        lines.append(tuple(line))
    return TextPage(first, position, tuple(lines), width, rows)


def page_for(source: TokenSource, position: int, width: int, rows: int, previous: TextPage | None) -> TextPage:
    """The page showing token ``position``: the previous one while it holds it, else the next, else the page
    from the sequence's start when it holds it, else a fresh one with about a third of its cells before it."""
    if previous is not None and (previous.width, previous.rows) == (max(width, 2), rows):
        if previous.holds(position):
            return previous
        if position >= previous.stop and previous.lines:
            page = lay_out(source, previous.lines[-1][0][0], width, rows)  # the last line stays, for context
            if page.holds(position):
                return page
    start = lay_out(source, 0, width, rows)
    if start.holds(position):  # the sequence's start fits with it: nothing before it is hidden
        return start
    page = lay_out(source, _back_from(source, position, max(width, 2) * rows // 3), width, rows)
    return page if page.holds(position) else lay_out(source, position, width, rows)


def _back_from(source: TokenSource, position: int, cells: int) -> int:
    """Where to start so about ``cells`` of text come before ``position`` (at a line start when one is near)."""
    first, used = position, 0
    while first > 0 and not source.ends_line(first - 1):
        used += cell_len(source.label(first - 1)) + cell_len(source.separator)
        if used > cells:
            break
        first -= 1
    return first


def token_look(level: int, spread: bool) -> str:
    """The look of a response token at ``level``: ``decile-N``, ``masked``, ``no-value`` or ``flat``."""
    if level == MASKED:
        return "masked"
    if level == NO_VALUE:
        return "no-value"
    if not spread:
        return "flat"  # one value everywhere: nothing stands out, nothing is low
    return f"decile-{level}"


def shown_rows(page: TextPage, source: TokenSource) -> int:
    """The rows to show: the page's, or fewer when the whole sequence fits in fewer."""
    if page.first == 0 and page.stop == source.total:
        return max(len(page.lines), 1)
    return page.rows


def page_cells(
    page: TextPage, source: TokenSource, prompt_length: int, heat: TokenHeat, cursor: int
) -> list[list[tuple[str, str]]]:
    """Exactly ``shown_rows`` lines of (text, look): each token with its look, ``""`` between tokens.

    Looks: ``prompt``, ``masked``, ``no-value``, ``flat``, ``decile-0`` … ``decile-9`` (the top one also
    bold and underlined), ``cursor`` (``cursor-top`` on a top-decile token).
    """
    lines: list[list[tuple[str, str]]] = []
    for index in range(shown_rows(page, source)):
        cells: list[tuple[str, str]] = []
        for slot, (position, label) in enumerate(page.lines[index] if index < len(page.lines) else ()):
            if slot and source.separator:
                cells.append((source.separator, ""))
            level = MASKED if position < prompt_length else int(heat.levels[position - prompt_length])
            if position == cursor:
                look = "cursor-top" if level == TOP and heat.spread else "cursor"
            else:
                look = "prompt" if position < prompt_length else token_look(level, heat.spread)
            cells.append((label, look))
        lines.append(cells)
    return lines


def legend(heat: TokenHeat, unreadable_note: str, width: int) -> Content:
    """What the colours mean for this statistic and sample, wrapped between its parts to ``width``."""
    name = heat.statistic.value
    chips: list[list[tuple[str, str]]] = []
    if heat.state is FieldState.UNREADABLE:
        reason = unreadable_note.removeprefix("UNREADABLE: ")
        chips.append([(f"{name} UNREADABLE for this sample ({reason}): no token has a value", "bold $text-error")])
    elif heat.state is not FieldState.OK:
        chips.append([(f"{name} not dumped for this sample: no token has a value", "bold $text-warning")])
    elif heat.low is None or heat.high is None:
        chips.append([(f"{name}: no trained token has a finite value", "bold $text-warning")])
    elif not heat.spread:
        chips.append([(name, "bold"), (f" {number(heat.low, 4)} at every trained token: no top decile", "")])
    else:
        ramp = [("█", color) for color in RAMP]
        chips += [
            [(name, "bold"), (f" {number(heat.low, 4)} ", ""), *ramp, (f" {number(heat.high, 4)}", "")],
            [(f"deciles of {heat.counted} trained tokens", "$text-muted")],
            [("underlined", "bold underline"), (f": top 10% >{number(heat.top_cut, 4)}", "")],
        ]
    chips += [
        [("struck", NO_VALUE_STYLE), (": no value (", ""), ("dim", MASKED_STYLE), (": masked)", "")],
        [("italic", PROMPT_STYLE), (": prompt", "")],
    ]
    return _wrap(chips, width)


def _wrap(chips: list[list[tuple[str, str]]], width: int) -> Content:
    """Chips separated by dots, wrapped between chips (never inside one) to ``width`` cells."""
    parts: list[Part] = []
    used = 0
    for chip in chips:
        size = sum(cell_len(text) for text, _ in chip)
        if used and used + 3 + size > width:
            parts.append("\n")
            used = 0
        elif used:
            parts.append((" · ", "$text-muted"))
            used += 3
        parts += chip
        used += size
    return Content.assemble(*parts)
