"""Start the live monitor from the command line, optionally on a demo run written beside it.

``--demo`` without DIR writes into a fresh temp folder (``miles-tui-demo-*``
holding ``run/`` and the writer's log) that is deleted on exit: the writer is
stopped first, then the folder removed. Should the monitor die without
cleaning up (SIGKILL, a closed SSH session), the writer notices its parent is
gone and deletes the folder itself. ``--demo DIR`` is never deleted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from miles_tui.core.base.errors import RunDirError
from miles_tui.core.synth import claim_demo_dir, make_temp_demo, remove_temp_demo
from miles_tui.tui.formatting import duration

DEMO_MAX_STEPS = 500
"""A demo left running adds a step every 5 s; stop at ~40 minutes of steps (about 150 MB)."""
WRITER_STOP_SECONDS = 10.0
"""How long a terminated demo writer may take to exit before it is killed."""


def _start_demo(run_dir: Path, log_path: Path, temporary: Path | None) -> subprocess.Popen[bytes]:
    """Start the writer into ``run_dir``; ``temporary``: the folder it deletes should the monitor die."""
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "miles_tui.core.synth.demo",
        str(run_dir),
        "--initial",
        "6",
        "--interval",
        "5",
        "--max-steps",
        str(DEMO_MAX_STEPS),
        "--parent-pid",
        str(os.getpid()),
    ]
    if temporary is not None:
        command += ["--delete-with-parent", str(temporary)]
    with open(log_path, "ab") as log:  # the child keeps its own descriptor
        return subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)


def _wait_for_steps(run_dir: Path, writer: subprocess.Popen[bytes], log_path: Path, count: int, timeout: float) -> None:
    """Block until the demo writer has made ``count`` steps visible, so the monitor never opens empty."""
    from miles_tui.core.dump import RunDir

    deadline = time.monotonic() + timeout
    run = RunDir(run_dir)
    while time.monotonic() < deadline:
        if len(run.step_ids(time.time()).train) >= count:
            return
        if writer.poll() is not None:
            raise RunDirError(f"the demo writer stopped (exit {writer.returncode}); see its log {log_path}", run_dir)
        time.sleep(0.2)
    raise RunDirError(f"the demo writer made no {count} steps in {duration(timeout)}; see its log {log_path}", run_dir)


def _stop(writer: subprocess.Popen[bytes]) -> None:
    """Terminate the writer and wait until it has exited (killed if it lingers), so nothing writes after."""
    if writer.poll() is not None:
        return
    writer.terminate()
    try:
        writer.wait(WRITER_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        writer.kill()
        writer.wait()


def _deep_link(args: argparse.Namespace, run_dir: Path | str) -> tuple[int, bool, int | None] | None:
    """Where ``--step N [--eval] [--sample I]`` asks the monitor to open; checked before it starts."""
    from miles_tui.core.dump import Run

    if args.step is None:
        return None
    Run(run_dir).locate(args.step, args.eval, args.sample, time.time())
    return args.step, args.eval, args.sample


def run_monitor(args: argparse.Namespace) -> int:
    """Open the monitor on RUN_DIR (or on a fresh demo run); returns the exit status."""
    from miles_tui.tui.app import make_app

    writer = None
    temporary: Path | None = None
    run_dir = args.run_dir
    if args.demo is not None:
        if args.demo:
            run_dir = Path(args.demo)
            claim_demo_dir(run_dir)
            log_path = run_dir.parent / f".{run_dir.name}.demo.log"
        else:
            temporary = make_temp_demo()
            run_dir, log_path = temporary / "run", temporary / "demo.log"
    try:
        if args.demo is not None:
            writer = _start_demo(run_dir, log_path, temporary)
            _wait_for_steps(run_dir, writer, log_path, count=2, timeout=90.0)
            removed = " (a temporary folder, removed when the monitor exits)" if temporary is not None else ""
            print(f"miles-tui: demo run in {run_dir}{removed}", file=sys.stderr)
        start = _deep_link(args, run_dir)
        _follow_the_terminal_size()
        app = make_app(
            run_dir,
            poll_seconds=max(0.2, float(args.poll)),
            follow=not args.no_follow,
            start=start,
            bell=not args.no_bell,
            low_mfu_threshold=getattr(args, "low_mfu_threshold", None),
            baselines=getattr(args, "baseline", ()),
        )
        app.run()
    except BaseException:
        if writer is not None and writer.poll() is not None and writer.returncode != 0:
            temporary = None  # the writer failed: keep its log for the message that names it
        raise
    finally:
        if writer is not None:
            _stop(writer)
        if temporary is not None:
            _remove(temporary)
    if args.demo:
        print(f"miles-tui: the demo run is kept in {run_dir} (delete it when done)", file=sys.stderr)
    return int(app.return_code or 0)


def _follow_the_terminal_size() -> None:
    """Drop COLUMNS and LINES from the environment when the terminal can say its size.

    Textual sizes the screen with ``shutil.get_terminal_size``, which takes those variables first: with
    them exported (``export COLUMNS``, or a pane started by a program that set them), the monitor drew at
    their size in a bigger pane and kept it through every resize.
    """
    try:
        os.get_terminal_size(sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
    except (OSError, ValueError):
        return  # no terminal to ask: the variables are all there is
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


def _remove(folder: Path) -> None:
    try:
        remove_temp_demo(folder)
    except OSError as err:
        print(f"miles-tui: could not delete the demo run {folder} ({err}); delete it by hand", file=sys.stderr)
