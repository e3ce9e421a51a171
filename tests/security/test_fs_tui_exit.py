"""The live monitor in a real terminal (tmux) over hostile files (issue 9.3): a FIFO step is named
on screen, and `q` quits even while a read of the run is stuck in the kernel."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from conftest import EPOCH
from hostile_fs import REPO, age, fifo

from tests.tmux_term import Tmux


def _start(tmux: Tmux, folder: Path, python_code: str) -> None:
    """The Python script ``python_code`` (which starts the monitor) in ``tmux``."""
    main = folder / "main.py"
    main.write_text(python_code)
    tmux.start(
        f"cd {REPO}\nexport MILES_TUI_CACHE_DIR={folder / 'cache'} TERM=xterm-256color\nunset NO_COLOR\n"
        f"{sys.executable} {main}",
        width=160,
        height=40,
    )


def test_a_fifo_step_is_named_on_screen_and_q_quits(demo_run: Path, tmux: Tmux, tmp_path: Path) -> None:
    fifo(demo_run / "rollout_data" / "4.pt")
    age(demo_run / "rollout_data" / "4.pt", EPOCH - 600)
    _start(
        tmux,
        tmp_path,
        f"import sys\nfrom miles_tui.tui.cli import main\nsys.exit(main([{str(demo_run)!r}, '--poll', '1']))\n",
    )
    tmux.wait_for("FIFO")  # the advisory names the file and what it is
    tmux.keys("q")
    assert "Traceback" not in tmux.wait_for("EXITED-0")


def test_q_quits_while_a_read_of_the_run_is_stuck(demo_run: Path, tmux: Tmux, tmp_path: Path) -> None:
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
    _start(tmux, tmp_path, code)
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), tmux.screen()
    time.sleep(0.5)
    tmux.keys("q")
    assert "Traceback" not in tmux.wait_for("EXITED-0", timeout=20)
