"""Footers show the keys that matter, whole, at 80 and 160 columns; `?` help names places as the user does."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_tui.tui.screens.help_screen import HelpScreen
from tests.harness import frozen_app, screen_text, settle

SCREENS = {
    "overview": ((), ("⏎ Open", "q Quit", "? Help")),
    "step": (("enter",), ("⏎ Open", "esc Back", "/ Filter", "q Quit", "? Help")),
    "sample": (("enter", "enter"), ("esc Back", "q Quit", "? Help")),
    "metrics": (("m",), ("esc Back", "/ Filter", "q Quit", "? Help")),
    "gpus": (("u",), ("esc Back", "q Quit", "? Help")),
    "engines": (("E",), ("esc Back", "q Quit", "? Help")),
    "outliers": (("O",), ("⏎ Open", "esc Back", "q Quit", "? Help")),
    "compare": (("c",), ("⏎ Open", "esc Back", "q Quit", "? Help")),
    "scatter": (("enter", "p"), ("esc Back", "q Quit", "? Help")),
}


def _footer(text: str) -> str:
    """The footer's bindings (left of the command palette key), trailing blanks dropped."""
    return text.splitlines()[-1].split("▏")[0].rstrip()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@pytest.mark.parametrize("screen", sorted(SCREENS))
async def test_the_footer_fits_and_shows_the_essential_keys(demo_run: Path, screen: str, size: tuple[int, int]) -> None:
    keys, essential = SCREENS[screen]
    app = frozen_app(demo_run)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press(*keys)
        await settle(pilot)
        footer = _footer(screen_text(app))
        assert footer.endswith("? Help"), f"{screen} at {size}: footer cut: {footer!r}"
        missing = [key for key in essential if key not in footer]
        assert not missing, f"{screen} at {size}: {missing} not in {footer!r}"


async def test_help_names_places_and_lists_each_key_once(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("E", "question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "engines view" in text and "everywhere" in text
        assert "Screen" not in text and " App " not in text, text
        rows = [line for line in text.splitlines() if " Back " in line]
        assert len(rows) == 1 and "esc, backspace" in rows[0], rows
        assert "Filter (/)" not in text  # the engines view filters nothing
        await pilot.press("escape", "escape", "enter", "question_mark")  # the step screen filters its rows
        await settle(pilot)
        text = screen_text(app)
        assert "Filter (/)" in text and text.count(" Back ") == 1, text


def test_the_key_list_aligns_its_columns_and_wraps_a_long_action_under_itself() -> None:
    import io

    from rich.console import Console

    from miles_tui.tui.screens.help_screen import GAP, KeyList

    rows = [("a", "Advisories", "overview"), ("/ s o g", "Keys of a step's view: open one with enter first", "tables")]
    keys = KeyList(rows)

    def lines(width: int) -> list[str]:
        console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
        console.print(keys)
        return console.file.getvalue().splitlines()  # type: ignore[attr-defined]

    wide = lines(100)
    assert len(wide) == 3 and [line.split()[0] for line in wide] == ["key", "a", "/"]
    assert len({line.rstrip().rfind(" ") for line in wide}) == 1, wide  # "where" starts in one column
    narrow = lines(50)
    assert all(len(line) <= 50 for line in narrow), narrow
    action_at = len("/ s o g") + GAP
    continued = [line for line in narrow if not line[:action_at].strip()]
    assert continued and all(line[action_at] != " " for line in continued), narrow
    assert " ".join(" ".join(line[action_at:].split()) for line in narrow[2:]).startswith("Keys of a step's view")


def test_a_long_glossary_meaning_wraps_under_itself_never_under_the_terms() -> None:
    """At 80x24 almost every meaning wrapped back to column 0, under the terms a reader scans."""
    from rich.console import Console

    from miles_tui.tui.screens.help_screen import GlossaryList
    from miles_tui.tui.views.glossary import GLOSSARY

    glossary = GlossaryList(GLOSSARY)
    console = Console(width=60, record=True, color_system=None)
    console.print(glossary)
    lines = console.export_text().splitlines()
    terms = {term for term, _meaning in GLOSSARY}
    assert len(lines) > len(GLOSSARY)  # some meanings did wrap at 60 columns
    for line in lines:
        head = line[: glossary.width].rstrip()
        assert head in terms or head == "", line
