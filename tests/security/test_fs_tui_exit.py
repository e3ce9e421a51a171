"""The live monitor in a real terminal (tmux) over hostile files (issue 9.3): a FIFO step is named
on screen, and `q` quits even while a read of the run is stuck in the kernel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EPOCH
from hostile_fs import REPO, age, fifo

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _screen(session: str) -> str:
    result = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=False)
    return result.stdout


def _wait_for(session: str, text: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _screen(session)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; the screen was:\n{screen}")


class Terminal:
    """One tmux session running a Python script that starts the monitor; killed when the test ends."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.session = f"miles-tui-fs-{uuid.uuid4().hex[:8]}"

    def start(self, python_code: str) -> None:
        main = self.folder / "main.py"
        main.write_text(python_code)
        script = self.folder / "run.sh"
        script.write_text(
            f"cd {REPO}\nexport MILES_TUI_CACHE_DIR={self.folder / 'cache'}\n"
            f"{sys.executable} {main}\necho EXITED-$?\nsleep 60\n"
        )
        env = {**os.environ, "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        command = ["tmux", "new-session", "-d", "-s", self.session, "-x", "160", "-y", "40", f"bash {script}"]
        subprocess.run(command, check=True, env=env)

    def press(self, key: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.session, key], check=True)

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        return _wait_for(self.session, text, timeout)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    yield term
    subprocess.run(["tmux", "kill-session", "-t", term.session], check=False, capture_output=True)


def test_a_fifo_step_is_named_on_screen_and_q_quits(demo_run: Path, terminal: Terminal) -> None:
    fifo(demo_run / "rollout_data" / "4.pt")
    age(demo_run / "rollout_data" / "4.pt", EPOCH - 600)
    terminal.start(
        f"import sys\nfrom miles_tui.tui.cli import main\nsys.exit(main([{str(demo_run)!r}, '--poll', '1']))\n"
    )
    terminal.wait_for("FIFO")  # the advisory names the file and what it is
    terminal.press("q")
    assert "Traceback" not in terminal.wait_for("EXITED-0")


def test_q_quits_while_a_read_of_the_run_is_stuck(demo_run: Path, terminal: Terminal, tmp_path: Path) -> None:
    """A read that never returns (a hung network mount) must not hold up quitting."""
    marker = tmp_path / "stuck"
    code = (
        "import sys, threading\n"
        "from pathlib import Path\n"
        "import miles_tui.core.dump.run_dir\n"
        "def stuck(file, now):\n"
        f"    Path({str(marker)!r}).write_text('x')\n"
        "    threading.Event().wait()  # like a read(2) on a dead NFS server\n"
        "miles_tui.core.dump.run_dir.RunDir.load = staticmethod(stuck)\n"
        "from miles_tui.tui.cli import main\n"
        f"sys.exit(main([{str(demo_run)!r}, '--poll', '1']))\n"
    )
    terminal.start(code)
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), _screen(terminal.session)
    time.sleep(0.5)
    terminal.press("q")
    assert "Traceback" not in terminal.wait_for("EXITED-0", timeout=20)
