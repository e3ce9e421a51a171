"""Benchmark: opening one big step, against the floor of loading its files with torch.

Builds (once; reused from ``--dir``) a run with the project's own writer
(:mod:`miles_tui.core.synth.demo` over :mod:`miles_tui.core.synth.writer`): 1,024 samples, responses uniform in
256..8,192 tokens, prompts 64..1,024, layout dp8 x cp2 (tp1 pp1, gated
writers: 16 train files), thd, every per-token field and multi-turn loss
masks. Then prints, each the MEDIAN over ``--repeats`` fresh processes:

1. floor: ``import torch`` + ``torch.load(..., weights_only=False)`` of the
   step's rollout file and all its train files (all kept alive, as a reader
   joining them must): wall time and peak RSS;
2. cold: ``miles-tui export RUN_DIR --step N > /dev/null`` with an empty
   summary cache (target: time <= 0.9 x floor, peak RSS <= floor);
3. warm: the same command with the cache populated (target: time <= 0.1 x
   floor, and torch never imported), plus the first ``Run.summary()`` of a
   fresh process with the cache populated (target: <= 50 ms);
4. tokens: ``tokens_export`` of the longest sample once its step is open
   (target: <= 100 ms).

Wall time is measured around each child from spawn to exit; peak RSS is the
child's own ``ru_maxrss`` from ``os.wait4``. A child's ru_maxrss starts at the
peak of the process it was spawned from, so this process stays small (stdlib
only; the run is built in a child of its own). The files are in the page cache
for every measurement (one untimed read first), so disk speed is not measured.

    python bench/step_open.py [--dir DIR] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ROLLOUT_ID = 0
TARGET_COLD_TIME = 0.9
TARGET_WARM_TIME = 0.1
TARGET_WARM_SUMMARY_MS = 50.0
TARGET_TOKENS_MS = 100.0


@dataclass(frozen=True)
class BenchRun:
    """The shape of the benchmark run (a built run is reused only when this matches)."""

    samples: int
    response_len_min: int
    response_len_max: int
    prompt_len_min: int
    prompt_len_max: int
    group_size: int = 8
    layout: str = "dp8 cp2 tp1 pp1"
    vocab_size: int = 151_936
    truncation_rate: float = 0.05
    multi_turn_rate: float = 0.35
    seed: int = 0
    version: int = 1


FULL = BenchRun(samples=1024, response_len_min=256, response_len_max=8192, prompt_len_min=64, prompt_len_max=1024)
QUICK = BenchRun(samples=64, response_len_min=32, response_len_max=512, prompt_len_min=8, prompt_len_max=64)


# --- building ------------------------------------------------------------------------------------


def build(run_dir: Path, shape: BenchRun) -> None:
    """Write step ROLLOUT_ID of the run into ``run_dir``, unless it is already there."""
    stamp = run_dir / "bench_run.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == asdict(shape):
        print(f"reusing the run in {run_dir}")
        return
    import numpy as np

    from miles_tui.core.synth.demo import write_demo_step
    from miles_tui.core.synth.demo_batch import DemoConfig
    from miles_tui.core.synth.layout import ParallelLayout

    for sub in ("rollout_data", "train_data", "trajectory", "dashboard"):
        shutil.rmtree(run_dir / sub, ignore_errors=True)
    config = DemoConfig(
        samples_per_step=shape.samples,
        group_size=shape.group_size,
        response_len_min=shape.response_len_min,
        response_len_max=shape.response_len_max,
        prompt_len_min=shape.prompt_len_min,
        prompt_len_max=shape.prompt_len_max,
        layout=ParallelLayout.parse(shape.layout),
        qkv_format="thd",
        writers="gated",
        seed=shape.seed,
        truncation_rate=shape.truncation_rate,
        multi_turn_rate=shape.multi_turn_rate,
        eval_every=0,
        vocab_size=shape.vocab_size,
    )
    started = time.perf_counter()
    print(f"building {shape.samples} samples into {run_dir} ...", flush=True)
    step = write_demo_step(run_dir, ROLLOUT_ID, config, np.random.default_rng([shape.seed, ROLLOUT_ID]), time.time())
    # An hour old, as a finished step of a live run: visible without waiting, never "still writing".
    old = time.time() - 3600
    for path in run_dir.rglob("*.pt"):
        os.utime(path, (old, old))
    stamp.write_text(json.dumps(asdict(shape)))
    print(f"built {step.train_files} train files in {time.perf_counter() - started:.1f}s")


def _step_files(run_dir: Path) -> list[Path]:
    rollout = run_dir / "rollout_data" / f"{ROLLOUT_ID}.pt"
    shards = sorted((run_dir / "train_data").glob(f"{ROLLOUT_ID}_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    return [rollout, *shards]


# --- measuring -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """One child process."""

    seconds: float
    """Spawn to exit."""
    peak_rss_mb: float
    """The child's own ru_maxrss."""
    report: dict[str, Any]
    """What the child printed on its last stderr line as JSON (if it did)."""


