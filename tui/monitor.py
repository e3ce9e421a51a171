"""Start the live monitor from the command line, optionally on a demo run written beside it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from miles_tui.core.errors import RunDirError

DEMO_MAX_STEPS = 500
"""A demo left running adds a step every 5 s; stop at ~40 minutes of steps (about 150 MB)."""


def _start_demo(target: str) -> tuple[Path, subprocess.Popen[bytes]]:
    run_dir = Path(target) if target else Path(tempfile.mkdtemp(prefix="miles-tui-demo-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    log = open(run_dir.parent / f".{run_dir.name}.demo.log", "ab")  # noqa: SIM115 - lives as long as the writer
    writer = subprocess.Popen(
        [
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
        ],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    _wait_for_steps(run_dir, writer, count=2, timeout=90.0)
    return run_dir, writer


def _wait_for_steps(run_dir: Path, writer: subprocess.Popen[bytes], count: int, timeout: float) -> None:
    """Block until the demo writer has made ``count`` steps visible, so the monitor never opens empty."""
    from miles_tui.core.dump.run_dir import RunDir

    deadline = time.monotonic() + timeout
    run = RunDir(run_dir)
    while time.monotonic() < deadline:
        if len(run.step_ids(time.time()).train) >= count:
            return
        if writer.poll() is not None:
            raise RunDirError(
                f"the demo writer stopped (exit {writer.returncode}); see its log beside the run", run_dir
            )
        time.sleep(0.2)


def _deep_link(args: argparse.Namespace, run_dir: Path | str) -> tuple[int, bool, int | None] | None:
    """Where ``--step N [--eval] [--sample I]`` asks the monitor to open; checked before it starts."""
    from miles_tui.core.dump.run import Run

    if args.step is None:
        return None
    Run(run_dir).locate(args.step, args.eval, args.sample, time.time())
    return args.step, args.eval, args.sample


def run_monitor(args: argparse.Namespace) -> int:
    """Open the monitor on RUN_DIR (or on a fresh demo run); returns the exit status."""
    from miles_tui.tui.app import make_app

    writer = None
    run_dir = args.run_dir
    if args.demo is not None:
        run_dir, writer = _start_demo(args.demo)
        print(f"miles-tui: demo run in {run_dir}", file=sys.stderr)
    start = _deep_link(args, run_dir)
    try:
        app = make_app(
            run_dir,
            poll_seconds=max(0.2, float(args.poll)),
            follow=not args.no_follow,
            start=start,
            bell=not args.no_bell,
            low_mfu_threshold=getattr(args, "low_mfu_threshold", None),
        )
        app.run()
    finally:
        if writer is not None:
            writer.terminate()
    if args.demo is not None:
        print(f"miles-tui: the demo run is kept in {run_dir} (delete it when done)", file=sys.stderr)
    return int(app.return_code or 0)
