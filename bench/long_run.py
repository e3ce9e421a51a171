"""Long-run benchmark: 3,000 small steps (8 samples each) through the real app in tmux, figures beside goals.

`python bench/long_run.py [--dir DIR] [--steps 3000]`

1. cold (empty summary cache): the newest step's figures on screen after start (<= 3 s); key latency
   through tmux while the rest back-fills (<= 0.5 s: j, k, Enter to open the step, Escape back, in turn,
   each timed from send-keys to a changed capture-pane); every step summarized (<= 60 s); idle CPU after
   (<= 2 %, the app's and its helpers' own CPU time from /proc, not the box's load);
2. warm (the cache from 1): every step summarized (<= 5 s);
3. the summary cache in-process: one cached summary read back (well under 1 ms; the JSON cache took
   ~26 ms through `Run.summary`, most of it a directory listing per step), and its size per sample row
   (the JSON cache: 311 B), for these 8-sample steps and for one 8,192-sample step.

Runs are built with the project's own writer and kept in --dir so reruns skip the build.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.terminal import TmuxApp  # noqa: E402
from bench.ui import _age, _write  # noqa: E402

COLS, ROWS = 160, 48
KEYS = ("j", "k", "Enter", "Escape")
"""Sent in turn while the back-fill runs: the cursor down and up, open the step under it, and back."""
IDLE_SECONDS = 60.0


def build(root: Path, steps: int) -> Path:
    run = root / f"run{steps}"
    if not (run / "rollout_data" / f"{steps - 1}.pt").exists():
        print(f"building a {steps}-step run (8 samples a step) in {run} ...", flush=True)
        for rid in range(steps):
            _write(run, rid, 8, (16, 64), "dp1 cp1 tp1 pp1")
        _age(run, 3600.0)
    return run


def build_big(root: Path) -> Path:
    run = root / "big8192"
    if not (run / "rollout_data" / "0.pt").exists():
        print(f"building one 8,192-sample step in {run} ...", flush=True)
        _write(run, 0, 8192, (16, 96), "dp2 cp2 tp1 pp1")
        _age(run, 3600.0)
    return run


def _newest_shown(newest: int):  # type: ignore[no-untyped-def]
    row = re.compile(rf"\b{newest}\s+train\s+8\s+-?\d")
    return lambda screen: bool(row.search(screen))


def _backfilled(screen: str) -> bool:
    return "miles-tui" in screen and "summarizing" not in screen


def run_app(run: Path, cache: Path, newest: int, cold: bool) -> dict[str, float | None]:
    figures: dict[str, float | None] = {}
    app = TmuxApp([str(run), "--poll", "2"], env={"MILES_TUI_CACHE_DIR": str(cache)}, cols=COLS, rows=ROWS)
    app.start()
    try:
        figures["newest"] = app.wait_for(_newest_shown(newest), timeout=60)
        latencies: list[float] = []
        by_key: dict[str, list[float]] = {key: [] for key in KEYS}
        if cold:
            for k in range(40):
                if k % len(KEYS) == 0 and "summarizing" not in app.screen():
                    break
                latency = app.key_latency(KEYS[k % len(KEYS)])
                latencies.append(latency if latency is not None else float("inf"))
                by_key[KEYS[k % len(KEYS)]].append(latencies[-1])
                time.sleep(0.3)
        figures["keys_max"] = max(latencies) if latencies else None
        figures["keys_median"] = statistics.median(latencies) if latencies else None
        figures["keys_n"] = float(len(latencies))
        for key, times in by_key.items():
            figures[f"key {key}"] = max(times) if times else None
        app.wait_for(lambda s: "summarizing" in s, timeout=3 if not cold else 10)
        figures["all"] = app.wait_for(_backfilled, timeout=300, every=0.1)
        if cold:
            time.sleep(5)
            first = app.usage()
            time.sleep(IDLE_SECONDS)
            second = app.usage()
            figures["idle_cpu"] = 100 * (second.cpu_s - first.cpu_s) / (second.at - first.at)
            figures["rss"] = second.rss_mb
    finally:
        app.stop()
    return figures


def cache_figures(run: Path, cache: Path) -> tuple[float, float, float, float]:
    """(ms per cached Run.summary_of, ms per load_summary, B per row of the entries, rows) over every step."""
    os.environ["MILES_TUI_CACHE_DIR"] = str(cache)
    from miles_tui.core.dump import Run, RunScanner
    from miles_tui.core.dump.summary_cache import load_summary, summary_path

    reader = Run(run)
    steps = RunScanner(reader.dir).scan(time.time()).steps
    now = time.time()
    for files in steps.values():  # fill the cache (no-op when the app did)
        reader.summary_of(files, now)
    reader = Run(run)  # nothing open: every answer comes from the cache
    start = time.perf_counter()
    summaries = [reader.summary_of(files, now) for files in steps.values()]
    via_run = (time.perf_counter() - start) / len(steps) * 1e3
    start = time.perf_counter()
    for files in steps.values():
        load_summary(reader.path, files)
    loads = (time.perf_counter() - start) / len(steps) * 1e3
    size = sum(summary_path(reader.path, files).stat().st_size for files in steps.values())
    rows = sum(len(s.rows) for s in summaries)
    return via_run, loads, size / rows, rows / len(steps)


def _row(name: str, value: str, goal: str, ok: bool | None) -> None:
    verdict = "" if ok is None else ("PASS" if ok else "FAIL")
    print(f"  {name:<62} {value:>12}   goal {goal:<14} {verdict}")


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "miles-tui-bench-long")
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--no-big", action="store_true", help="skip the 8,192-sample step")
    args = parser.parse_args()
    run = build(args.dir, args.steps)
    big = None if args.no_big else build_big(args.dir)
    newest = args.steps - 1
    with tempfile.TemporaryDirectory(prefix="miles-tui-long-cache-") as tmp:
        cache = Path(tmp)
        cold = run_app(run, cache, newest, cold=True)
        warm = run_app(run, cache, newest, cold=False)
        via_run, loads, per_row, rows = cache_figures(run, cache)
        big_figures = cache_figures(big, cache) if big is not None else None

    print(f"\nmiles-tui long-run benchmark: {args.steps:,} steps of 8 samples, tmux {COLS}x{ROWS}, "
          f"{os.cpu_count()} cores")  # fmt: skip
    _row("cold: newest step's figures on screen after start", _s(cold["newest"]), "<= 3 s",
         cold["newest"] is not None and cold["newest"] <= 3)  # fmt: skip
    keys = cold["keys_max"]
    _row(f"cold: key latency while back-filling (max of {cold['keys_n']:.0f}, median "
         f"{_s(cold['keys_median'])})", _s(keys), "<= 0.5 s", None if keys is None else keys <= 0.5)  # fmt: skip
    _row("cold: every step summarized (header back-fill gone)", _s(cold["all"]), "<= 60 s",
         cold["all"] is not None and cold["all"] <= 60)  # fmt: skip
    idle = cold["idle_cpu"]
    for key in KEYS:
        worst = cold[f"key {key}"]
        _row(f"  max of {key}", _s(worst), "<= 0.5 s", None if worst is None else worst <= 0.5)
    _row(f"idle CPU afterwards ({IDLE_SECONDS:g} s, app + helpers)", "?" if idle is None else f"{idle:.2f} %", "<= 2 %",
         idle is not None and idle <= 2)  # fmt: skip
    _row("  RSS afterwards", f"{cold['rss']:.0f} MB", "(reference)", None)
    _row("warm: newest step's figures on screen after start", _s(warm["newest"]), "<= 3 s",
         warm["newest"] is not None and warm["newest"] <= 3)  # fmt: skip
    _row("warm: every step summarized", _s(warm["all"]), "<= 5 s", warm["all"] is not None and warm["all"] <= 5)
    _row(f"cached summary via Run.summary_of ({rows:.0f} samples)", f"{via_run:.3f} ms", "<< 1 ms (was ~26)",
         via_run < 1)  # fmt: skip
    _row(f"  of which reading the cache entry ({rows:.0f} samples)", f"{loads:.3f} ms", "<< 1 ms", loads < 1)
    _row(f"cache entry per sample row ({rows:.0f} samples)", f"{per_row:.0f} B", "compact (was 311)", per_row < 311)
    if big_figures is not None:
        b_run, b_load, b_row, b_rows = big_figures
        _row(f"cached summary via Run.summary_of ({b_rows:.0f} samples)", f"{b_run:.3f} ms", "(reference)", None)
        _row(f"  of which reading the cache entry ({b_rows:.0f} samples)", f"{b_load:.3f} ms", "(reference)", None)
        _row(f"cache entry per sample row ({b_rows:.0f} samples)", f"{b_row:.0f} B", "compact (was 311)",
             b_row < 311)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
