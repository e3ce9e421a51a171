"""Benchmark: a live tick of the metrics grid (24 series of 10,000 points, all changed) must paint within 100 ms.

Writes a run whose dashboard/metrics.jsonl holds 24 metrics (train/, rollout/,
perf/, eval/ against three step keys) with 10,000 points each, runs the app
headless, opens the metrics screen and then, per tick, appends one record per
step key (so every series gets a point), lets the watcher parse it (a worker
thread's job in the app, not counted) and times, on the UI side:

- ``tick -> frame``: from posting TelemetryAppended to the end of the first
  frame Textual writes after it: fetching the 24 new series from the store,
  downsampling and building the visible charts, compositing the screen;
  wall time, and the CPU time this process spent in it (``cpu``: what the
  tick costs whatever else the machine is running; on a busy machine the
  wall time is the larger and the one a user sees);
- ``builds``: the visible charts alone, ``plot_data`` + figure for each at its
  size, called directly (no cache), summed, and per chart;
- ``fetch``: the 24 ``store.series`` + ``in_step_order`` calls.

Modes: raw, EMA 0.9, log-y. Prints median, p90 and max; exits 1 when a
``tick -> frame`` median misses the target. It first prints a calibration:
one chart built alone, so figures from a busy machine can be read against it
(2.8 to 6.6 ms on the shared 2-core box it was written on, with the load).

    python bench/metrics_grid.py [--sizes 160x48,80x24] [--ticks 20] [--points 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sample_cursor import PaintClock  # noqa: E402  (bench/ is the script's own folder)

from tests.conftest import EPOCH  # noqa: E402

TARGET_MS = 100.0
"""Median budget from a telemetry tick to the painted frame."""


SERIES: dict[str, tuple[str, ...]] = {
    "train/step": tuple(
        f"train/{n}" for n in ("loss", "pg_loss", "grad_norm", "clipfrac", "entropy", "kl", "lr", "ppl")
    ),
    "rollout/step": (
        *(f"rollout/{n}" for n in ("raw_reward", "response_len", "truncated", "zero_std", "staleness", "tool_calls")),
        *(f"perf/{n}" for n in ("mfu", "step_time", "train_time", "rollout_time", "tokens_per_s", "gen_s")),
    ),
    "eval/step": tuple(f"eval/{n}" for n in ("aime", "math500", "gpqa", "livecode")),
}
"""Step key -> the metrics logged against it: 24 in all."""


def _values(rng: np.random.Generator, count: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    walk = np.cumsum(rng.normal(0, 0.02, count)) + rng.uniform(0.5, 3.0)
    walk[rng.integers(0, count, 5)] *= 8  # spikes the downsampling must keep
    return np.abs(walk) + 1e-3


def write_run(root: Path, points: int) -> Path:
    """A run directory with only dashboard/: meta.json and metrics.jsonl."""
    rng = np.random.default_rng(11)
    dash = root / "dashboard"
    dash.mkdir(parents=True)
    meta = {"run_name": "bench", "start_ts": EPOCH, "args": {}, "schema_version": 1}
    (dash / "meta.json").write_text(json.dumps(meta))
    columns = {key: _values(rng, points) for keys in SERIES.values() for key in keys}
    with (dash / "metrics.jsonl").open("w") as out:
        for step in range(points):
            for step_key, keys in SERIES.items():
                metrics = {key: round(float(columns[key][step]), 6) for key in keys}
                metrics[step_key] = step
                record = {"ts": EPOCH + step, "step_key": step_key, "step": step, "metrics": metrics}
                out.write(json.dumps(record) + "\n")
    return root


def append_tick(root: Path, step: int, rng: np.random.Generator) -> None:
    """One record per step key: every series gets a point."""
    with (root / "dashboard" / "metrics.jsonl").open("a") as out:
        for step_key, keys in SERIES.items():
            metrics: dict[str, float | int] = {key: float(rng.uniform(0.5, 2.0)) for key in keys}
            metrics[step_key] = step
            out.write(json.dumps({"ts": EPOCH + step, "step_key": step_key, "step": step, "metrics": metrics}) + "\n")


def _stats(values: Sequence[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {statistics.median(values) * 1e3:6.1f} ms  p90 {p90 * 1e3:6.1f} ms  max {max(values) * 1e3:6.1f} ms"


async def measure(root: Path, size: tuple[int, int], ticks: int, points: int) -> tuple[bool, list[str]]:
    """Per mode: tick -> frame, builds, fetch timings at one terminal size; (all medians on target, report lines)."""
    from miles_tui.core.analysis import plot_data
    from miles_tui.core.analysis.metric_view import in_step_order
    from miles_tui.tui.model.messages import TelemetryAppended
    from miles_tui.tui.screens.metrics_screen import MetricsScreen
    from miles_tui.tui.widgets.metric_chart import TITLE_ROWS, chart_body, plot_points
    from tests.harness import frozen_app

    app = frozen_app(root, EPOCH)
    keys = tuple(key for keys in SERIES.values() for key in keys)
    all_keys = (*keys, *SERIES)
    lines: list[str] = []
    ok = True
    rng = np.random.default_rng(5)
    step = points
    async with app.run_test(size=size) as pilot:
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        app.push_screen(MetricsScreen())
        for _ in range(3):
            await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, MetricsScreen) and len(screen.charts) == len(keys), "24 charts"
        store = app.watcher.follower.metrics
        clock = PaintClock(app)
        cpu_clock: list[float] = []
        display = app._display

        def stamped(*args: Any, **kwargs: Any) -> Any:  # PaintClock's hook, on the CPU clock as well
            result = display(*args, **kwargs)
            cpu_clock.append(time.process_time())
            return result

        app._display = stamped  # type: ignore[method-assign]
        for mode, press in (("raw", None), ("EMA 0.9", "e"), ("log-y", "l")):
            if press == "e":
                await pilot.press("e", "e")  # off -> 0.6 -> 0.9
            elif press == "l":
                await pilot.press("e", "l")  # smoothing off, log on
            await pilot.pause(0.2)
            frame: list[float] = []
            cpu: list[float] = []
            builds: list[float] = []
            per_chart: list[float] = []
            fetch: list[float] = []
            visible = screen.in_view_keys()
            for _ in range(ticks):
                append_tick(root, step, rng)
                step += 1
                await app.watcher.poll_streams()  # parsing: the poll worker's thread, not the UI
                before = {key: screen.charts[key].builds for key in visible}
                clock.frames.clear()
                cpu_clock.clear()
                started, cpu_started = time.perf_counter(), time.process_time()
                screen.post_message(TelemetryAppended(all_keys, ()))
                await pilot.pause()
                if not clock.frames:
                    raise AssertionError("the tick painted nothing")
                frame.append(clock.frames[0] - started)
                cpu.append(cpu_clock[0] - cpu_started)
                stale = [key for key in visible if screen.charts[key].builds == before[key]]
                assert not stale, f"not redrawn: {stale}"

                started = time.perf_counter()
                for key in keys:
                    series = store.series(key)
                    assert series is not None
                    in_step_order(series)
                fetch.append(time.perf_counter() - started)

                total = 0.0
                for key in visible:
                    chart = screen.charts[key]
                    width, height = chart.content_size
                    series = chart.series
                    assert series is not None
                    t0 = time.perf_counter()
                    data = plot_data(series, plot_points(width), screen.view.smoothing, screen.view.log_y)
                    chart_body(data, width, height - TITLE_ROWS, None, color=True)
                    spent = time.perf_counter() - t0
                    per_chart.append(spent)
                    total += spent
                builds.append(total)
            verdict = "ok" if statistics.median(frame) * 1e3 <= TARGET_MS else f"OVER {TARGET_MS:.0f} ms"
            ok = ok and verdict == "ok"
            lines += [
                f"  {mode:<8} {len(visible)} visible charts, {ticks} ticks",
                f"    tick -> frame    {_stats(frame)}  {verdict}",
                f"      cpu            {_stats(cpu)}",
                f"    builds (visible) {_stats(builds)}   per chart {statistics.median(per_chart) * 1e3:.1f} ms",
                f"    fetch 24 series  {_stats(fetch)}",
            ]
    return ok, lines


def calibration() -> float:
    """CPU seconds of one 50x11 chart (10,000 points) built outside the app: how fast this machine is right now."""
    from miles_tui.core.analysis import plot_data
    from miles_tui.core.telemetry import MetricSeries
    from miles_tui.tui.widgets.metric_chart import chart_body, plot_points

    rng = np.random.default_rng(1)
    count = 10_000
    series = MetricSeries(
        "train/loss",
        "train/step",
        np.arange(count),
        np.arange(count, dtype=np.float64),
        _values(rng, count),
        np.zeros(count),
    )
    spent = []
    for _ in range(30):
        started = time.process_time()
        chart_body(plot_data(series, plot_points(50)), 50, 11)
        spent.append(time.process_time() - started)
    return statistics.median(spent[5:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="160x48,80x24", help="terminal sizes, comma separated")
    parser.add_argument("--ticks", type=int, default=20, help="ticks per mode")
    parser.add_argument("--points", type=int, default=10_000, help="points per series")
    args = parser.parse_args()
    failed = False
    print(f"calibration: one 50x11 chart of 10,000 points, built alone: {calibration() * 1e3:.1f} ms cpu")
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.sizes.split(","):
            width, height = (int(part) for part in spec.lower().split("x"))
            root = write_run(Path(tmp) / spec, args.points)
            ok, lines = asyncio.run(measure(root, (width, height), args.ticks, args.points))
            failed = failed or not ok
            title = f"metrics grid, 24 series x {args.points:,} points, {width}x{height}"
            print(f"{title}: telemetry tick -> painted frame")
            print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
