"""Bytes the real app writes to its terminal per minute, beside the goals.

`python bench/terminal_bytes.py [--seconds 60]`

The app runs on a pseudo-terminal of 120x40 (TERM=xterm-256color); everything it writes is counted
after a warm-up (the first paint and the summaries are not what an idle or live minute costs):
1. idle on a finished run (40 demo steps, last written 10 minutes ago: the header shows m:ss), and
   the same run last written 3 hours ago (the header shows h:mm) -- goal <= 2 KB/min;
2. live on the demo (`--demo`, a step every 5 s) -- goal <= 100 KB/min.
Before this work, measured the same way: 17.9 KB/min idle (a 20-step demo run written a minute
before), 1,074 KB/min live (issue 11 gives 26 KB/min and ~1 MB/min).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.terminal import PtyApp  # noqa: E402

WARM_UP_SECONDS = 20.0


def finished_run(root: Path, steps: int, age_seconds: float) -> Path:
    run = root / f"finished-{int(age_seconds)}"
    subprocess.run(
        [sys.executable, "-m", "miles_tui.core.synth.demo", str(run), "--initial", str(steps),
         "--max-steps", str(steps),
         "--interval", "0"],
        check=True, cwd=REPO, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    stamp = time.time() - age_seconds
    for path in run.rglob("*"):
        os.utime(path, (stamp, stamp))
    return run


def measure(args: list[str], seconds: float, cache: Path) -> tuple[float, float]:
    """(bytes per minute, CPU % of a core) after the warm-up."""
    app = PtyApp(args, env={"MILES_TUI_CACHE_DIR": str(cache)}, cols=120, rows=40)
    app.start()
    try:
        time.sleep(WARM_UP_SECONDS)
        first = app.usage()
        time.sleep(seconds)
        second = app.usage()
    finally:
        app.stop()
    minutes = (second.at - first.at) / 60
    return (second.written - first.written) / minutes, 100 * (second.cpu_s - first.cpu_s) / (second.at - first.at)


def _row(name: str, per_minute: float, cpu: float, goal_kb: float) -> None:
    ok = per_minute <= goal_kb * 1024
    print(f"  {name:<52} {per_minute / 1024:8.2f} KB/min   goal <= {goal_kb:g} KB/min   {'PASS' if ok else 'FAIL'}"
          f"   (CPU {cpu:.2f} %)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured time after the warm-up")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="miles-tui-bytes-") as tmp:
        root = Path(tmp)
        for age, label in ((600.0, "10 minutes"), (3 * 3600.0, "3 hours")):
            run = finished_run(root, 40, age)
            figures = measure([str(run)], args.seconds, root / f"cache-{int(age)}")
            results.append((f"idle, finished run written {label} ago", *figures, 2.0))
        figures = measure(["--demo", str(root / "demo")], args.seconds, root / "cache-demo")
        results.append(("live demo (a new step every 5 s)", *figures, 100.0))
    print(f"\nmiles-tui terminal bytes: 120x40, xterm-256color, {args.seconds:g} s after a "
          f"{WARM_UP_SECONDS:g} s warm-up")  # fmt: skip
    for name, per_minute, cpu, goal in results:
        _row(name, per_minute, cpu, goal)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
