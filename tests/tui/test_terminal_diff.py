"""Only changed cells reach the terminal: unit checks of TerminalDiff, and the real app on a pty writing nothing
while its screen does not change."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

from miles_tui.tui.runtime.terminal_diff import TerminalDiff
from miles_tui.tui.runtime.textual_private import ChopsUpdate, LayoutUpdate
from tests.conftest import write_demo_run

CONSOLE = Console(color_system="256", force_terminal=True, width=40)
WIDTH = 40
BLUE = Style(color="white", bgcolor="blue")
BOLD = Style(bold=True, color="white", bgcolor="blue")


def _strip(*parts: tuple[str, Style]) -> Strip:
    segments = [Segment(text, style) for text, style in parts]
    return Strip(segments).extend_cell_length(WIDTH, BLUE)


def _chops(line: Strip, y: int = 0) -> ChopsUpdate:
    """A compositor update of line ``y`` (one widget spanning the width)."""
    chops = [{0: line if row == y else None} for row in range(y + 1)]
    return ChopsUpdate(chops, [(y, 0, WIDTH)], [[WIDTH]] * (y + 1))


def _render(diff: TerminalDiff, line: Strip, y: int = 0) -> str:
    update = diff.update(_chops(line, y), CONSOLE, (WIDTH, 10))
    return "" if update is None else update.render_segments(CONSOLE)


def test_the_same_text_writes_nothing() -> None:
    diff = TerminalDiff()
    line = _strip(("miles-tui ", BOLD), ("step 12  data 3m12s old", BLUE))
    assert "step 12" in _render(diff, line)
    assert _render(diff, line) == ""
    # The same look from other segments and styles with other metadata is the same screen.
    split = _strip(("miles-", BOLD), ("tui ", BOLD + Style(meta={"offset": (1, 0)})), ("step 12  data 3m12s old", BLUE))
    assert _render(diff, split) == ""
    assert diff.skipped == 2


def test_only_the_changed_cells_are_written() -> None:
    diff = TerminalDiff()
    _render(diff, _strip(("miles-tui ", BOLD), ("step 12  data 3m12s old", BLUE)))
    out = _render(diff, _strip(("miles-tui ", BOLD), ("step 12  data 3m14s old", BLUE)))
    assert out.startswith("\x1b[1;28H")  # row 1, the column of the changed digit
    assert "4" in out and "step" not in out and "old" not in out
    assert len(out) < 30


def test_runs_of_one_style_share_one_colour_code() -> None:
    diff = TerminalDiff()
    cells = [(c, BLUE) for c in "abcdefghij"]  # ten segments, one style
    out = _render(diff, _strip(*cells))
    assert out.count("\x1b[") == 2 + 1  # the cursor move, one style, one reset
    assert "abcdefghij" in out


def test_a_wide_character_is_never_split() -> None:
    diff = TerminalDiff()
    _render(diff, _strip(("a漢b", BLUE)))
    out = _render(diff, _strip(("a字b", BLUE)))
    assert out.startswith("\x1b[1;2H") and "字" in out  # from its left half
    out = _render(diff, _strip(("a字c", BLUE)))
    assert out.startswith("\x1b[1;4H") and "字" not in out


def test_a_new_screen_is_written_whole_and_a_resize_forgets_the_screen() -> None:
    diff = TerminalDiff()
    line = _strip(("hello", BLUE))
    _render(diff, line)
    layout = LayoutUpdate([[line]], Region(0, 0, WIDTH, 1))
    full = diff.update(layout, CONSOLE, (WIDTH, 10), screen="step screen")
    assert full is not None and "hello" in full.render_segments(CONSOLE)  # the terminal may hold anything
    assert diff.update(layout, CONSOLE, (WIDTH, 10), screen="step screen") is None  # a relayout: diffed
    assert _render(diff, line) == ""
    resized = diff.update(_chops(line), CONSOLE, (WIDTH + 1, 10))
    assert resized is not None and "hello" in resized.render_segments(CONSOLE)


def test_the_real_app_writes_nothing_while_its_screen_stays_the_same(tmp_path: Path) -> None:
    """A finished run on a pty, polled twice a second: after the first paint, not a byte (the header
    alone was rewritten about once a second before)."""
    from bench.terminal import PtyApp

    run = write_demo_run(tmp_path / "run", 3)
    stamp = time.time() - 3 * 86400 - 10  # the header shows "3d00h": it changes once an hour
    for path in run.rglob("*"):
        os.utime(path, (stamp, stamp))
    app = PtyApp([str(run), "--poll", "0.5"], env={"MILES_TUI_CACHE_DIR": str(tmp_path / "cache")})
    app.start()
    try:
        app.wait_for_output(quiet=3.0, timeout=60)
        before = app.written
        time.sleep(4)  # eight polls, each with its step and telemetry reads
        written = app.written - before
    finally:
        status = app.stop()
    assert before > 1000, "the app never drew its screen"
    assert written == 0, f"{written} bytes written while nothing changed"
    assert status == 0 or sys.platform != "linux"
