"""`miles-tui --demo` in a real terminal leaves nothing behind: the temp run (12-21 MB each) and its
writer are gone after `q`, and after the monitor is killed outright; `--demo DIR` is kept."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tmux_term import Tmux

REPO = Path(__file__).resolve().parents[2]


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


def _start(tmux: Tmux, tmp: Path, *args: str, exec_: bool = False) -> None:
    """The demo in ``tmux``, its temporary run under ``tmp`` (TMPDIR)."""
    tmux.start_cli("--demo", *args, "--poll", "1", width=120, height=30, exports={"TMPDIR": tmp}, exec_=exec_)


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """A private TMPDIR for the demo's temporary run."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def test_quitting_a_demo_deletes_its_temp_run_and_stops_its_writer(tmux: Tmux, tmp: Path) -> None:
    _start(tmux, tmp)
    tmux.wait_for("LIVE", timeout=90)
    [folder] = list(tmp.iterdir())
    assert (folder / "run" / "rollout_data").is_dir() and _writers(folder)
    tmux.keys("q")
    screen = tmux.wait_for("EXITED-", timeout=90)
    assert "EXITED-0" in screen and "Traceback" not in screen
    assert list(tmp.iterdir()) == [] and _writers(folder) == []


def test_a_killed_monitor_leaves_its_writer_to_delete_the_temp_run(tmux: Tmux, tmp: Path) -> None:
    _start(tmux, tmp, exec_=True)
    tmux.wait_for("LIVE", timeout=90)
    [folder] = list(tmp.iterdir())
    os.kill(tmux.pane_pid(), signal.SIGKILL)  # no finally runs: the writer notices its parent is gone
    _wait(lambda: not folder.exists() and not _writers(folder), "the orphaned writer's cleanup", timeout=30)


def test_a_demo_dir_given_by_the_user_is_kept(tmux: Tmux, tmp: Path) -> None:
    target = tmp.parent / "mine"
    _start(tmux, tmp, str(target))
    tmux.wait_for("LIVE", timeout=90)
    tmux.keys("q")
    assert "EXITED-0" in tmux.wait_for("EXITED-", timeout=90) and _writers(target) == []
    assert (target / "rollout_data").is_dir() and list(tmp.iterdir()) == []
