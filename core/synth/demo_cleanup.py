"""The temp folder of ``miles-tui --demo``: made here, deleted here, and no other folder ever.

Contract: :func:`make_temp_demo` creates ``miles-tui-demo-*`` in the temp dir
with a marker file inside; :func:`remove_temp_demo` deletes a folder only when
it has that name and that marker (a user's ``--demo DIR`` never has the
marker, so it raises instead). The monitor deletes the folder after stopping
the demo writer; the writer calls :func:`delete_when_orphaned` so that the
folder goes too when the monitor dies without cleaning up (SIGKILL, a closed
SSH session).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from miles_tui.core.base.errors import RunDirError

TEMP_DEMO_PREFIX = "miles-tui-demo-"
"""Name prefix of the temp folders ``miles-tui --demo`` makes."""
MARKER = ".miles-tui-temp-demo"
"""The file that marks a folder as one :func:`make_temp_demo` made (and so deletable)."""


def make_temp_demo() -> Path:
    """A fresh, marked ``miles-tui-demo-*`` folder in the temp dir."""
    folder = Path(tempfile.mkdtemp(prefix=TEMP_DEMO_PREFIX))
    (folder / MARKER).write_text("made by miles-tui --demo; deleted when the demo exits\n")
    return folder


def remove_temp_demo(folder: Path) -> None:
    """Delete a folder :func:`make_temp_demo` made; ValueError for any other (never deleted)."""
    folder = Path(folder)
    if not folder.exists():
        return  # already gone (the other side of the monitor/writer pair deleted it)
    if not folder.name.startswith(TEMP_DEMO_PREFIX) or not (folder / MARKER).is_file():
        raise ValueError(f"{folder} is not a temp demo folder; refusing to delete it")
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        return


def delete_when_orphaned(folder: Path, parent_alive: Callable[[], bool], sleep: Callable[[float], None]) -> None:
    """Wait until the monitor is gone, then delete its temp demo folder (if it did not already)."""
    while parent_alive():
        sleep(1.0)
    remove_temp_demo(folder)


DEMO_MARKER = ".miles-tui-demo"
"""A file the demo writes into its folder: a later ``--demo DIR`` may add steps to that folder, and to no other."""


def claim_demo_dir(run_dir: Path) -> None:
    """Make ``run_dir`` the demo's folder, or refuse (RunDirError) one that holds files the demo did not write:
    ``--demo DIR`` on a copy of a real run used to add synthetic steps to it and append to its metrics.jsonl."""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError("not a folder: give --demo a new or empty folder", run_dir)
    if run_dir.is_dir() and any(run_dir.iterdir()) and not (run_dir / DEMO_MARKER).is_file():
        raise RunDirError(
            "it already holds files the demo did not write (a real run?); --demo writes synthetic steps "
            "into its folder, so give it a new or empty folder (or open the run with `miles-tui RUN_DIR`)",
            run_dir,
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / DEMO_MARKER).write_text("written by miles-tui --demo: a later --demo on this folder adds steps\n")
