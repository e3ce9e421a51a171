"""Benchmark: following a big live run's dashboard/ streams.

Builds, in a temp dir, a run whose dashboard/ holds a metrics.jsonl of
2,000,000 lines and gpu_util hourly partitions over 48 hours (8 GPUs, one
record per GPU every 10 s), then prints:

- first load: the first RunFollower.poll (parse everything), its time and peak RSS;
- a poll that finds 10 new lines (target: independent of file size, <= 5 ms),
  measured on the big run and on a small one;
- a poll that finds nothing (target: <= 1 ms per stream);
- the first load with recent_hours=2, and a one-hour window query afterwards.

The files are generated in a child process so the parent's peak RSS is the reader's.

    python bench/follow.py [--lines 2000000] [--hours 48] [--gpus 8]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BASE_TS = 1_787_223_000.0  # 2026-08-20T10:10Z
GPU_PERIOD = 10.0
TARGET_NEW_LINES_MS = 5.0
TARGET_IDLE_MS_PER_STREAM = 1.0


def _metric_line(i: int, ts: float) -> str:
    step = i // 5
    phase = i % 5
    if phase == 0:
        key, metrics = (
            "rollout/step",
            {
                "rollout/raw_reward": round(0.2 + (i % 997) / 2000, 6),
                "rollout/response_len/mean": round(900 + (i % 113) * 1.37, 2),
                "rollout/truncated_ratio": round((i % 7) / 70, 6),
                "perf/rollout_time": round(20 + (i % 13) * 0.5, 3),
            },
        )
    elif phase == 4:
        key, metrics = (
            "rollout/step",
            {
                "perf/actor_train_mfu": round(0.3 + (i % 31) / 1000, 6),
                "perf/mfu_peak_tflops": 989.0,
                "perf/step_time": round(45 + (i % 17) * 0.1, 3),
                "perf/train_time": round(20 + (i % 11) * 0.1, 3),
            },
        )
    else:
        step = step * 3 + phase - 1
        key, metrics = (
            "train/step",
            {
                "train/loss": round(0.5 - (i % 1009) / 5000, 6),
                "train/pg_loss": round(((i % 41) - 20) / 2000, 6),
                "train/grad_norm": round(0.3 + (i % 53) / 500, 6),
                "train/pg_clipfrac": round((i % 29) / 3000, 6),
            },
        )
    metrics[key] = step
    record = {"ts": round(ts, 3), "step_key": key, "step": step, "metrics": metrics}
    return json.dumps(record, separators=(",", ":"))


def generate(run_dir: Path, lines: int, hours: int, gpus: int) -> None:
    """Write the synthetic run (meta.json, metrics.jsonl, gpu_util/ partitions)."""
    dash = run_dir / "dashboard"
    (dash / "gpu_util").mkdir(parents=True, exist_ok=True)
    meta = {"run_name": "bench", "start_ts": BASE_TS, "args": {}, "schema_version": 1}
    (dash / "meta.json").write_text(json.dumps(meta))
    span = hours * 3600.0
    with open(dash / "metrics.jsonl", "w") as out:
        batch: list[str] = []
        for i in range(lines):
            batch.append(_metric_line(i, BASE_TS + span * i / lines))
            if len(batch) == 10_000:
                out.write("\n".join(batch) + "\n")
                batch.clear()
        if batch:
            out.write("\n".join(batch) + "\n")
    hour0 = BASE_TS - BASE_TS % 3600
    for h in range(hours):
        start = hour0 + h * 3600
        name = time.strftime("%Y%m%d_%H", time.gmtime(start))
        rows = []
        for k in range(int(3600 / GPU_PERIOD)):
            ts = start + k * GPU_PERIOD
            for gpu in range(gpus):
                rows.append(
                    f'{{"ts":{ts},"node":"10.0.0.7","gpu":{gpu},"util":{(k * 7 + gpu) % 100},'
                    f'"mem_mb":{60000 + gpu * 250},"power_w":{150 + (k % 50) * 9}}}'
                )
        (dash / "gpu_util" / f"{name}.jsonl").write_text("\n".join(rows) + "\n")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e3:.3f} ms, max {max(samples) * 1e3:.3f} ms"


def _new_lines_poll(run_dir: Path, follower: object, now: float, start: int, rounds: int = 30) -> list[float]:
    """Append 10 metrics lines, poll, time the poll; ``rounds`` times."""
    from miles_tui.core.follow import RunFollower

    assert isinstance(follower, RunFollower)
    times = []
    index = start
    path = run_dir / "dashboard" / "metrics.jsonl"
    for _ in range(rounds):
        with open(path, "a") as out:
            out.write("".join(_metric_line(index + j, now + j) + "\n" for j in range(10)))
        index += 10
        t = time.perf_counter()
        delta = follower.poll(now)
        times.append(time.perf_counter() - t)
        assert len(delta.metric_records) == 10, delta.metric_records
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--hours", type=int, default=48)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--generate", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        generate(Path(args.generate), args.lines, args.hours, args.gpus)
        return

    from miles_tui.core.follow import RunFollower
    from miles_tui.core.telemetry.partitions import HOUR_SECONDS

    with tempfile.TemporaryDirectory(prefix="miles-tui-bench-") as tmp:
        big, small = Path(tmp) / "big", Path(tmp) / "small"
        t = time.perf_counter()
        for where, lines, hours in ((big, args.lines, args.hours), (small, 10_000, 2)):
            cmd = [sys.executable, __file__, "--generate", str(where), "--lines", str(lines)]
            subprocess.run([*cmd, "--hours", str(hours), "--gpus", str(args.gpus)], check=True)
        size = sum(f.stat().st_size for f in (big / "dashboard").rglob("*.jsonl"))
        gpu_files = len(list((big / "dashboard" / "gpu_util").iterdir()))
        print(f"generated in {time.perf_counter() - t:.1f} s: {args.lines:,} metrics lines, "
              f"{gpu_files} gpu_util partitions x {args.gpus} GPUs, {size / 2**20:.0f} MiB")  # fmt: skip
        now = BASE_TS + args.hours * 3600.0

        rss0 = _rss_mb()
        t = time.perf_counter()
        follower = RunFollower(big)
        first = follower.poll(now)
        load = time.perf_counter() - t
        counts = follower.dashboard.record_counts()
        print(f"first load: {load:.2f} s; {counts['metrics']:,} metrics records, "
              f"{counts['gpu_util']:,} gpu_util records")  # fmt: skip
        print(f"  RSS: before {rss0:.0f} MiB, after {_rss_mb():.0f} MiB, peak {_peak_rss_mb():.0f} MiB")
        assert not first.problems

        streams = 2  # metrics + gpu_util (meta.json is one stat more)
        idle = []
        for _ in range(300):
            t = time.perf_counter()
            delta = follower.poll(now)
            idle.append(time.perf_counter() - t)
            assert delta.is_empty
        per_stream = statistics.median(idle) / streams * 1e3
        print(f"poll finding nothing ({gpu_files + 2} files followed): {_ms(idle)}; "
              f"{per_stream:.3f} ms per stream   goal <= {TARGET_IDLE_MS_PER_STREAM} ms   "
              f"{_verdict(per_stream <= TARGET_IDLE_MS_PER_STREAM)}")  # fmt: skip

        busy_big = _new_lines_poll(big, follower, now, args.lines)
        small_follower = RunFollower(small)
        small_follower.poll(now)
        busy_small = _new_lines_poll(small, small_follower, now, 10_000)
        worst = max(statistics.median(busy_big), statistics.median(busy_small)) * 1e3
        print(f"poll finding 10 new lines: big run {_ms(busy_big)}; small run {_ms(busy_small)}   "
              f"goal <= {TARGET_NEW_LINES_MS} ms, either size   {_verdict(worst <= TARGET_NEW_LINES_MS)}")  # fmt: skip

        t = time.perf_counter()
        windowed = RunFollower(big, recent_hours=2)
        windowed.poll(now)
        recent = time.perf_counter() - t
        parsed = sum(p.loaded for p in windowed.dashboard.partitions("gpu_util"))
        t = time.perf_counter()
        hour = windowed.dashboard.records("gpu_util", now - 30 * HOUR_SECONDS, now - 29 * HOUR_SECONDS)
        query = time.perf_counter() - t
        print(f"first load with recent_hours=2: {recent:.2f} s ({parsed} gpu_util partitions parsed); "
              f"one-hour window query 30 h back: {query * 1e3:.1f} ms, {len(hour):,} records")  # fmt: skip


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


if __name__ == "__main__":
    main()
