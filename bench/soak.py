"""Soak: the real app for a given time, its RSS and CPU over time beside the goals.

`python bench/soak.py demo --minutes 30` (the live demo: a new step every 5 s)
`python bench/soak.py static --minutes 10 [--warm]` (a finished 2,000-step run; --warm: its summaries cached)
`python bench/soak.py unreadable --minutes 5` (20,000 step files that are not torch archives)

The app runs on a pseudo-terminal (120x40) whose output is drained and counted. Every --every
seconds a line gives the monitor's RSS, its CPU use since the last line (the monitor and its helper
processes; not the demo writer) and the bytes it wrote. Goals (issue 13):
- demo: RSS after the first 5 minutes grows <= 10 % (it grew 66 -> 133 MB in 10 minutes);
- static and unreadable: once every step is summarized (or found unreadable), CPU <= 1 % of a core;
- unreadable: one aggregated advisory, not one per step (checked in-process, headless).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.terminal import PtyApp, Usage  # noqa: E402
from bench.ui import _age, _write  # noqa: E402


def build_static(root: Path, steps: int) -> Path:
    run = root / f"static{steps}"
    if not (run / "rollout_data" / f"{steps - 1}.pt").exists():
        print(f"building a {steps}-step run in {run} ...", flush=True)
        for rid in range(steps):
            _write(run, rid, 8, (16, 64), "dp1 cp1 tp1 pp1")
        _age(run, 3 * 3600.0)
    return run


def build_unreadable(root: Path, steps: int) -> Path:
    run = root / f"unreadable{steps}"
    folder = run / "rollout_data"
    if not (folder / f"{steps - 1}.pt").exists():
        print(f"writing {steps} unreadable step files in {run} ...", flush=True)
        folder.mkdir(parents=True, exist_ok=True)
        for rid in range(steps):
            (folder / f"{rid}.pt").write_bytes(b"not a torch.save archive " + os.urandom(40))
        _age(run, 3 * 3600.0)
    return run


def check_advisory(run: Path) -> tuple[int, int, float, str]:
    """Headless: summarize every step as the app does; (advisories, of them about unreadable steps, seconds,
    the first of those)."""
    from miles_tui.core.dump import Run
    from miles_tui.tui.runtime.run_watcher import RunWatcher

    watcher = RunWatcher(Run(run, use_cache=False))
    start = time.perf_counter()
    result = watcher.poll_blocking(time.time())
    while result.pending:
        if not result.more:
            time.sleep(0.05)
        result = watcher.poll_blocking(time.time())
    took = time.perf_counter() - start
    watcher.close()
    unreadable = [a for a in result.advisories if "unreadable" in a.code]
    first = unreadable[0].message if unreadable else "-"
    return len(result.advisories), len(unreadable), took, first


def _steps(run: Path | None) -> int:
    """Train steps written so far (0 when not counted)."""
    folder = None if run is None else run / "rollout_data"
    return 0 if folder is None or not folder.is_dir() else sum(1 for p in folder.iterdir() if p.name[0].isdigit())


def soak(
    args: list[str], minutes: float, every: float, env: dict[str, str], run: Path | None = None
) -> tuple[list[Usage], list[int]]:
    """Readings every ``every`` seconds, and the steps of ``run`` written at each."""
    app = PtyApp(args, env=env, cols=120, rows=40)
    app.start()
    readings = [app.usage()]
    steps = [_steps(run)]
    print(f"  {'min':>6} {'RSS MB':>8} {'CPU %':>7} {'KB written':>11} {'steps':>6}", flush=True)
    try:
        deadline = time.monotonic() + minutes * 60
        while time.monotonic() < deadline:
            time.sleep(min(every, max(deadline - time.monotonic(), 0.1)))
            now = app.usage()
            last = readings[-1]
            cpu = 100 * (now.cpu_s - last.cpu_s) / max(now.at - last.at, 1e-9)
            print(f"  {now.at / 60:6.1f} {now.rss_mb:8.1f} {cpu:7.2f} {(now.written - last.written) / 1024:11.1f} "
                  f"{_steps(run):6d}", flush=True)  # fmt: skip
            readings.append(now)
            steps.append(_steps(run))
    finally:
        app.stop()
    return readings, steps


def _at(readings: list[Usage], minute: float) -> Usage:
    return readings[_index(readings, minute)]


def _index(readings: list[Usage], minute: float) -> int:
    return min(range(len(readings)), key=lambda i: abs(readings[i].at - minute * 60))


def _cpu(a: Usage, b: Usage) -> float:
    return 100 * (b.cpu_s - a.cpu_s) / max(b.at - a.at, 1e-9)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("demo", "static", "unreadable"))
    parser.add_argument("--minutes", type=float, default=None, help="default: 30 demo, 10 static, 5 unreadable")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between readings")
    parser.add_argument("--settle", type=float, default=2.0, help="static/unreadable: minutes before idle is judged")
    parser.add_argument("--steps", type=int, default=None, help="default: 2,000 static, 20,000 unreadable")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "miles-tui-bench-soak")
    parser.add_argument("--warm", action="store_true", help="static: fill the summary cache with a first run")
    args = parser.parse_args()
    advisories: tuple[int, int, float, str] | None = None
    minutes = args.minutes or {"demo": 30.0, "static": 10.0, "unreadable": 5.0}[args.mode]
    with tempfile.TemporaryDirectory(prefix="miles-tui-soak-") as tmp:
        env = {"MILES_TUI_CACHE_DIR": str(Path(tmp) / "cache")}
        if args.mode == "demo":
            target = ["--demo", str(Path(tmp) / "demo")]
        elif args.mode == "static":
            target = [str(build_static(args.dir, args.steps or 2000))]
        else:
            run = build_unreadable(args.dir, args.steps or 20000)
            target = [str(run)]
            advisories = check_advisory(run)
        if args.warm and args.mode != "demo":
            print("\nwarming the summary cache (1 min) ...", flush=True)
            soak(target, 1.0, 60.0, env)
        warm = " (warm cache)" if args.warm and args.mode != "demo" else ""
        print(f"\nmiles-tui soak: {args.mode}{warm}, {minutes:g} min, {os.cpu_count()} cores", flush=True)
        demo_run = Path(tmp) / "demo" if args.mode == "demo" else None
        readings, steps = soak(target, minutes, args.every, env, demo_run)

    end = readings[-1]
    print()
    if args.mode == "demo":
        five = _at(readings, 5.0)
        growth = 100 * (end.rss_mb - five.rss_mb) / five.rss_mb
        added = steps[-1] - steps[_index(readings, 5.0)]
        per_step = (end.rss_mb - five.rss_mb) * 1024 / max(added, 1)
        print(f"  RSS at 5 min {five.rss_mb:.1f} MB, at {end.at / 60:.1f} min {end.rss_mb:.1f} MB: "
              f"{growth:+.1f} %   goal <= +10 %   {'PASS' if growth <= 10 else 'FAIL'}")  # fmt: skip
        print(f"  that is {per_step:.1f} KB per step over the {added} steps written after 5 min "
              "(bench/soak_memory.py: where it goes)")  # fmt: skip
        print(
            f"  CPU over the soak {_cpu(readings[0], end):.2f} % of a core; terminal "
            f"{(end.written - five.written) / 1024 / max((end.at - five.at) / 60, 1e-9):.1f} KB/min after 5 min"
        )
    else:
        settled = _at(readings, args.settle)
        idle = _cpu(settled, end)
        print(f"  CPU after {args.settle:g} min (to {end.at / 60:.1f} min): {idle:.2f} % of a core   goal <= 1 %   "
              f"{'PASS' if idle <= 1 else 'FAIL'}")  # fmt: skip
        print(f"  RSS {end.rss_mb:.1f} MB; terminal {(end.written - settled.written) / 1024:.1f} KB after settling")
    if advisories is not None:
        count, about, took, first = advisories
        ok = about == 1 and first.startswith(f"{args.steps or 20000:,} steps unreadable: first step")
        ok = ok and "; last step " in first
        print(f"  advisories about unreadable steps (in-process, all read in {took:.1f} s): {about} of {count}   "
              f"goal 1 aggregated (first ..., last ...)   {'PASS' if ok else 'FAIL'}\n    {first[:300]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
