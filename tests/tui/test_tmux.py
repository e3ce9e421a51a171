"""The real app in a real terminal: tmux runs `miles-tui RUN_DIR`, capture-pane reads the screen."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.tmux_term import Tmux


def test_monitor_in_tmux(golden_copy: Callable[[str], Path], tmux: Tmux) -> None:
    tmux.start_cli(golden_copy("degenerate"), "--poll", "1", width=100, height=30)
    # the advisory and the step's row can land in different frames (a loaded box showed the one without the other)
    screen = tmux.wait_until(lambda text: "all_rewards_zero" in text and "100%" in text, "the advisory and the row")
    assert max(map(len, tmux.screen().splitlines())) > 90, "the app did not draw at the pane's width (100)"
    assert "degenerate" in screen and "step 1" in screen
    assert "[WARN]" in screen  # the level reads without colour too
    assert "100%" in screen  # step 1's zero-std group fraction
    tmux.keys("Enter")
    screen = tmux.wait_for("16 samples")
    assert "zero-std" in screen  # degenerate groups are marked
    tmux.keys("Escape")
    tmux.wait_for("all_rewards_zero")
    tmux.keys("q")
    assert "Traceback" not in tmux.wait_for("EXITED-0")


def test_ctrl_c_quits_with_exit_0_in_a_real_terminal(golden_copy: Callable[[str], Path], tmux: Tmux) -> None:
    tmux.start_cli(golden_copy("degenerate"), "--poll", "1", width=100, height=30)
    tmux.wait_for("all_rewards_zero")
    tmux.keys("Enter")
    tmux.wait_for("16 samples")
    tmux.keys("/", "C-c")  # even in the filter box
    assert "Traceback" not in tmux.wait_for("EXITED-0")


def test_exported_columns_and_lines_do_not_pin_the_size(golden_copy: Callable[[str], Path], tmux: Tmux) -> None:
    """Textual sizes the screen by shutil.get_terminal_size, which takes COLUMNS/LINES first: exported, they
    pinned the monitor at 80x24 in a 150x40 pane, through resizes too."""
    tmux.start_cli(golden_copy("degenerate"), width=150, height=40, exports={"COLUMNS": "80", "LINES": "24"})
    tmux.wait_for("all_rewards_zero")
    tmux.wait_until(lambda screen: max(map(len, screen.splitlines())) > 140, "a 150-column screen")
    assert len(tmux.screen().splitlines()) >= 39
    tmux("resize-window", "-t", "t", "-x", "110", "-y", "30")
    tmux.wait_until(lambda screen: 100 < max(map(len, screen.splitlines())) <= 110, "a 110-column screen")
    tmux.keys("q")
    assert "Traceback" not in tmux.wait_for("EXITED-0")
