"""The real app in a real terminal: tmux runs `miles-tui RUN_DIR`, capture-pane reads the screen."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _capture(session: str) -> str:
    result = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=False)
    return result.stdout


def _wait_for(session: str, text: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _capture(session)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; the screen was:\n{screen}")


def test_monitor_in_tmux(golden_copy: Callable[[str], Path], tmp_path: Path) -> None:
    root = golden_copy("degenerate")
    session = f"miles-tui-test-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "run.sh"
    script.write_text(
        f"cd {os.getcwd()}\nexport MILES_TUI_CACHE_DIR={tmp_path / 'cache'}\n"
        f"{sys.executable} -m miles_tui.tui.cli {root} --poll 1\necho EXITED-$?\nsleep 30\n"
    )
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "30", f"bash {script}"], check=True, env=env
    )
    try:
        screen = _wait_for(session, "all_rewards_zero")
        assert "degenerate" in screen and "step 1" in screen
        assert "[WARN]" in screen  # the level reads without colour too
        assert "100%" in screen  # step 1's zero-std group fraction
        subprocess.run(["tmux", "send-keys", "-t", session, "Enter"], check=True)
        screen = _wait_for(session, "16 samples")
        assert "0σ" in screen  # degenerate groups are marked
        subprocess.run(["tmux", "send-keys", "-t", session, "Escape"], check=True)
        _wait_for(session, "all_rewards_zero")
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        screen = _wait_for(session, "EXITED-0")
        assert "Traceback" not in screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)


def test_ctrl_c_quits_with_exit_0_in_a_real_terminal(golden_copy: Callable[[str], Path], tmp_path: Path) -> None:
    root = golden_copy("degenerate")
    session = f"miles-tui-test-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "run.sh"
    script.write_text(
        f"cd {os.getcwd()}\nexport MILES_TUI_CACHE_DIR={tmp_path / 'cache'}\n"
        f"{sys.executable} -m miles_tui.tui.cli {root} --poll 1\necho EXITED-$?\nsleep 30\n"
    )
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "30", f"bash {script}"], check=True, env=env
    )
    try:
        _wait_for(session, "all_rewards_zero")
        subprocess.run(["tmux", "send-keys", "-t", session, "Enter"], check=True)
        _wait_for(session, "16 samples")
        subprocess.run(["tmux", "send-keys", "-t", session, "/", "C-c"], check=True)  # even in the filter box
        screen = _wait_for(session, "EXITED-0")
        assert "Traceback" not in screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)
