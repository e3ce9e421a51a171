"""No string from a run reaches the terminal as a control sequence: export, report, errors, the app, tmux.

The run (:mod:`tests.security.hostile_run`) carries an OSC 52 clipboard
write, an OSC 0 title, a clear-screen, a C1 CSI, a bidi override and a NUL in
every string it has, and its folder name carries a title sequence. Each
output is checked byte for byte: no character a terminal could act on, and
the ESC shown as the visible ``\\x1b``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.color import Color
from textual.pilot import Pilot
from textual.widgets import Static

from miles_tui.core.base.inert_text import inert
from miles_tui.tui.app import MilesApp, make_app
from miles_tui.tui.runtime.inert_line_filter import InertLineFilter
from tests.conftest import EPOCH
from tests.security.hostile_run import EVIL, VISIBLE_ESC, unsafe, write_hostile_run
from tests.tmux_term import Tmux

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_hostile_run(tmp_path_factory.mktemp("escapes"))
    bad = next((root / "train_data").glob("1_*.pt")).with_name("1_999.pt")
    bad.write_bytes(b"not a zip")  # a corrupt file: its warning line names the (hostile) folder
    os.utime(bad, (EPOCH - 600, EPOCH - 600))
    return root


# --- the function ------------------------------------------------------------------------------


def test_every_kind_of_control_is_visible() -> None:
    assert inert("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert inert("\x00\x07\x08\x7f\x85\x9b") == "\\x00\\x07\\x08\\x7f\\x85\\x9b"
    assert inert("\u202eevil\u2066\u200f\u061c") == "\\u202eevil\\u2066\\u200f\\u061c"
    assert inert("line\u2028sep") == "line\\u2028sep"
    assert inert("lone \ud800") == "lone \\ud800"
    assert inert("a\tb\nc\rd") == "a\\tb\\nc\\x0dd"
    assert inert("a\tb\r\nc\rd", multiline=True) == "a\tb\nc\\x0dd"
    text = "plain 日本語 ü 👨\u200d👩\u200d👧 \\x1b C:\\path"
    assert inert(text) is text  # nothing to do: the same object, no copy


@given(st.text())
def test_inert_text_is_inert_idempotent_and_keeps_the_rest(text: str) -> None:
    out = inert(text)
    assert not unsafe(out)
    assert inert(out) == out
    if not unsafe(text):
        assert out == text
    multiline = inert(text, multiline=True)
    assert not unsafe(multiline.replace("\n", "").replace("\t", ""))


def test_the_line_filter_removes_what_a_view_let_through() -> None:
    segments = [
        Segment("ok "),
        Segment("run\x1b]0;PWNED\x07\u202e\ud800", Style(bold=True)),
        Segment("\x1b[1m", None, [(1,)]),  # type: ignore[list-item]
    ]
    out = InertLineFilter().apply(segments, Color(0, 0, 0))
    assert out[0] is segments[0] and out[2] is segments[2]  # clean text and Textual's own controls kept
    assert out[1].text == "run]0;PWNED\ufffd" and out[1].style == Style(bold=True)
    assert cell_len(out[1].text) == cell_len(segments[1].text)  # layout unchanged
    clean = [Segment("nothing to do")]
    assert InertLineFilter().apply(clean, Color(0, 0, 0)) is clean


# --- headless ------------------------------------------------------------------------------------


def _cli(*argv: str, cache: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "MILES_TUI_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "miles_tui.tui.cli", *argv]
    return subprocess.run(command, check=False, capture_output=True, cwd=ROOT, env=env, timeout=180)


def _inert_bytes(data: bytes) -> str:
    text = data.decode("utf-8")  # a lone surrogate could not even have been encoded
    assert not unsafe(text.replace("\n", "")), sorted(set(unsafe(text.replace("\n", ""))))
    return text


def test_json_output_escapes_every_control(hostile: Path, tmp_path: Path) -> None:
    for argv in (
        ("export", str(hostile), "--step", "1"),
        ("export", str(hostile), "--step", "1", "--per-token"),
        ("export", str(hostile), "--step", "1", "--sample", "16", "--tokens"),
        ("export", str(hostile), "--metrics"),
        ("report", str(hostile), "--json"),
    ):
        done = _cli(*argv, cache=tmp_path / "cache")
        assert done.returncode in (0, 1, 2), done.stderr
        assert all(byte < 0x80 for byte in done.stdout)  # ensure_ascii: every non-ASCII character is \u-escaped
        _inert_bytes(done.stdout)
        _inert_bytes(done.stderr)
        document = json.loads(done.stdout)  # and the values are the run's own, exactly
        if argv[-1] == "--tokens" and document["token_text"] is not None:
            assert any(text.endswith(EVIL) for text in document["token_text"])
        if argv[0] == "export" and argv[-1] == "1":
            assert document["samples"][0]["status"] == "completed" + EVIL


def test_csv_report_and_error_lines_are_inert(hostile: Path, tmp_path: Path) -> None:
    done = _cli("export", str(hostile), "--step", "1", "--format", "csv", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert VISIBLE_ESC + "]52;c;" in _inert_bytes(done.stdout)
    warning = _inert_bytes(done.stderr)
    assert "1_999.pt" in warning and "hostile\\x1b]0;PWNED\\x07" in warning  # the folder name, visible
    report = _cli("report", str(hostile), cache=tmp_path / "cache")
    text = _inert_bytes(report.stdout)
    assert f"hostile{VISIBLE_ESC}]52;c;" in text and "\\u202eLIVE\\x00\\ud800" in text
    missing = _cli("export", str(hostile), "--step", "99", cache=tmp_path / "cache")
    assert missing.returncode == 1
    (line,) = _inert_bytes(missing.stderr).splitlines()
    assert "\\x1b]0;PWNED\\x07" in line


# --- the app -------------------------------------------------------------------------------------


def _drawn_lines(app: MilesApp) -> list[str]:
    """The text of every cell of the screen, as the compositor sends it to the terminal."""
    update = app.screen._compositor.render_update(full=True)
    return ["".join(segment.text for strip in line for segment in strip) for line in update.strips]


async def _settle(app: MilesApp, pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


TOUR = [
    ("OverviewScreen", [], "hostile" + VISIBLE_ESC),
    ("StepScreen", ["enter"], "0" + VISIBLE_ESC + "]52"),  # the weight version column
    ("SampleScreen", ["down", "down", "enter"], "completed" + VISIBLE_ESC),  # sample 18: multi-turn
    ("SampleScreen", ["t"], "Checking." + VISIBLE_ESC),  # the conversation tab
    ("SampleScreen", ["t", "h"], VISIBLE_ESC),  # back to the tokens: the token text coloured by |lp diff|
    ("CompareScreen", ["escape", "c"], "hostile" + VISIBLE_ESC),  # on the sample's group, traced
    ("OutlierScreen", ["escape", "escape", "O"], "hostile" + VISIBLE_ESC),  # esc: the groups, esc: the step
    ("MetricsScreen", ["escape", "escape", "escape", "m"], "rollout/raw_reward" + VISIBLE_ESC),
    ("ComputeScreen", ["escape", "u"], "10.0.0.1" + VISIBLE_ESC),
]


@pytest.mark.parametrize("line_filter", [False, True], ids=["views-alone", "with-line-filter"])
async def test_every_screen_shows_run_strings_visible_and_inert(
    hostile: Path, monkeypatch: pytest.MonkeyPatch, line_filter: bool
) -> None:
    """Without the line filter the views alone must make every run string inert; with it, also."""
    if not line_filter:
        monkeypatch.setattr(MilesApp, "get_line_filters", App.get_line_filters)
    app = make_app(hostile, poll_seconds=3600, clock=lambda: EPOCH, use_cache=False)
    async with app.run_test(size=(200, 60)) as pilot:
        await _settle(app, pilot)
        for screen, keys, visible in TOUR:
            await pilot.press(*keys)
            await _settle(app, pilot)
            assert type(app.screen).__name__ == screen
            lines = _drawn_lines(app)
            assert not [line for line in lines if unsafe(line)], screen
            if visible:
                assert any(visible in line for line in lines), (screen, visible)
        await pilot.press("escape", "enter")
        await _settle(app, pilot)
        await pilot.press("y")  # copy the sample's row: the clipboard text is inert too
        await _settle(app, pilot)
        assert app.clipboard and not unsafe(app.clipboard.replace("\n", "").replace("\t", ""))
        assert VISIBLE_ESC in app.clipboard


async def test_the_line_filter_catches_a_string_no_view_made_inert(demo_run: Path) -> None:
    """A widget drawing a raw run string (a view that forgot :func:`inert`) still sends nothing active."""
    app = make_app(demo_run, poll_seconds=3600, clock=lambda: EPOCH)
    async with app.run_test(size=(120, 30)) as pilot:
        await _settle(app, pilot)
        await app.screen.mount(Static(Text("raw\x1b]52;c;SElKQUNLRUQ=\x07\u202e" + EVIL)))
        await _settle(app, pilot)
        lines = _drawn_lines(app)
        assert any("raw]52;c;SElKQUNLRUQ=" in line for line in lines)
        assert not [line for line in lines if unsafe(line)]


# --- a real terminal -----------------------------------------------------------------------------


def test_tmux_gets_no_paste_buffer_no_title_and_a_visible_escape(hostile: Path, tmux: Tmux, tmp_path: Path) -> None:
    """A private tmux server with set-clipboard on: an OSC 52 from the app would create a paste buffer."""
    # set-clipboard: an OSC 52 would make a paste buffer; allow-rename: an OSC 0 would retitle the pane.
    # set-clipboard: an OSC 52 would make a paste buffer; allow-rename: an OSC 0 would retitle the pane.
    tmux.start_cli(hostile, "--no-follow", width=160, height=45, options={"set-clipboard": "on", "allow-rename": "on"})
    tmux.wait_for("advisories")
    # The header names the run once meta.json is read, which may be a poll after the first paint: the
    # name must then show with its escape made visible (written raw, tmux would make a paste buffer of it).
    tmux.wait_for("hostile\\x1b]52;c;SElKQUNLRUQ=")
    for key, expect in (("Enter", "4 groups"), ("Enter", "+ response"), ("t", "conversation")):
        time.sleep(1.0)  # the screen is drawn; let it take focus before the next key
        tmux.keys(key)
        tmux.wait_for(expect)
    for key in ("Escape", "Escape", "m", "Escape", "u", "Escape", "q"):
        tmux.keys(key)
        time.sleep(1.0)
    assert "EXITED-0" in tmux.wait_for("EXITED-")
    assert tmux("list-buffers") == ""
    assert "PWNED" not in tmux("display", "-p", "-t", "t", "#{pane_title}")