def measure(argv: list[str], env: dict[str, str] | None = None) -> Measured:
    """Run ``argv`` with stdout to /dev/null; its wall time and peak RSS (from wait4)."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{stderr}")
    report: dict[str, Any] = {}
    lines = stderr.strip().splitlines()
    if lines and lines[-1].startswith("{"):
        report = json.loads(lines[-1])
    return Measured(seconds, usage.ru_maxrss / 1024, report)


_FLOOR = """
import sys, torch
loaded = [torch.load(f, map_location="cpu", weights_only=False) for f in sys.argv[1:]]
"""

# Runs the console script's entry point in-process and reports whether torch got imported.
_EXPORT_CHECKED = """
import json, sys
from miles_tui.tui.cli import main
code = main(sys.argv[1:])
sys.stderr.write("\\n" + json.dumps({"code": code, "torch": "torch" in sys.modules,
                                      "numpy": "numpy" in sys.modules}) + "\\n")
sys.exit(code)
"""

_WARM_SUMMARY = """
import json, sys, time
from miles_tui.core.dump.run import Run
run = Run(sys.argv[1])
now = time.time()
t0 = time.perf_counter()
summary = run.summary(int(sys.argv[2]), False, now)
first = time.perf_counter() - t0
again = []
for _ in range(5):
    t0 = time.perf_counter()
    run.summary(int(sys.argv[2]), False, now)
    again.append(time.perf_counter() - t0)
sys.stderr.write(json.dumps({"first_ms": first * 1e3, "again_ms": min(again) * 1e3,
                             "rows": len(summary.rows), "torch": "torch" in sys.modules}) + "\\n")
"""

_TOKENS = """
import json, sys, time
from miles_tui.core.commands.export import tokens_export
from miles_tui.core.dump.run import Run
run = Run(sys.argv[1])
rid, now = int(sys.argv[2]), time.time()
opened = run.open(rid, False, now)
longest = max(opened.summary.rows, key=lambda r: r.total_length)
t0 = time.perf_counter()
payload = tokens_export(run, rid, False, longest.sample_index, now)
first = time.perf_counter() - t0
again = []
for _ in range(3):
    t0 = time.perf_counter()
    tokens_export(run, rid, False, longest.sample_index, now)
    again.append(time.perf_counter() - t0)
sys.stderr.write(json.dumps({"first_ms": first * 1e3, "again_ms": min(again) * 1e3,
                             "total_len": payload["total_len"], "torch": "torch" in sys.modules}) + "\\n")
