"""Quitting is final: keys typed right behind ``q`` never mount a screen into an app being torn down."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual import events

from miles_tui.tui.app import make_app
from tests.conftest import EPOCH
from tests.tmux_term import Tmux

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("second", ["u", "m", "enter", "question_mark"])
async def test_key_typed_right_behind_q_is_dropped(demo_run: Path, second: str) -> None:
    """``q`` then ``u`` (``m``, ``enter`` ...) arriving together, as a terminal delivers fast typing."""
    app = make_app(demo_run, poll_seconds=3600, clock=lambda: EPOCH)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        driver = app._driver
        assert driver is not None
        for key in ("q", second):  # back to back, no pause: both are queued before q is handled
            driver.send_message(events.Key(key, key if len(key) == 1 else None))
        await pilot.pause()
    assert app.return_code == 0


async def test_no_screen_is_pushed_once_exit_has_begun(demo_run: Path) -> None:
    """A push from a worker or timer that lands after q is refused, not mounted mid-teardown."""
    from miles_tui.tui.screens.help_screen import HelpScreen

    app = make_app(demo_run, poll_seconds=3600, clock=lambda: EPOCH)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        depth = len(app.screen_stack)
        app.exit()
        app.push_screen(HelpScreen(app.screen))
        assert len(app.screen_stack) == depth
        assert not await app.run_action("metrics")
    assert app.return_code == 0


@pytest.mark.parametrize("second", ["u", "m", "Enter"])
def test_typing_q_and_a_key_at_once_in_a_terminal_exits_cleanly(
    demo_run: Path, tmux: Tmux, tmp_path: Path, second: str
) -> None:
    """The real thing: tmux types ``q`` and a second key in one write, as a fast typist does."""
    tmux.start_cli(demo_run, "--no-follow", width=140, height=40)
    tmux.wait_for("advisories")
    time.sleep(1.0)
    tmux.keys("q", second)  # one write: both keys arrive together
    screen = tmux.wait_for("EXITED-")
    assert "EXITED-0" in screen and "Traceback" not in screen and "NoMatches" not in screen
