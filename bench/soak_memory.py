"""Where the demo soak's memory goes: RSS retained per new step, with telemetry followed and without.

`python bench/soak_memory.py [--seconds 300] [--interval 2]`

The app runs headless (Pilot) over a live demo run (a step every --interval seconds, each with
~30 s of telemetry: 65 phase records and 48 GPU samples). RSS is read per step from the moment 35
steps are visible, twice: once as the app runs, once with the telemetry frozen after its first poll
(the step files still followed). At the end glibc's free memory is handed back (malloc_trim) so the
figure is what is held, not what the allocator keeps for reuse. The difference between the two runs
is what following the telemetry costs per step.

Goal (issue 13, through bench/soak.py): RSS after the first 5 minutes of a 30-minute demo soak grows
<= 10 %; at ~73 MB and ~12 steps a minute that is a budget of about 24 KB per step.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BUDGET_KB_PER_STEP = 24.0
FROM_STEPS = 35


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _trim() -> None:
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to hand back
        ctypes.CDLL("libc.so.6").malloc_trim(0)


async def _soak(root: Path, seconds: float, interval: float, telemetry: bool) -> tuple[int, float]:
    """(steps added after FROM_STEPS, MB retained over them)."""
    from miles_tui.tui.app import make_app

    run = root / ("with" if telemetry else "without")
    writer = subprocess.Popen(
        [sys.executable, "-m", "miles_tui.core.synth.demo", str(run), "--initial", "6", "--interval", str(interval),
         "--max-steps", "5000"],
        stdout=subprocess.DEVNULL, cwd=REPO,
    )  # fmt: skip
    try:
        time.sleep(3)
        app = make_app(run)
        if not telemetry:
            first = app.watcher.streams.poll_blocking(time.time())
            app.watcher.streams.poll_blocking = lambda now: first  # type: ignore[method-assign]
        async with app.run_test(size=(120, 40)):
            start = time.monotonic()
            base: tuple[int, float] | None = None
            while time.monotonic() - start < seconds:
                await asyncio.sleep(5)
                if base is None and len(app.model.train) >= FROM_STEPS:
                    _trim()
                    base = (len(app.model.train), _rss_mb())
            _trim()
            end = (len(app.model.train), _rss_mb())
    finally:
        writer.terminate()
        writer.wait()
    if base is None:
        raise SystemExit(f"fewer than {FROM_STEPS} steps in {seconds:g} s: give more --seconds")
    return end[0] - base[0], end[1] - base[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="each of the two runs")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between demo steps")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="miles-tui-soak-memory-") as tmp:
        os.environ["MILES_TUI_CACHE_DIR"] = str(Path(tmp) / "cache")
        figures = {t: asyncio.run(_soak(Path(tmp), args.seconds, args.interval, t)) for t in (True, False)}
    print(f"\nmiles-tui soak memory: headless demo, a step every {args.interval:g} s, RSS after malloc_trim")
    for telemetry, (steps, grown) in figures.items():
        per_step = grown * 1024 / max(steps, 1)
        name = "as the app runs" if telemetry else "telemetry frozen after its first poll"
        verdict = "PASS" if per_step <= BUDGET_KB_PER_STEP else "FAIL"
        print(f"  {name:<40} {per_step:7.1f} KB per step over {steps} steps   "
              f"goal <= {BUDGET_KB_PER_STEP:g} KB   {verdict}")  # fmt: skip
    (s1, g1), (s0, g0) = figures[True], figures[False]
    print(f"  following the telemetry costs {g1 * 1024 / max(s1, 1) - g0 * 1024 / max(s0, 1):.1f} KB per step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