"""


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _row(name: str, value: str, target: str, ok: bool | None) -> str:
    verdict = "" if ok is None else ("PASS" if ok else "FAIL")
    return f"{name:<34} {value:>14}  {target:<30} {verdict}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to build (or reuse) the run; a temp dir if omitted")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per figure (median; >= 3)")
    parser.add_argument("--quick", action="store_true", help="a small run, for smoke checks only")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < (1 if args.quick else 3):
        parser.error("--repeats must be >= 3 (a median of fresh processes)")
    shape = QUICK if args.quick else FULL
    scratch = Path(tempfile.mkdtemp(prefix="miles-tui-bench-"))
    try:
        run_dir = (args.dir or scratch / "run").absolute()
        run_dir.mkdir(parents=True, exist_ok=True)
        if args.build_only:
            build(run_dir, shape)
            return 0
        # Built in a child: a child's ru_maxrss starts at its parent's RSS (it is forked from it),
        # so this process must stay small (stdlib only, never numpy or torch).
        quick = ["--quick"] if args.quick else []
        subprocess.run([sys.executable, __file__, "--build-only", "--dir", str(run_dir), *quick], check=True)
        files = _step_files(run_dir)
        total_mb = sum(f.stat().st_size for f in files) / 2**20
        print(f"step {ROLLOUT_ID}: rollout file + {len(files) - 1} train files, {total_mb:.0f} MB")
        for path in files:  # page cache: measure decoding, not the disk (in chunks: keep this process small)
            with open(path, "rb") as handle:
                while handle.read(1 << 20):
                    pass
        # The console script installed beside this interpreter (not a version-manager shim in PATH,
        # whose own start-up is not miles-tui's).
        beside = Path(sys.executable).with_name("miles-tui")
        exe = str(beside) if beside.is_file() else shutil.which("miles-tui")
        export_cmd = [exe] if exe else [sys.executable, "-m", "miles_tui.tui.cli"]
        export_argv = [*export_cmd, "export", str(run_dir), "--step", str(ROLLOUT_ID)]
        base_env = {k: v for k, v in os.environ.items() if k != "MILES_TUI_CACHE_DIR"}

        def env_with(cache: Path) -> dict[str, str]:
            return {**base_env, "MILES_TUI_CACHE_DIR": str(cache)}

        floor, cold = [], []
        for i in range(args.repeats):  # interleaved: a busy machine slows both alike
            floor.append(measure([sys.executable, "-c", _FLOOR, *map(str, files)]))
            cold.append(measure(export_argv, env_with(scratch / f"cold-cache-{i}")))
        warm_cache = scratch / "warm-cache"
        cold_checked = measure(
            [sys.executable, "-c", _EXPORT_CHECKED, *export_argv[len(export_cmd) :]], env_with(warm_cache)
        )
        warm = [measure(export_argv, env_with(warm_cache)) for _ in range(args.repeats)]
        warm_checked = measure(
            [sys.executable, "-c", _EXPORT_CHECKED, *export_argv[len(export_cmd) :]], env_with(warm_cache)
        )
        summary = [
            measure([sys.executable, "-c", _WARM_SUMMARY, str(run_dir), str(ROLLOUT_ID)], env_with(warm_cache))
            for _ in range(args.repeats)
        ]
        tokens = [
            measure([sys.executable, "-c", _TOKENS, str(run_dir), str(ROLLOUT_ID)], env_with(warm_cache))
            for _ in range(args.repeats)
        ]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    floor_s = _median([m.seconds for m in floor])
    floor_mb = _median([m.peak_rss_mb for m in floor])
    cold_s = _median([m.seconds for m in cold])
    cold_mb = _median([m.peak_rss_mb for m in cold])
    warm_s = _median([m.seconds for m in warm])
    warm_mb = _median([m.peak_rss_mb for m in warm])
    summary_ms = _median([m.report["first_ms"] for m in summary])
    summary_again_ms = _median([m.report["again_ms"] for m in summary])
    tokens_ms = _median([m.report["first_ms"] for m in tokens])
    tokens_again_ms = _median([m.report["again_ms"] for m in tokens])
    warm_torch = bool(warm_checked.report.get("torch")) or any(m.report.get("torch") for m in summary)
    cold_torch = bool(cold_checked.report.get("torch"))
    warm_numpy = bool(warm_checked.report.get("numpy"))

    cold_limit, warm_limit = TARGET_COLD_TIME * floor_s, TARGET_WARM_TIME * floor_s
    figures: list[tuple[str, str, str, bool | None]] = [
        ("floor: torch.load, time", f"{floor_s:.3f} s", "(reference)", None),
        ("floor: torch.load, peak RSS", f"{floor_mb:.0f} MB", "(reference)", None),
        ("cold export, time", f"{cold_s:.3f} s", f"<= {cold_limit:.3f} s (0.9 x floor)", cold_s <= cold_limit),
        ("cold export, peak RSS", f"{cold_mb:.0f} MB", f"<= {floor_mb:.0f} MB (floor)", cold_mb <= floor_mb),
        ("cold export, imports torch", str(cold_torch), "False", not cold_torch),
        ("warm export, time", f"{warm_s:.3f} s", f"<= {warm_limit:.3f} s (0.1 x floor)", warm_s <= warm_limit),
        ("warm export, peak RSS", f"{warm_mb:.0f} MB", "(info)", None),
        ("warm export, imports torch", str(warm_torch), "False", not warm_torch),
        ("warm export, imports numpy", str(warm_numpy), "(info)", None),
        ("warm Run.summary(), first call", f"{summary_ms:.1f} ms", "<= 50 ms", summary_ms <= TARGET_WARM_SUMMARY_MS),
        ("warm Run.summary(), repeated", f"{summary_again_ms:.1f} ms", "(info)", None),
        ("token payload, longest sample", f"{tokens_ms:.1f} ms", "<= 100 ms", tokens_ms <= TARGET_TOKENS_MS),
        ("token payload, repeated", f"{tokens_again_ms:.1f} ms", "(info)", None),
    ]
    results = [_row(*figure) for figure in figures]
    longest = tokens[0].report.get("total_len")
    print(
        f"\nmedian of {args.repeats} fresh processes each; {shape.samples} samples, {shape.layout}, "
        f"longest sample {longest} tokens{' (QUICK: smoke check only)' if args.quick else ''}\n"
    )
    no_pyc = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    bytecode = "off (PYTHONDONTWRITEBYTECODE: every start compiles)" if no_pyc else "on"
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {load:.1f}, .pyc cache {bytecode}\n")
    print(_row("figure", "value", "target", None))
    print("-" * 88)
    print("\n".join(results))
    failed = sum(line.endswith("FAIL") for line in results)
    print(f"\n{'all targets pass' if not failed else f'{failed} target(s) FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
