"""Sample strings whose Unicode lies about its width: the step table's columns must not shift.

A status or weight version holding combining marks, zero-width spaces, a Hangul filler (U+3164), emoji
ZWJ sequences, VS16 or skin-tone modifiers is drawn 0, 1 or 2 cells wide depending on the terminal (tmux
draws a ZWJ family as three emoji, a clustering terminal as one). The rollout file is written as an
attacker would; the table must show such strings as characters every terminal draws as wide as the table
computed: the sum of per-character widths equals the grapheme-aware width, and no zero-width character is left.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import wcwidth
from rich.cells import cell_len

from miles_tui.core.dump import Run
from miles_tui.tui.formatting import cell_text
from miles_tui.tui.views.step_rows import sample_cells, sample_widths
from tests.conftest import EPOCH
from tests.security.test_mistyped_fields import _edit_sample, _run

LIARS = [
    "comple\u0301\u0302\u0303ted",
    "zero\u200bwidth\u200b\u200b\u200bspaces",
    "fill\u3164\u3164\u3164er",
    "fam\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466ily",
    "heart\u2764\ufe0f\u2764\ufe0f",
    "thumb\U0001f44d\U0001f3fd",
    "flag\U0001f1eb\U0001f1f7",
    "e\u0301te\u0301",  # decomposed: composed to été, not escaped
]


def _drawn_naively(text: str) -> int:
    """Cells a terminal that draws character by character uses (tmux, older terminals)."""
    return sum(max(wcwidth.wcwidth(c), 0) for c in text)


def _stable(text: str) -> bool:
    """Drawn as wide everywhere: per-character widths add up to the grapheme-aware width, none is zero-width."""
    return _drawn_naively(text) == cell_len(text) == wcwidth.wcswidth(text) and all(
        wcwidth.wcwidth(c) > 0 for c in text
    )


@pytest.mark.parametrize("text", LIARS)
def test_cell_text_is_drawn_as_wide_as_computed(text: str) -> None:
    assert not _stable(text) or text == "e\u0301te\u0301"
    assert _stable(cell_text(text))


def test_composed_text_stays_readable() -> None:
    assert cell_text("e\u0301te\u0301") == "été"
    assert cell_text("日本語 v3") == "日本語 v3"


def test_the_step_table_cells_of_a_hostile_step(tmp_path: Path) -> None:
    root = _run(tmp_path)
    for position, text in enumerate(LIARS):
        _edit_sample(root, 1, position, status=text, weight_versions=["1", text])
    rows = list(Run(root, use_cache=False).summary(1, False, EPOCH).rows)
    widths = sample_widths(rows)
    for row in rows:
        cells = sample_cells(row, set())
        for cell in cells:
            assert _stable(cell.plain) or cell.plain.isascii(), repr(cell.plain)
        assert cell_len(cells[2].plain) <= widths["status"]
        assert cell_len(cells[7].plain) <= widths["weight_version"]


async def test_the_app_draws_every_table_line_at_the_table_width(tmp_path: Path) -> None:
    from miles_tui.tui.screens.step_screen import StepScreen
    from miles_tui.tui.widgets.virtual_table import VirtualTable
    from tests.harness import frozen_app, settle

    root = _run(tmp_path)
    for position, text in enumerate(LIARS):
        _edit_sample(root, 2, position, status=text, weight_versions=["2", text])
    app = frozen_app(root, use_cache=False)
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, StepScreen) and screen.rollout_id == 2
        table = screen.query_one("#samples", VirtualTable)
        widths = set()
        for y in range(1, 1 + len(LIARS) + 2):
            line = table.render_line(y).text
            assert all(wcwidth.wcwidth(c) > 0 for c in line), repr(line)
            widths.add(_drawn_naively(line))
        assert len(widths) == 1  # every line as wide as the others: no column shifted
