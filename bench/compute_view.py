"""Benchmark: the compute view of a 512-GPU fleet.

Writes, in a temp dir, a fleet of 64 nodes × 8 GPUs sampled every 10 s for
``--hours`` hours, with per-rank phases (3 per 50 s step), one dead node and an
open phase (tests/core/fleet_writer.py). Then prints, medians of ``--repeat`` runs:

core (headless, what the screen's worker thread runs):
- the reader's first load of the streams (the app pays this once, not the view);
- TelemetryColumns: first conversion of everything loaded, a refresh after one
  new tick (512 samples) was appended and polled, and a call with nothing new;
- a whole view computation (columns -> bins, ages, fleet percentiles, phase
  shares, each lane's own phase per bin) per preset live window at 118 bins
  wide, with the columns already converted, and for a 15-minute window panned an
  hour back; and, for the 15-minute window, the seconds per rank and phase
  (phase_time) and the per-lane phases made of them (lane_phases);

screen (a headless app at 160x48):
- UI-thread redraw: ComputeScreen._draw (rows for every lane) plus drawing every
  visible line of every strip widget, i.e. what blocks the event loop per view;
- end to end: one new tick appended and polled, TelemetryAppended posted, until
  the new view is on screen (worker thread + hand-over + draw + a paint).
  Target: the UI thread stays under 16 ms a redraw; end to end under 250 ms.

Each figure is the median wall time (best run, median CPU time in brackets):
on a loaded machine the CPU time is the better guide to the cost itself.

    python bench/compute_view.py [--hours 2] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from miles_tui.core.analysis import sampling_interval
from miles_tui.core.analysis.compute_view import compute_view
from miles_tui.core.follow import RunFollower
from miles_tui.core.telemetry import WINDOWS, TelemetryColumns, TimeWindow, bin_count, frame, phase_time
from miles_tui.core.telemetry.lane_phases import lane_phases
from miles_tui.core.telemetry.time_bins import time_bins
from tests.core.fleet_writer import Fleet, write_fleet

TARGET_UI_MS = 16.0
TARGET_END_TO_END_MS = 250.0
WIDTH = 118
"""Strip cells at 160 columns."""


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def _spread(times: list[float], cpu: list[float] | None = None) -> str:
    """Median and best wall time of the runs, and the median CPU time: on a busy machine the CPU time is
    what the work costs, the wall time what it cost here."""
    text = f"{_ms(statistics.median(times))} (best {min(times) * 1000:.1f}"
    return text + (f", cpu {statistics.median(cpu) * 1000:.1f})" if cpu else ")")


def _median(run: Callable[[], object], repeat: int) -> str:
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return _spread(times, cpu)


def _tick(fleet: Fleet, ts: float) -> None:
    """Append one sample of every live GPU at ``ts`` to the newest gpu_util partition."""
    newest = sorted((fleet.root / "dashboard" / "gpu_util").iterdir())[-1]
    lines = [
        json.dumps({"ts": ts, "node": node, "gpu": gpu, "util": 80, "mem_mb": 60000, "power_w": 500})
        for node in fleet.nodes
        if node != fleet.dead_node
        for gpu in range(fleet.gpus_per_node)
    ]
    with newest.open("a") as handle:
        handle.write("\n".join(lines) + "\n")


def bench_core(fleet: Fleet, repeat: int) -> None:
    follower = RunFollower(fleet.root, recent_hours=6)
    start = time.perf_counter()
    follower.poll(fleet.end)
    print(f"reader first load (not the view's cost)  {_ms(time.perf_counter() - start)}")
    counts = follower.dashboard.record_counts()
    print(f"  records: gpu_util {counts['gpu_util']:,}, phases {counts['phases']:,}")
    columns = TelemetryColumns(follower.dashboard)
    start, start_cpu = time.perf_counter(), time.process_time()
    columns.gpu_samples(None, None)
    columns.phase_spans(None, None, follower.state().open_phases)
    first = f"{_ms(time.perf_counter() - start)} (cpu {(time.process_time() - start_cpu) * 1000:.1f})"
    print(f"columns: first conversion                 {first}")
    now = fleet.end
    ticks, cpu = [], []
    for _ in range(repeat):
        now += 10
        _tick(fleet, now)
        follower.poll(now)
        start, start_cpu = time.perf_counter(), time.process_time()
        columns.gpu_samples(now - 900, now)
        columns.phase_spans(now - 900, now, follower.state().open_phases)
        ticks.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    print(f"columns: refresh after one new tick       {_spread(ticks, cpu)}")
    idle = _median(lambda: columns.gpu_samples(now - 900, now), repeat)
    print(f"columns: refresh with nothing new         {idle}")

    windows = [(TimeWindow(span), "all" if span is None else f"{span / 3600:g}h") for span in WINDOWS]
    windows.append((TimeWindow(900.0, now - 3600.0), "0.25h, 1 h back"))
    for window, name in windows:

        def view(window: TimeWindow = window) -> None:
            extent = columns.time_range(everything=True) if window.span is None else columns.extent()
            first, newest = extent or (None, None)
            shown = frame(window, now, first, newest)
            samples = columns.gpu_samples(shown.since, shown.until)
            interval = sampling_interval(samples)
            bins = time_bins(shown.since, shown.until, bin_count(shown.length, interval, WIDTH))
            spans = columns.phase_spans(shown.since, shown.until, follower.state().open_phases)
            compute_view(samples, spans, bins, now=now, frame=shown, interval=interval)

        print(f"view computation, window {name:<15} {_median(view, repeat)}")

    samples = columns.gpu_samples(now - 900, now)
    bins = time_bins(now - 900, now, bin_count(900, sampling_interval(samples), WIDTH))
    spans = columns.phase_spans(now - 900, now, follower.state().open_phases)
    lanes = sorted(set(samples.lanes))
    time_ = phase_time(spans, bins, now)
    print(f"  of which phase_time, 15m                {_median(lambda: phase_time(spans, bins, now), repeat)}")
    lanes_cost = _median(lambda: lane_phases(spans, lanes, bins, now, time_), repeat)
    print(f"  of which lane_phases, 512 lanes, 15m    {lanes_cost}")


async def bench_screen(fleet: Fleet, repeat: int, now: float) -> None:
    from miles_tui.tui.model.messages import TelemetryAppended
    from miles_tui.tui.screens.compute_screen import ComputeScreen
    from miles_tui.tui.widgets.heat_rows import HeatRows
    from tests.harness import frozen_app

    app = frozen_app(fleet.root, now)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(4):
            await pilot.pause()
            await app.workers.wait_for_complete()
        screen = ComputeScreen()
        start = time.perf_counter()
        app.push_screen(screen)
        while screen.view is None:
            await pilot.pause(0.005)
        await pilot.pause()
        print(f"screen: open (first conversion + view)   {_ms(time.perf_counter() - start)}")
        for _ in range(4):
            await pilot.pause()
            await app.workers.wait_for_complete()

        for mode in ("w", "a"):
            await pilot.press(mode)

            def draw() -> None:
                screen._draw()
                for widget in screen.query(HeatRows):
                    for y in range(widget.size.height):
                        widget.render_line(y)

            label = "worst 16" if mode == "w" else "all 512 "
            print(f"screen: UI-thread redraw, {label}       {_median(draw, repeat)}  (target {TARGET_UI_MS:.0f} ms)")

        times = []
        tick = now
        for _ in range(repeat):
            tick += 10
            _tick(fleet, tick)
            app.watcher.follower.poll(tick)
            before = screen.view
            start = time.perf_counter()
            screen.post_message(TelemetryAppended((), ("gpu_util",)))
            while screen.view is before:
                await pilot.pause(0.001)
            await pilot.pause()
            times.append(time.perf_counter() - start)
            for _ in range(2):
                await app.workers.wait_for_complete()
                await pilot.pause()
        print(f"screen: new tick -> on screen, 512 lanes {_spread(times)}  (target {TARGET_END_TO_END_MS:.0f} ms)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        fleet = write_fleet(Path(tmp) / "run", seconds=args.hours * 3600, dead_at=None)
        print(f"fleet: {fleet.lanes} GPUs, {args.hours:g} h, written in {time.perf_counter() - start:.1f} s")
        bench_core(fleet, args.repeat)
        # A fresh copy of the clock: the core bench appended ticks past fleet.end.
        asyncio.run(bench_screen(fleet, args.repeat, fleet.end + 10 * (args.repeat + 1)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
