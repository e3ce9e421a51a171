"""UI benchmark: prints each figure beside its target (`python bench/ui.py [--dir DIR] [--quick]`).

1. first paint on a 1,000-step run: app start until the step list shows every step (target <= 1 s);
2. opening the rollout table of an 8,192-sample step whose summary core already has (<= 300 ms);
3. a new 8,192-sample step's last file landing -> its table ready with no key pressed, against the
   cold `miles-tui export --step` time of the same step (target: no slower than that);
4. token-cursor key latency on a 32k-token response (<= 50 ms; see bench/sample_cursor.py);
5. RSS after browsing 20 steps vs after 5 (bounded by the open-step LRU, not growing with steps).

Runs are built with the project's own writer and kept in --dir so reruns skip the build.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from miles_tui.core.dump import RunDir  # noqa: E402
from miles_tui.core.synth.dump_files import make_sample  # noqa: E402
from miles_tui.core.synth.layout import ParallelLayout  # noqa: E402
from miles_tui.core.synth.writer import write_step  # noqa: E402
from tests.harness import settle  # noqa: E402

TRAINING_SECONDS = 5.0
"""Stand-in for the training forward/backward between a rollout file and its train files (minutes in a run)."""


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _samples(rid: int, n: int, response: tuple[int, int], rng: np.random.Generator) -> tuple[list[Any], Any]:
    samples, per_token = [], {k: [] for k in ("log_probs", "entropy", "advantages", "returns")}
    for i in range(n):
        length = int(rng.integers(*response))
        prompt = int(rng.integers(8, 32))
        rollout_lp = (-rng.random(length)).astype(np.float32)
        samples.append(
            make_sample(
                index=rid * n + i,
                group_index=i // 8,
                tokens=rng.integers(0, 1000, prompt + length).tolist(),
                response_length=length,
                reward=float(rng.integers(0, 2)),
                weight_versions=[str(max(rid - 1, 0))],
                rollout_log_probs=rollout_lp.tolist(),
                status="completed",
            )
        )
        per_token["log_probs"].append(rollout_lp + rng.normal(0, 0.02, length).astype(np.float32))
        per_token["entropy"].append(rng.random(length).astype(np.float32))
        per_token["advantages"].append(np.zeros(length, np.float32))
        per_token["returns"].append(np.zeros(length, np.float32))
    return samples, per_token


def _write(root: Path, rid: int, n: int, response: tuple[int, int], layout: str) -> None:
    rng = np.random.default_rng(rid)
    samples, per_token = _samples(rid, n, response, rng)
    write_step(root, rid, samples, per_token, ParallelLayout.parse(layout))


def _age(root: Path, seconds: float = 120.0) -> None:
    stamp = time.time() - seconds
    for path in root.rglob("*"):
        os.utime(path, (stamp, stamp))


def build(base: Path, quick: bool) -> tuple[Path, Path]:
    many, big = base / "many_steps", base / "big_step"
    steps = 100 if quick else 1000
    if not (many / "rollout_data" / f"{steps - 1}.pt").exists():
        print(f"building a {steps}-step run in {many} ...", flush=True)
        for rid in range(steps):
            _write(many, rid, 8, (16, 64), "dp1 cp1 tp1 pp1")
        _age(many)
    if not (big / "rollout_data" / "0.pt").exists():
        print(f"building 20 steps of 512 samples and one of 8,192 in {big} ...", flush=True)
        for rid in range(20):
            _write(big, rid, 512, (32, 256), "dp2 cp2 tp1 pp1")
        _write(big, 20, 1024 if quick else 8192, (16, 96), "dp2 cp2 tp1 pp1")
        _age(big)
    return many, big


async def first_paint(run_dir: Path) -> tuple[float, int]:
    from miles_tui.tui.app import make_app
    from miles_tui.tui.widgets.virtual_table import VirtualTable

    start = time.perf_counter()
    app = make_app(run_dir, poll_seconds=3600)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one("#steps", VirtualTable)
        while len(table.rows) == 0:
            await pilot.pause(0.005)
        elapsed = time.perf_counter() - start
        return elapsed, len(table.rows)


async def open_big_step(run_dir: Path, rid: int) -> float:
    from miles_tui.tui.app import make_app
    from miles_tui.tui.screens.step_screen import StepScreen
    from miles_tui.tui.widgets.virtual_table import VirtualTable

    app = make_app(run_dir, poll_seconds=3600)
    async with app.run_test(size=(160, 48)) as pilot:
        summary = await app.watcher.summary(rid, False)
        app.model.summaries[(rid, False)] = summary
        await settle(pilot, rounds=3)
        frames: list[float] = []
        display = app._display

        def stamped(*args: Any, **kwargs: Any) -> Any:
            result = display(*args, **kwargs)
            frames.append(time.perf_counter())
            return result

        app._display = stamped  # type: ignore[method-assign]  # the one place a finished frame leaves the app
        start = time.perf_counter()
        screen = StepScreen(rid, False)
        await app.push_screen(screen)
        table = screen.query_one("#samples", VirtualTable)
        while len(table.rows) != len(summary.rows):
            await pilot.pause(0.001)
        rows_set = time.perf_counter()
        while not any(t > rows_set for t in frames):
            await pilot.pause(0.001)
        return next(t for t in frames if t > rows_set) - start  # the first frame painted with the rows


async def new_step_ready(run_dir: Path, rid: int, n: int) -> float:
    from miles_tui.tui.app import make_app

    app = make_app(run_dir, poll_seconds=0.5)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, rounds=3)
        # As in a run: the rollout file lands first, training takes a while, then every rank's
        # train file lands at about the same time. The files are made by a separate process
        # (the job is not the monitor) in a staging folder, then renamed into the run.
        staging = run_dir.parent / f"staging-{rid}"
        code = f"import sys; sys.path.insert(0, {str(REPO)!r}); from bench.ui import _write; "
        code += f"_write(__import__('pathlib').Path({str(staging)!r}), {rid}, {n}, (16, 96), 'dp2 cp2 tp1 pp1')"
        writer = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
        assert await writer.wait() == 0
        os.replace(staging / "rollout_data" / f"{rid}.pt", run_dir / "rollout_data" / f"{rid}.pt")
        await asyncio.sleep(TRAINING_SECONDS)
        for shard in sorted((staging / "train_data").glob(f"{rid}_*.pt")):
            os.replace(shard, run_dir / "train_data" / shard.name)
        landed = time.perf_counter()
        files = RunDir(run_dir).step_files(rid)
        assert files is not None
        final = files.signature

        def ready() -> bool:
            summary = app.model.summaries.get((rid, False))
            opened = app.reader.cached_open(rid, False)
            return summary is not None and summary.signature == final and opened is not None

        while not ready():
            await asyncio.sleep(0.05)  # a busy wait here would steal the GIL from the monitor's worker
        return time.perf_counter() - landed


def cold_export(run_dir: Path, rid: int) -> float:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "MILES_TUI_CACHE_DIR": cache}
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "miles_tui.tui.cli", "export", str(run_dir), "--step", str(rid)],
            stdout=subprocess.DEVNULL,
            check=True,
            env=env,
        )
        return time.perf_counter() - start


async def browse(run_dir: Path, steps: int) -> list[tuple[int, float]]:
    from miles_tui.tui.app import make_app

    app = make_app(run_dir, poll_seconds=3600)
    readings = []
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, rounds=3)
        for k, rid in enumerate(range(steps), start=1):
            await app.watcher.open(rid, False)  # what opening a sample of that step does
            if k in (1, 5, 10, 20):
                readings.append((k, _rss_mb()))
    return readings


def _row(name: str, value: str, target: str, ok: bool) -> None:
    print(f"  {name:<58} {value:>12}   target {target:<16} {'PASS' if ok else 'FAIL'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "miles-tui-bench-ui")
    parser.add_argument("--quick", action="store_true", help="smaller runs (smoke check only)")
    args = parser.parse_args()
    os.environ.setdefault("MILES_TUI_CACHE_DIR", tempfile.mkdtemp(prefix="miles-tui-bench-cache-"))
    many, big = build(args.dir / ("quick" if args.quick else "full"), args.quick)
    big_rid = 20
    print("\nmiles-tui UI benchmark")

    paints = [asyncio.run(first_paint(many)) for _ in range(3)]
    paint = statistics.median(p for p, _ in paints)
    _row(f"first paint, {paints[0][1]}-step run (median of 3)", f"{paint * 1e3:.0f} ms", "<= 1000 ms", paint <= 1.0)

    opened = statistics.median(asyncio.run(open_big_step(big, big_rid)) for _ in range(3))
    _row("open the rollout table of the big step (summary in core)", f"{opened * 1e3:.0f} ms", "<= 300 ms",
         opened <= 0.3)  # fmt: skip

    with tempfile.TemporaryDirectory() as tmp:
        live = Path(tmp) / "live"
        for rid in range(3):
            _write(live, rid, 64, (16, 96), "dp2 cp2 tp1 pp1")
        _age(live)
        n = 1024 if args.quick else 8192
        ready = asyncio.run(new_step_ready(live, 3, n))
        cold = statistics.median(cold_export(live, 3) for _ in range(3))
    _row(f"new {n}-sample step landed -> table ready, no key pressed", f"{ready * 1e3:.0f} ms",
         f"<= {cold * 1e3:.0f} ms", ready <= cold)  # fmt: skip
    _row("  (cold `export --step` of that step, fresh process)", f"{cold * 1e3:.0f} ms", "reference", True)

    from bench.sample_cursor import TARGET_MS, measure, synthetic_step
    from miles_tui.tui.screens.sample_screen import SampleScreen

    step = synthetic_step()
    timings = asyncio.run(measure(lambda: SampleScreen(step, 0, None, None), (160, 48), repeats=15))
    right = statistics.median(timings["right"]) * 1e3
    _row("token cursor key on a 32k-token response (median)", f"{right:.1f} ms", f"<= {TARGET_MS:.0f} ms",
         right <= TARGET_MS)  # fmt: skip

    readings = asyncio.run(browse(big, 20))
    text = ", ".join(f"{k}: {mb:.0f}" for k, mb in readings)
    growth = readings[-1][1] - readings[1][1]
    _row(f"RSS MB after opening N steps ({text})", f"+{growth:.0f} MB", "flat after 5", growth < 100)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
