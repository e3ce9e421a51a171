"""`miles-tui --demo` in a real terminal leaves nothing behind: the temp run (12-21 MB each) and its
writer are gone after `q`, and after the monitor is killed outright; `--demo DIR` is kept."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
REPO = Path(__file__).resolve().parents[2]


def _capture(session: str) -> str:
    result = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=False)
    return result.stdout


def _wait(condition: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} never happened")


def _writers(marker: Path) -> list[int]:
    """Pids of demo writers whose command line names ``marker`` (a folder unique to this test)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "miles_tui.core.synth.demo" in command and str(marker) in command:
            pids.append(int(proc.name))
    return pids


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A tmux session name and a private TMPDIR; the session is killed afterwards."""
    session = f"miles-tui-demo-test-{uuid.uuid4().hex[:8]}"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    yield session, tmp
    subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)


def _start(session: str, tmp: Path, cache: Path, *args: str, exec_: bool = False) -> None:
    command = f"{'exec ' if exec_ else ''}{sys.executable} -m miles_tui.tui.cli --demo {' '.join(args)} --poll 1"
    script = tmp.parent / "run.sh"
    script.write_text(
        f"cd {REPO}\nexport TMPDIR={tmp} MILES_TUI_CACHE_DIR={cache}\n{command}\necho EXITED-$?\nsleep 30\n"
    )
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "30", f"bash {script}"], check=True, env=env
    )


def test_quitting_a_demo_deletes_its_temp_run_and_stops_its_writer(terminal: tuple[str, Path]) -> None:
    session, tmp = terminal
    _start(session, tmp, tmp.parent / "cache")
    _wait(lambda: "LIVE" in _capture(session), "the demo overview")
    [folder] = list(tmp.iterdir())
    assert (folder / "run" / "rollout_data").is_dir() and _writers(folder)
    subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
    _wait(lambda: "EXITED-" in _capture(session), "the monitor's exit")
    screen = _capture(session)
    assert "EXITED-0" in screen and "Traceback" not in screen
    assert list(tmp.iterdir()) == [] and _writers(folder) == []


def test_a_killed_monitor_leaves_its_writer_to_delete_the_temp_run(terminal: tuple[str, Path]) -> None:
    session, tmp = terminal
    _start(session, tmp, tmp.parent / "cache", exec_=True)
    _wait(lambda: "LIVE" in _capture(session), "the demo overview")
    [folder] = list(tmp.iterdir())
    monitor = int(subprocess.check_output(["tmux", "display", "-p", "-t", session, "#{pane_pid}"], text=True))
    os.kill(monitor, signal.SIGKILL)  # no finally runs: the writer notices its parent is gone
    _wait(lambda: not folder.exists() and not _writers(folder), "the orphaned writer's cleanup", timeout=30)


def test_a_demo_dir_given_by_the_user_is_kept(terminal: tuple[str, Path]) -> None:
    session, tmp = terminal
    target = tmp.parent / "mine"
    _start(session, tmp, tmp.parent / "cache", str(target))
    _wait(lambda: "LIVE" in _capture(session), "the demo overview")
    subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
    _wait(lambda: "EXITED-" in _capture(session), "the monitor's exit")
    assert "EXITED-0" in _capture(session) and _writers(target) == []
    assert (target / "rollout_data").is_dir() and list(tmp.iterdir()) == []
