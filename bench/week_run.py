"""Issue 23: a week of a miles run on 8 nodes x 8 GPUs at miles' own rates, through the real `miles-tui`.

`python bench/week_run.py [--root /tmp/miles-week] [--scale week|month] [--days N] [--repeat 5] [--timeout 120]`
(`--days 1 --repeat 1` for a quick trial; `--scale month --no-processes` keeps a month near 30 GB on disk)

The run is written by bench/week_gen.py (hourly partitions of gpu_util every 1 s per GPU, phases as
open marker + closing record per phase per rank on a 60 s cycle, engine scrapes every 15 s,
gpu_processes every 5 s, a legacy flat gpu_util.jsonl, the newest hour still being written with a
partial last line, AMD records with extra fields, a node that drops out on day 3; see its docstring)
into --root, once: a folder whose marker names the same parameters is reused.

Figures, each beside its goal (2-core box); those that move with load run --repeat times and print
the median and the worst, flagging every run over 1.5x its goal:

| `miles-tui report RUN --json`, cold cache / warm | <= 3 s / <= 1 s, peak RSS <= 500 MB |
| `miles-tui export RUN --metrics` (cold and warm cache) | <= 1 s, <= 300 MB |
| monitor: header with the run's name (meta.json's, not the folder's) | <= 1 s, cold or warm |
| monitor: `u` (GPUs view), last 15 min drawn | <= 1.5 s |
| monitor: `4` (GPUs view, whole run) drawn | <= 10 s cold, <= 1.5 s warm |
| monitor peak RSS (VmHWM), any view | <= 1 GB |
| idle CPU once drawn (the app and its helpers, over --idle s) | <= 1 % |
| `export --metrics` of 2M metrics lines (bench/telemetry_gen.py) beside a day of GPU partitions |
|   <= 0.3x the stdlib json.loads loop over that file cold, <= 0.05x warm |

The command measured is the `miles-tui` installed beside this interpreter (what a person runs), not
this tree's code. "Cold" is an empty MILES_TUI_CACHE_DIR (a fresh one each run); "warm" reuses the
one the first cold run filled. The page cache is not dropped (not ours to drop on a shared box). Peak
RSS of a headless command is its wait4 ru_maxrss (the largest process of its tree); the monitor's is
the VmHWM of its process (its helpers' beside it). The monitor runs in its own tmux server (a socket
under --root) at 160x48; the screen is read with capture-pane every 50 ms; a monitor past --rss-cap
is killed (the box is shared) and its figures say so. `u` is sent once the header shows the run's
name, `4` once the 15 min view is drawn and its idle CPU measured ("drawn": the title names the window,
``GPUs on`` and lane labels are on screen); every wait gives up after --timeout s ("not settled after N s").

Today: `miles-tui` at main 42d6c6b (the reading code of the head), 2026-12-05, 2 cores, partly beside a test
suite (the worst runs below); headless `--repeat 5`, monitor `--repeat 3 --monitor-repeat 3 --idle 30`.

The week run (8 x 8 GPUs, 7 days, 10,078 steps, 5.7 GB, generated in 75 s): gpu_util 35,066,880 records /
3,382 MB in 167 hourly files plus the legacy gpu_util.jsonl (460,800 / 47 MB) (issue: 38.7M / 3.2 GB; 3.2M
fewer here because the dropped node is silent for 4.6 days); phases 3,572,149 / 426 MB (an open marker and a
closing record per phase double the issue's 1.9M); engine_series 2,072,224 / 247 MB (7 metrics a scrape, the
issue counts 6); gpu_processes 14,026,752 / 1,588 MB; metrics.jsonl 20,156 records / 19 MB.

    report --json, cold            2.65 s median (2.61-3.12)           goal 3 s     ok (5.85 s a session before)
    report --json, warm            0.53 s median (0.52-0.54)           goal 1 s     ok
    report peak RSS                172 MB cold, 166 MB warm            goal 500 MB  ok
    export --metrics               cold 0.35 s / 84 MB, warm 0.19 s / 44 MB        goal 1 s, 300 MB: ok
    monitor header (meta's name)   cold 0.56 s (0.50-0.62), warm 0.56 s (0.56-0.57)   goal 1 s  ok
    monitor `u`, 15 min drawn      cold 0.98 s (0.93-1.18), warm 0.38 s (0.33-0.39)   goal 1.5 s  ok
    monitor `4`, whole run         cold 6.03 s (5.66-10.36), warm 0.54 s (0.44-0.59)  goal 10 s / 1.5 s  ok
    monitor VmHWM                  cold 434 MB, warm 418 MB                           goal 1 GB  ok
    idle CPU, once settled         15 min view 0.73 % cold (0.73-1.33), 0.80 % warm (0.73-0.90); whole run
                                   0.53 % cold (0.53-1.89), 0.70 % warm               goal 1 %  ok
    2M metrics lines + a day of    export --metrics 0.39x the json.loads loop cold (0.29-0.47), 0.089x warm
    GPU hours                      (1.84 s, 1.0 s of it writing 1.9 GB of JSON)       goal 0.3x / 0.05x  MISSED

14 days at 64 GPUs today (`--days 14`, headless `--repeat 3`, one cold and one warm monitor session): report
cold 4.75 s (4.45-5.11; 1.8x the week's), warm 0.93 s (1.75x), peak RSS 293 / 286 MB; export --metrics 0.46 s
cold, 0.23 s warm; monitor header 0.56 s, `u` 1.20 s cold / 0.38 s warm, `4` 10.6 s cold (1.8x; 19.1 s before
the whole-run view cached its hours' summaries alone: their columns overflowed the 2 GB cache and were trimmed
again) / 1.24 s warm, VmHWM 718 / 716 MB, idle CPU 1.00 % / 1.03 % with the 15 min view, 0.80 % / 0.70 % with
the whole run.

14 days at 64 GPUs, a session before (`--days 14`, headless `--repeat 3`, one cold and one warm monitor session;
11.2 GB,
68,935,680 gpu_util records, 6,980,967 phases, 4,047,904 engine scrapes): what grows with the run's length.
report cold 8.38 s (7.79-9.07; 1.4x the week's), warm 0.99 s (1.3x), peak RSS 349 / 286 MB (1.5x / 1.7x:
the per-hour digests and summaries held); export --metrics 0.48 s cold, 0.23 s warm, 117 / 51 MB; monitor
header 0.61 s, `u` 1.36 s cold / 0.51 s warm, `4` 17.2 s cold (2.3x the week's: over the 2x asked) / 1.36 s
warm, VmHWM 749 / 744 MB (1.6x), idle CPU 3.0 % / 3.2 % with the 15 min view (2.7x: a poll's cost grew with
the number of hour files, since fixed: a folder is listed again only when it changed; on that run an idle
follower poll went 0.85 -> 0.26 ms and the GPU view's has_news 1.95 -> 0.36 ms; not re-run at 14 days since).

A cold `report` is CPU spent decoding every phases and engine_series hour once (one pool of two processes for
both streams, metrics.jsonl read meanwhile) for the per-hour digests its rules join, saving only the hours'
summaries; the cache makes every later run sub-second. The monitor draws `u` before
that first load ends (the GPU view reads the open phases the last finished poll left, never waiting for
one), and idle CPU is measured once the tree has settled.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import week_gen  # bench/ is this script's folder

COLS, ROWS = 160, 48
FLAG = 1.5
"""A run over this many times its goal is flagged."""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

ISSUE_FIGURES = {
    "gpu_util": "38.7M records, 3.2 GB",
    "phases": "1.9M records, 210 MB",
    "engine_series": "1.9M records, 195 MB",
    "metrics.jsonl": "20k records, 3.6 MB",
}
"""Day 7 of a run on 8 nodes x 8 GPUs, as issue 23 counts it."""

SCALES = {"week": (8, 7.0), "month": (16, 30.0)}
"""--scale -> (nodes, days)."""

REOPEN = """
import sys, time
started = time.perf_counter()
from miles_tui.core.base.memory_settings import no_huge_pages
no_huge_pages()  # as the miles-tui command does at its start
from miles_tui.core.telemetry.streams import DashboardReader
reader = DashboardReader(sys.argv[1], parse_workers=2)
reader.poll()
print(time.perf_counter() - started)
"""
"""A fresh process's first poll of the run's dashboard/ with the cache warm (bench/metrics_load.py's re-open)."""

REFERENCE = """
import json, sys, time
started = time.perf_counter()
with open(sys.argv[1], encoding="utf-8") as handle:
    for line in handle:
        try:
            json.loads(line)
        except ValueError:
            pass
print(time.perf_counter() - started)
"""
"""The stdlib loop the metrics export is held against (bench/metrics_load.py's)."""


def miles_tui() -> list[str]:
    """The `miles-tui` installed beside this interpreter, else the one on PATH."""
    script = Path(sys.executable).with_name("miles-tui")
    found = str(script) if script.is_file() else shutil.which("miles-tui")
    if not found:
        raise SystemExit("miles-tui is not installed")
    return [found]


def child_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NO_COLOR")}
    return {**env, "MILES_TUI_CACHE_DIR": str(cache)}


# -- headless commands ------------------------------------------------------------------------------------


@dataclass
class Timed:
    wall: float | None
    """Seconds; None when it did not finish within the timeout (killed)."""
    rss_mb: float
    status: int | None
    error: str = ""


def timed(argv: Sequence[str], cache: Path, timeout: float, cwd: Path) -> Timed:
    """Run ``argv`` with stdout to /dev/null; wall time, peak RSS (wait4's ru_maxrss), exit status."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=err, env=child_env(cache), cwd=cwd)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                child.kill()
                _, status, usage = os.wait4(child.pid, 0)
                child.returncode = -9
                return Timed(None, usage.ru_maxrss / 1024, None, f"killed after {timeout:g} s")
            time.sleep(0.01)
        wall = time.perf_counter() - started
        child.returncode = code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace").strip()
    return Timed(wall, usage.ru_maxrss / 1024, code, text.splitlines()[-1] if text else "")


class Caches:
    """Cache folders under --root/caches: a fresh one per cold run, and the warm one of each kind."""

    def __init__(self, root: Path) -> None:
        self.folder = root / "caches"
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        self.warm: dict[str, Path] = {}

    def fresh(self, kind: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=self.folder))

    def done_cold(self, kind: str, cache: Path) -> None:
        """Keep the first cold run's cache as the warm one; drop the others."""
        if kind not in self.warm:
            self.warm[kind] = cache
        elif cache != self.warm[kind]:
            shutil.rmtree(cache, ignore_errors=True)

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


# -- the monitor in tmux ----------------------------------------------------------------------------------


def _stat(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()


def descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        below: list[int] = []
        for parent in frontier:
            try:
                tasks = os.listdir(f"/proc/{parent}/task")
            except OSError:
                continue
            for tid in tasks:
                try:
                    below += [int(c) for c in Path(f"/proc/{parent}/task/{tid}/children").read_text().split()]
                except (OSError, ValueError):
                    continue
        found += below
        frontier = below
    return found


def status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid``, its live descendants and the children each of them reaped (a helper process that
    exits is counted in its parent's: the tree's figure never goes down)."""
    fields = _stat(pid)
    total = sum(int(x) for x in fields[11:15]) / CLOCK_TICKS
    for child in descendants(pid):
        try:
            total += sum(int(x) for x in _stat(child)[11:15]) / CLOCK_TICKS
        except (OSError, IndexError):
            continue
    return total


SETTLED_CORES = 0.1
"""The tree's CPU (cores) under which a second counts as settled before idle CPU is measured."""

LANE = re.compile(r"^\s*10\.0\.\d+\.\d+:\d", re.MULTILINE)


def drawn(window: str) -> Callable[[str], bool]:
    """The GPUs view of ``window`` is on screen: its title, the fleet line and lane labels."""
    title = f"Compute · {window}"
    return lambda screen: title in screen and "GPUs on" in screen and bool(LANE.search(screen))


class Monitor:
    """`miles-tui RUN` in a tmux server of its own (a socket under ``folder``), COLS x ROWS."""

    def __init__(self, run: Path, cache: Path, folder: Path, rss_cap_mb: float) -> None:
        self.run, self.cache, self.folder, self.cap = run, cache, folder, rss_cap_mb
        self.socket = str(folder / "tmux.sock")
        self.pid = 0
        self.started = 0.0
        self.peak_tree_mb = 0.0
        self.killed = ""

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", *args], capture_output=True, check=False)
        return done.stdout.decode(errors="replace")

    def start(self) -> None:
        script = self.folder / "monitor.sh"
        command = " ".join(f"'{part}'" for part in (*miles_tui(), str(self.run)))
        script.write_text(
            f"cd '{self.folder}'\nunset PYTHONPATH NO_COLOR\nexport TERM=xterm-256color "
            f"MILES_TUI_CACHE_DIR='{self.cache}'\nexec {command}\n"
        )
        self.started = time.monotonic()
        self.tmux("new-session", "-d", "-s", "week", "-x", str(COLS), "-y", str(ROWS), f"bash {script}")
        self.pid = int(self.tmux("display", "-p", "-t", "week", "#{pane_pid}").strip() or 0)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "week")

    def alive(self) -> bool:
        return self.pid > 0 and Path(f"/proc/{self.pid}").exists() and not self.killed

    def _watch(self) -> None:
        """Track the tree's RSS; kill the app past the cap (the box is shared)."""
        total = sum(status_kb(p, "VmRSS") for p in [self.pid, *descendants(self.pid)]) / 1024
        self.peak_tree_mb = max(self.peak_tree_mb, total)
        if total > self.cap and not self.killed:
            self.killed = f"killed at {total:,.0f} MB RSS (cap {self.cap:,.0f} MB)"
            self.kill()

    def wait(self, test: Callable[[str], bool], timeout: float, since: float) -> float | None:
        """Seconds from ``since`` (monotonic) until ``test(screen)`` holds; None after ``timeout``."""
        deadline = since + timeout
        while time.monotonic() < deadline and self.alive():
            if test(self.screen()):
                return time.monotonic() - since
            self._watch()
            time.sleep(0.05)
        return None

    def key(self, key: str) -> float:
        sent = time.monotonic()
        self.tmux("send-keys", "-t", "week", key)
        return sent

    def settle(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until a second passes with the tree under a tenth of a core: a view drawn
        while the first load still runs in the background is drawn, not idle."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.alive():
            before, at = tree_cpu(self.pid), time.monotonic()
            time.sleep(1.0)
            self._watch()
            if (tree_cpu(self.pid) - before) / (time.monotonic() - at) < SETTLED_CORES:
                return

    def idle_cpu(self, seconds: float) -> float | None:
        """Percent of one core the app and its helpers used over ``seconds``, once the tree has settled."""
        try:
            self.settle(seconds * 4)
            first, at = tree_cpu(self.pid), time.monotonic()
            end = at + seconds
            while time.monotonic() < end and self.alive():
                self._watch()
                time.sleep(0.5)
            return 100 * (tree_cpu(self.pid) - first) / (time.monotonic() - at)
        except (OSError, IndexError):
            return None

    def hwm_mb(self) -> tuple[float, float]:
        """(VmHWM of the app, the largest VmHWM among its helpers) in MB."""
        helpers = [status_kb(p, "VmHWM") for p in descendants(self.pid)]
        return status_kb(self.pid, "VmHWM") / 1024, max(helpers, default=0) / 1024

    def stop(self) -> None:
        if self.alive():
            self.tmux("send-keys", "-t", "week", "q")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and Path(f"/proc/{self.pid}").exists():
                time.sleep(0.1)
        if self.pid and Path(f"/proc/{self.pid}").exists():
            self.kill()
        self.tmux("kill-server")

    def kill(self) -> None:
        """SIGKILL the app this session started and its helpers."""
        for pid in [*descendants(self.pid), self.pid]:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)


@dataclass
class Session:
    """One monitor session's figures (None: not settled within the timeout)."""

    first_paint: float | None = None
    header: float | None = None
    u: float | None = None
    whole: float | None = None
    idle: float | None = None
    """After `4` is drawn."""
    idle_15m: float | None = None
    """After `u` is drawn (before `4`)."""
    hwm: float = 0.0
    helper_hwm: float = 0.0
    tree_peak: float = 0.0
    notes: list[str] = field(default_factory=list)


def monitor_session(run: Path, cache: Path, folder: Path, args: argparse.Namespace) -> Session:
    out = Session()
    app = Monitor(run, cache, folder, args.rss_cap)
    app.start()
    try:
        out.first_paint = app.wait(lambda s: "miles-tui " in s, args.timeout, app.started)
        out.header = app.wait(lambda s: week_gen.RUN_NAME in s, args.timeout, app.started)
        if out.header is None:
            out.notes.append(f"header: no {week_gen.RUN_NAME!r} after {args.timeout:g} s")
            return out
        out.u = app.wait(drawn("last 15m"), args.timeout, app.key("u"))
        if out.u is None:
            out.notes.append(f"u: not settled after {args.timeout:g} s")
            return out
        time.sleep(2.0)
        out.idle_15m = app.idle_cpu(args.idle)
        out.whole = app.wait(drawn("whole run"), args.timeout, app.key("4"))
        if out.whole is None:
            title = next((line.strip() for line in app.screen().splitlines() if "Compute ·" in line), "no title")
            out.notes.append(f"4: not settled after {args.timeout:g} s, the title still says {title[:60]!r}")
        else:
            time.sleep(2.0)
            out.idle = app.idle_cpu(args.idle)
    finally:
        out.hwm, out.helper_hwm = app.hwm_mb() if app.alive() else (0.0, 0.0)
        out.tree_peak = app.peak_tree_mb
        if app.killed:
            out.notes.append(app.killed)
        app.stop()
    return out


# -- printing ---------------------------------------------------------------------------------------------


def _value(value: float | None, unit: str, timeout: float) -> str:
    if value is None:
        return f"not settled after {timeout:g} s" if unit == "s" else "n/a"
    if unit == "MB":
        return f"{value:,.0f} MB"
    if unit == "x":
        return f"{value:.3f}x"
    if unit == "%":
        return f"{value:.2f} %"
    return f"{value:.2f} s"


def row(name: str, values: Sequence[float | None], goal: float | None, unit: str, timeout: float = 0.0) -> bool:
    """Print median and worst of ``values`` beside the goal (None: not settled, worse than any figure), then every
    run in order (``-``: not settled); True when the median meets the goal."""
    ranked = sorted(values, key=lambda v: float("inf") if v is None else v)
    median = ranked[(len(ranked) - 1) // 2] if len(ranked) % 2 else None
    if len(ranked) % 2 == 0 and ranked:
        low, high = ranked[len(ranked) // 2 - 1], ranked[len(ranked) // 2]
        median = None if low is None or high is None else (low + high) / 2
    worst = ranked[-1] if ranked else None
    ok = goal is None or (median is not None and median <= goal)
    over = sum(1 for v in values if v is None or (goal is not None and v > FLAG * goal))
    goal_text = "" if goal is None else f"<= {_value(goal, unit, timeout)}"
    verdict = "" if goal is None else ("ok" if ok else "MISSED")
    flags = f"  {over} of {len(values)} over {FLAG}x goal" if over and goal is not None else ""
    runs = f"({len(values)} run{'s' if len(values) != 1 else ''})"
    median_text, worst_text = _value(median, unit, timeout), _value(worst, unit, timeout)
    each = " ".join("-" if v is None else f"{v:,.0f}" if unit == "MB" else f"{v:.3g}" for v in values)
    each = f"  [{each}]" if len(values) > 1 else ""
    print(f"  {name:<58} {median_text:>12} {worst_text:>26}  {goal_text:<12} {verdict:<6} {runs}{flags}{each}",
          flush=True)  # fmt: skip
    return ok


def header_line(title: str) -> None:
    print(f"\n{title}\n  {'figure':<58} {'median':>12} {'worst':>26}  {'goal':<12}", flush=True)


def print_streams(gen: week_gen.Generated) -> None:
    print(f"\nrun {gen.run}: {gen.params['nodes']} nodes x 8 GPUs, {gen.params['days']:g} days, {gen.steps:,} steps, "
          f"generated in {gen.seconds:.0f} s")  # fmt: skip
    total = 0
    for name, size in gen.streams.items():
        total += size.bytes
        issue = ISSUE_FIGURES.get(name, "")
        print(f"  {name:<26} {size.records:>13,} records {size.bytes / 1e6:>10,.1f} MB {size.files:>6} files"
              f"   {'issue (8x8, day 7): ' + issue if issue else ''}")  # fmt: skip
    print(f"  {'total':<26} {'':>13}         {total / 1e6:>10,.1f} MB")


# -- the parts --------------------------------------------------------------------------------------------


def headless_part(gen: week_gen.Generated, caches: Caches, args: argparse.Namespace) -> None:
    run = str(gen.path)
    cwd = caches.folder
    plans = (
        ("report", [*miles_tui(), "report", run, "--json"], (0, 1, 2), 3.0, 1.0, 500.0),
        ("export", [*miles_tui(), "export", run, "--metrics"], (0,), 1.0, 1.0, 300.0),
    )
    for kind, argv, statuses, cold_goal, warm_goal, rss_goal in plans:
        cold: list[Timed] = []
        warm: list[Timed] = []
        for _ in range(args.repeat):
            cache = caches.fresh(kind)
            cold.append(timed(argv, cache, args.timeout, cwd))
            caches.done_cold(kind, cache)
        for _ in range(args.repeat):
            warm.append(timed(argv, caches.warm[kind], args.timeout, cwd))
        header_line(f"`miles-tui {' '.join(argv[1:3])} ...{' --json' if kind == 'report' else ' --metrics'}`")
        row(f"{kind}: cold cache (wall)", [t.wall for t in cold], cold_goal, "s", args.timeout)
        row(f"{kind}: warm cache (wall)", [t.wall for t in warm], warm_goal, "s", args.timeout)
        row(f"{kind}: peak RSS, cold", [t.rss_mb for t in cold], rss_goal, "MB")
        row(f"{kind}: peak RSS, warm", [t.rss_mb for t in warm], rss_goal, "MB")
        odd = {f"exit {t.status}: {t.error}" for t in cold + warm if t.status not in statuses}
        for text in sorted(odd):
            print(f"    ! {text}")
        print(f"    exit statuses: {sorted({t.status for t in cold + warm}, key=str)}")


def monitor_part(gen: week_gen.Generated, caches: Caches, args: argparse.Namespace) -> None:
    repeat = args.monitor_repeat or args.repeat
    sessions: dict[str, list[Session]] = {kind: [] for kind in args.monitor_kinds}
    for temperature, done in sessions.items():
        for index in range(repeat):
            if temperature == "warm" and "monitor" not in caches.warm:  # no cold session filled one: fill it now
                caches.done_cold("monitor", caches.fresh("monitor"))
                filler = Path(tempfile.mkdtemp(prefix="tmux-", dir=caches.folder))
                monitor_session(gen.path, caches.warm["monitor"], filler, args)
                shutil.rmtree(filler, ignore_errors=True)
            cache = caches.fresh("monitor") if temperature == "cold" else caches.warm["monitor"]
            folder = Path(tempfile.mkdtemp(prefix="tmux-", dir=caches.folder))
            session = monitor_session(gen.path, cache, folder, args)
            shutil.rmtree(folder, ignore_errors=True)
            if temperature == "cold":
                caches.done_cold("monitor", cache)
            done.append(session)
            notes = "".join(f" · {note}" for note in session.notes)
            idle = f"{_value(session.idle_15m, '%', 0)} / {_value(session.idle, '%', 0)}"
            print(f"    monitor {temperature} {index + 1}: header {_value(session.header, 's', args.timeout)}, "
                  f"u {_value(session.u, 's', args.timeout)}, 4 {_value(session.whole, 's', args.timeout)}, "
                  f"idle 15m/whole {idle}, VmHWM {session.hwm:,.0f} MB{notes}", flush=True)  # fmt: skip
    header_line(f"monitor: `miles-tui RUN` in tmux {COLS}x{ROWS}")
    for temperature, whole_goal in (("cold", 10.0), ("warm", 1.5)):
        runs = sessions.get(temperature, [])
        if not runs:
            continue
        row(f"{temperature}: run folder's name painted (reference)", [s.first_paint for s in runs], None, "s",
            args.timeout)  # fmt: skip
        row(f"{temperature}: header with the run's name (meta.json)", [s.header for s in runs], 1.0, "s", args.timeout)
        row(f"{temperature}: `u` -> GPUs view, last 15 min drawn", [s.u for s in runs], 1.5, "s", args.timeout)
        row(f"{temperature}: `4` -> whole run drawn", [s.whole for s in runs], whole_goal, "s", args.timeout)
        row(f"{temperature}: idle CPU, 15 min view drawn ({args.idle:g} s)", [s.idle_15m for s in runs], 1.0, "%")
        row(f"{temperature}: idle CPU, whole run drawn ({args.idle:g} s)", [s.idle for s in runs], 1.0, "%")
        row(f"{temperature}: peak RSS (VmHWM of the app)", [s.hwm or None for s in runs], 1000.0, "MB")
        row(f"{temperature}:   its helpers' largest VmHWM", [s.helper_hwm for s in runs], None, "MB")
        row(f"{temperature}:   tree RSS, sampled peak", [s.tree_peak for s in runs], None, "MB")


def metrics_part(gen: week_gen.Generated, caches: Caches, args: argparse.Namespace) -> None:
    run = week_gen.ensure_metrics_run(Path(args.root), gen, args.metrics_lines)
    path = run / "dashboard" / "metrics.jsonl"
    argv = [*miles_tui(), "export", str(run), "--metrics"]
    refs: list[float] = []
    cold: list[Timed] = []
    warm: list[Timed] = []
    for _ in range(args.repeat):
        done = subprocess.run([sys.executable, "-c", REFERENCE, str(path)], capture_output=True, text=True, check=True)
        refs.append(float(done.stdout))
        cache = caches.fresh("metrics2m")
        cold.append(timed(argv, cache, args.timeout * 5, caches.folder))
        caches.done_cold("metrics2m", cache)
    reopens: list[float | None] = []
    for _ in range(args.repeat):
        warm.append(timed(argv, caches.warm["metrics2m"], args.timeout * 5, caches.folder))
        done = subprocess.run([sys.executable, "-c", REOPEN, str(run / "dashboard")], capture_output=True, text=True,
                              env=child_env(caches.warm["metrics2m"]), cwd=caches.folder, check=False)  # fmt: skip
        reopens.append(float(done.stdout.split()[0]) if done.returncode == 0 and done.stdout.strip() else None)
    ref = statistics.median(refs)

    def ratios(runs: list[Timed]) -> list[float | None]:
        return [None if t.wall is None else t.wall / r for t, r in zip(runs, refs, strict=True)]

    header_line(f"`miles-tui export RUN --metrics`: {args.metrics_lines:,} lines ({path.stat().st_size / 1e6:,.0f} MB) "
                "beside a day of gpu_util partitions")  # fmt: skip
    row("reference: json.loads per line (wall)", refs, None, "s")
    row("cold cache: export / reference (same round)", ratios(cold), 0.3, "x")
    row("warm cache: export / reference", ratios(warm), 0.05, "x")
    row("  (reference) a fresh DashboardReader's first poll, every stream",
        [None if t is None else t / r for t, r in zip(reopens, refs, strict=True)], None, "x")  # fmt: skip
    row("  cold export (wall)", [t.wall for t in cold], None, "s", args.timeout * 5)
    row("  warm export (wall)", [t.wall for t in warm], 0.05 * ref, "s", args.timeout * 5)
    row("  peak RSS, cold", [t.rss_mb for t in cold], None, "MB")
    row("  peak RSS, warm", [t.rss_mb for t in warm], None, "MB")
    for text in sorted({f"exit {t.status}: {t.error}" for t in cold + warm if t.status != 0}):
        print(f"    ! {text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--root", default=str(Path(tempfile.gettempdir()) / "miles-week"),
                        help="where runs are generated (and reused) and caches kept")  # fmt: skip
    parser.add_argument("--scale", choices=sorted(SCALES), default="week", help="week: 8x8 GPUs 7 d; month: 16x8, 30 d")
    parser.add_argument("--days", type=float, help="override the scale's days (1: a quick trial; 14: what grows)")
    parser.add_argument("--nodes", type=int, help="override the scale's nodes (8 GPUs each)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each figure (median and worst printed)")
    parser.add_argument("--monitor-repeat", type=int, help="monitor sessions of each kind (default: --repeat)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds any wait gives up after")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle CPU measured once drawn")
    parser.add_argument("--rss-cap", type=float, default=8000.0, help="MB: a monitor past it is killed")
    parser.add_argument("--monitor-kinds", type=lambda text: text.split(","), default=["cold", "warm"],
                        help="cold,warm (default), or one of them")  # fmt: skip
    parser.add_argument("--metrics-lines", type=int, default=2_000_000)
    parser.add_argument("--no-processes", action="store_true", help="write no gpu_processes stream")
    parser.add_argument("--only", choices=("generate", "headless", "monitor", "metrics"), action="append",
                        help="run only these parts (repeatable); default: all")  # fmt: skip
    args = parser.parse_args(argv)
    nodes, days = SCALES[args.scale]
    params = week_gen.Params(nodes=args.nodes or nodes, days=args.days or days, processes=not args.no_processes)
    root = Path(args.root)
    root.mkdir(parents=True, exist_ok=True)
    gen = week_gen.ensure(params, root)
    print_streams(gen)
    only = set(args.only or ("headless", "monitor", "metrics"))
    print(f"\n{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; `{' '.join(miles_tui())}`; data ends "
          f"{(time.time() - gen.end_ts) / 3600:.1f} h ago; repeat {args.repeat}", flush=True)  # fmt: skip
    print(compiled_note(), flush=True)
    caches = Caches(root)
    try:
        if "headless" in only:
            headless_part(gen, caches, args)
        if "monitor" in only:
            monitor_part(gen, caches, args)
        if "metrics" in only:
            metrics_part(gen, caches, args)
    finally:
        caches.clear()
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")
    return 0


def compiled_note() -> str:
    """Byte-compile the measured package once, as a regular ``pip install`` does: an editable install (or a
    box with PYTHONDONTWRITEBYTECODE set, as this one) would otherwise compile every module on every start."""
    import importlib.util

    spec = importlib.util.find_spec("miles_tui.core")
    folders = [Path(p).parent for p in (spec.submodule_search_locations or [])] if spec else []
    command = [sys.executable, "-m", "compileall", "-q", *[str(f / n) for f in folders[:1] for n in ("core", "tui")]]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(command, env=env, capture_output=True, check=False)
    return f"byte-compiled {folders[0] if folders else '(package not found)'} (as pip install does)"


if __name__ == "__main__":
    sys.exit(main())
