"""A synthetic but realistic miles run, for ``miles-tui --demo`` and the benchmarks.

:func:`write_demo_step` writes one step of a fully-async GRPO run through
:mod:`miles_tui.core.synth.writer`, so the files are exactly what miles writes: the rollout
batch, every writing rank's CP-sliced train shard, a trajectory sidecar, an
eval batch every ``eval_every`` steps, and the ``dashboard/`` telemetry
(``meta.json``, ``metrics.jsonl`` with miles' perf figures, ``data_buffer.jsonl``, hourly ``gpu_util/``,
``phases/`` and, from two sglang engines, ``engine_series/``; each sample's lifecycle events in
``trajectories/``).
Each step has what a monitor must show: zero-std groups, truncated samples at
the response cap, multi-turn samples whose tool-output tokens are masked,
chat prompts with ``tool`` messages, weight versions mixed across turns
(sometimes the non-numeric ``"default"``), rollout and train log-probs that
differ slightly with a few outlier tokens, entropy, GRPO advantages and ref
values.

The content is a pure function of the config, the step and ``rng``; the only
clock is the ``now`` argument. :func:`run_demo` is the one loop that waits
between steps, and it takes its clock and sleep as arguments;
``python -m miles_tui.core.synth.demo DIR`` runs it beside the monitor.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from miles_tui.core.synth.demo_batch import EVAL_INDEX_BASE, DemoBatch, DemoConfig, generate_batch
from miles_tui.core.synth.demo_cleanup import delete_when_orphaned
from miles_tui.core.synth.demo_trajectory import step_events
from miles_tui.core.synth.dump_files import append_jsonl, save_rollout, write_json, write_trajectory
from miles_tui.core.synth.layout import ParallelLayout
from miles_tui.core.synth.writer import write_step


@dataclass(frozen=True)
class DemoStep:
    """What one :func:`write_demo_step` call produced."""

    rollout_id: int
    """The step."""
    sample_indices: tuple[int, ...]
    """The ``index`` of every train sample, in rollout order."""
    zero_std_groups: tuple[int, ...]
    """Groups generated with all-equal rewards."""
    truncated: tuple[int, ...]
    """Indices of samples cut at the response cap."""
    multi_turn: tuple[int, ...]
    """Indices of samples with masked tool-output spans."""
    evaluated: bool
    """Whether an eval batch was written at this step."""
    train_files: int
    """Number of train files written."""


def _rounded(values: Mapping[str, float]) -> dict[str, float]:
    return {name: round(value, 6) for name, value in values.items()}


def _hour(ts: float) -> str:
    return time.strftime("%Y%m%d_%H", time.gmtime(ts))


def _pace(config: DemoConfig, rid: int) -> tuple[float, int]:
    """Step ``rid``'s extra rollout time (a fraction of the step) and the groups left in the data buffer when its
    rollout began: every fourth step (2, 6, 10, ...) finds the buffer empty and generates everything, so training
    waits longer. Drawn from a generator of their own, so the step's content does not depend on them."""
    pace = np.random.default_rng([config.seed, rid, 27])
    if rid % 4 == 2:
        return float(pace.uniform(0.1, 0.25)), 0
    return 0.0, int(pace.integers(2, 7))


def _telemetry(
    run_dir: Path,
    rid: int,
    config: DemoConfig,
    batch: DemoBatch,
    rng: np.random.Generator,
    now: float,
    since: float | None = None,
) -> None:
    """Append this step's metrics, phases and GPU samples to ``dashboard/``: a step's length, or from ``since``
    (the step before's end) when that is closer, so steps never overlap in time (the live demo writes one
    every few seconds: overlapping steps scraped the same times twice, their counters read as engine
    restarts and their phases summed past 100 %)."""
    dash = run_dir / "dashboard"
    d = config.step_seconds if since is None else min(config.step_seconds, max(now - since, 1.0))
    t0 = now - d
    starved, buffered = _pace(config, rid)
    rollout_end = t0 + (0.45 + starved) * d
    train_start, train_end = rollout_end + 0.02 * d, min(rollout_end + 0.45 * d, t0 + 0.95 * d)
    if not (dash / "meta.json").exists():
        args: dict[str, Any] = {
            "rollout_max_response_len": config.response_len_max,
            "n_samples_per_prompt": config.group_size,
            "global_batch_size": config.samples_per_step,
            "tensor_model_parallel_size": config.layout.tp,
            "pipeline_model_parallel_size": config.layout.pp,
            "context_parallel_size": config.layout.cp,
            "qkv_format": config.qkv_format,
            "advantage_estimator": "grpo",
        }
        if config.num_rollout is not None:
            args["num_rollout"] = config.num_rollout
        meta = {"run_name": config.run_name, "start_ts": t0, "args": args, "schema_version": 1}
        write_json(dash / "meta.json", meta)
    samples = batch.samples
    mfu = float(np.clip(0.32 + rng.normal(0, 0.02), 0.05, 0.6))
    metrics = [
        (rollout_end, "rollout/step", {
            "rollout/raw_reward": float(np.mean([s["reward"] for s in samples])),
            "rollout/response_len/mean": float(np.mean([s["response_length"] for s in samples])),
            "rollout/truncated_ratio": float(np.mean([s["status"] == "truncated" for s in samples])),
            "perf/rollout_time": rollout_end - t0,
        }),
        (train_end, "train/step", {
            "train/loss": float(0.5 * np.exp(-rid / 60) + rng.normal(0, 0.01)),
            "train/pg_loss": float(rng.normal(0, 0.01)),
            "train/grad_norm": float(abs(rng.normal(0.35, 0.05))),
            "train/pg_clipfrac": float(abs(rng.normal(0.01, 0.004))),
            "train/entropy": float(np.mean([v.mean() for v in batch.per_token["entropy"]])),
        }),
        (now, "rollout/step", {
            "perf/actor_train_mfu": mfu, "perf/mfu_peak_tflops": 989.0,
            "perf/train_wait_time": train_start - t0, "perf/train_time": train_end - train_start,
            "perf/step_time": train_end - t0, "perf/wait_time_ratio": (train_start - t0) / (train_end - t0),
        }),
    ]  # fmt: skip
    if config.eval_every and rid % config.eval_every == 0:
        metrics.append((now, "eval/step", {"eval/aime": float(np.clip(0.2 + rid / 200, 0, 0.9))}))
    lines = [
        {"ts": round(ts, 3), "step_key": key, "step": rid, "metrics": {**_rounded(values), key: rid}}
        for ts, key, values in metrics
    ]
    append_jsonl(dash / "metrics.jsonl", lines)
    append_jsonl(dash / "data_buffer.jsonl", [{"ts": round(t0, 3), "length": buffered}])
    phases: list[dict[str, Any]] = [
        {"name": "rollout", "t0": t0, "t1": rollout_end, "node": "10.0.0.200", "gpus": [], "rank": -1,
         "role": "rollout_manager"},
    ]  # fmt: skip
    gpu_lines: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] = []  # one snapshot a step, at the start of training (no rng: fixed values)
    for coords in config.layout.ranks():
        node = f"10.0.0.{1 + coords.rank // config.gpus_per_node}"
        gpu = coords.rank % config.gpus_per_node
        skew = round(0.05 * gpu, 3)
        where = {"node": node, "gpus": [gpu], "rank": coords.rank, "role": "train"}
        phases += [
            {"name": "train_wait", "t0": t0, "t1": train_start + skew, **where},
            {"name": "actor_train", "t0": train_start + skew, "t1": -1.0, **where},
            {"name": "actor_train", "t0": train_start + skew, "t1": train_end + skew, **where},
            {"name": "update_weights", "t0": train_end + skew, "t1": now, **where},
        ]
        processes.append({"ts": round(train_start, 3), "node": node, "gpu": gpu, "pid": 31000 + coords.rank,
                          "name": "ray::MegatronTrainRayActor", "mem_mb": 52000 + 100 * gpu})  # fmt: skip
        ts = np.ceil(t0 / config.gpu_period_s) * config.gpu_period_s
        while ts <= now:
            util = 88.0 if train_start <= ts <= train_end else 25.0
            util = float(np.clip(util + rng.normal(0, 4), 0, 100))
            mem_mb = int(60000 + rng.integers(0, 2000))
            sample = {"ts": float(ts), "node": node, "gpu": gpu, "util": round(util, 1), "mem_mb": mem_mb}
            gpu_lines.append({**sample, "power_w": int(150 + 6 * util)})
            ts += config.gpu_period_s
    phases = [{**p, "t0": round(p["t0"], 3), "t1": round(p["t1"], 3)} for p in phases]
    engines = _engine_scrapes(rid, config, batch, rng, t0, rollout_end, now)
    trajectories = step_events(rid, samples, t0, rollout_end)
    streams = (
        ("phases", phases, "t1"), ("gpu_util", gpu_lines, "ts"), ("engine_series", engines, "ts"),
        ("gpu_processes", processes, "ts"), ("trajectories", trajectories, "ts"),
    )  # fmt: skip
    for stream, records, ts_key in streams:
        by_hour: dict[str, list[dict[str, Any]]] = {}
        for record in records:  # phases go by end hour; an open phase by its start
            stamp = record[ts_key] if record[ts_key] >= 0 else record["t0"]
            by_hour.setdefault(_hour(stamp), []).append(record)
        for hour, chunk in by_hour.items():
            append_jsonl(dash / stream / f"{hour}.jsonl", chunk)


ENGINES = ("http://10.0.0.200:30000", "http://10.0.0.201:30000")
"""The demo's two sglang engines (no dp-attention: no ``dp_rank`` label)."""
ENGINE_SCRAPE_S = 15.0
"""miles' scraper period."""
DEMO_ABORT_RATE = 0.02
"""Share of the demo engines' requests that end aborted, at a steady rate (a counter that fell would read as
an engine restart)."""


def _engine_scrapes(
    rid: int,
    config: DemoConfig,
    batch: DemoBatch,
    rng: np.random.Generator,
    t0: float,
    rollout_end: float,
    now: float,
) -> list[dict[str, Any]]:
    """The engines' sglang gauges and counters scraped every :data:`ENGINE_SCRAPE_S` over one step, as miles'
    scraper writes them: busy while the rollout generates, idle while the trainer trains. The counters are
    cumulative over the run (a step's requests are its samples, split between the engines)."""
    per_engine = config.samples_per_step / len(ENGINES)
    lines: list[dict[str, Any]] = []
    ts = np.floor(t0 / ENGINE_SCRAPE_S) * ENGINE_SCRAPE_S + ENGINE_SCRAPE_S  # after t0: the step before scraped it
    while ts <= now:
        busy = ts <= rollout_end
        done = min(max((ts - t0) / max(rollout_end - t0, 1e-9), 0.0), 1.0)
        for addr in ENGINES:
            running = float(rng.integers(8, 24)) if busy else 0.0
            gauges = {
                "sglang_num_running_reqs": running,
                "sglang_num_queue_reqs": float(rng.integers(0, 4)) if busy else 0.0,
                "sglang_token_usage": round(float(np.clip(0.45 + rng.normal(0, 0.05), 0, 1)) if busy else 0.02, 4),
                "sglang_cache_hit_rate": round(float(np.clip(0.6 + rng.normal(0, 0.05), 0, 1)), 4),
                "sglang_gen_throughput": round(float(1800 + rng.normal(0, 120)) if busy else 0.0, 1),
                "sglang_num_requests_total": float(round((rid + done) * per_engine)),
                "sglang_num_aborted_requests_total": float(np.floor((rid + done) * per_engine * DEMO_ABORT_RATE)),
            }
            lines += [
                {"ts": float(ts), "addr": addr, "metric": name, "labels": {}, "value": value}
                for name, value in gauges.items()
            ]
        ts += ENGINE_SCRAPE_S
    return lines


def write_demo_step(
    run_dir: Path | str,
    rid: int,
    config: DemoConfig,
    rng: np.random.Generator,
    now: float | None = None,
    since: float | None = None,
) -> DemoStep:
    """Write step ``rid`` of the demo run (train files, eval, sidecars, telemetry) ending at ``now`` (its
    telemetry starting at ``since``, the step before's end, when that is closer than a step's length)."""
    run_dir = Path(run_dir)
    now = time.time() if now is None else now
    batch = generate_batch(rid, config, rng, base=rid * config.samples_per_step, count=config.samples_per_step)
    written = write_step(
        run_dir, rid, batch.samples, batch.per_token, config.layout,
        qkv_format=config.qkv_format, writers=config.writers, advantage_estimator="grpo",
    )  # fmt: skip
    write_trajectory(run_dir, rid, batch.conversations)
    evaluated = bool(config.eval_every) and rid % config.eval_every == 0
    if evaluated:
        base = EVAL_INDEX_BASE + rid * config.eval_samples
        count = config.eval_samples - config.eval_samples % config.group_size or config.group_size
        evals = generate_batch(rid, config, rng, base=base, count=count)
        save_rollout(run_dir, rid, evals.samples, evaluation=True)
        write_trajectory(run_dir, rid, evals.conversations, evaluation=True)
    _telemetry(run_dir, rid, config, batch, rng, now, since)
    return DemoStep(
        rollout_id=rid,
        sample_indices=tuple(s["index"] for s in batch.samples),
        zero_std_groups=batch.zero_std_groups,
        truncated=tuple(s["index"] for s in batch.samples if s["status"] == "truncated"),
        multi_turn=tuple(s["index"] for s in batch.samples if s["loss_mask"] is not None),
        evaluated=evaluated,
        train_files=len(written.files),
    )


def _next_rollout_id(run_dir: Path) -> int:
    """Continue after the newest step already in ``run_dir`` (a restarted demo appends)."""
    ids = [int(p.stem) for p in (run_dir / "rollout_data").glob("*.pt") if p.stem.isdigit()]
    return max(ids, default=-1) + 1


def run_demo(
    run_dir: Path | str,
    steps_initial: int,
    interval_s: float,
    max_steps: int | None = None,
    *,
    config: DemoConfig | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    keep_going: Callable[[], bool] = lambda: True,
) -> int:
    """Write ``steps_initial`` steps at once (timestamped as the recent past), then one per interval.

    Stops after ``max_steps`` steps in all (never, if None), or as soon as
    ``keep_going()`` is false, and returns how many it wrote.
    """
    run_dir = Path(run_dir)
    config = config or DemoConfig()
    first = _next_rollout_id(run_dir)
    initial = steps_initial if max_steps is None else min(steps_initial, max_steps)
    start = clock()
    written = 0
    previous: float | None = None
    for k in range(initial):
        rid = first + written
        now = start - (initial - 1 - k) * config.step_seconds
        write_demo_step(run_dir, rid, config, np.random.default_rng([config.seed, rid]), now, previous)
        written, previous = written + 1, now
    while (max_steps is None or written < max_steps) and keep_going():
        sleep(interval_s)
        if not keep_going():
            break
        rid = first + written
        now = clock()
        write_demo_step(run_dir, rid, config, np.random.default_rng([config.seed, rid]), now, previous)
        written, previous = written + 1, now
    return written


def _parent_alive(pid: int | None) -> Callable[[], bool]:
    """A check that the monitor which started the demo is still running (a writer must not outlive it)."""
    if pid is None:
        return lambda: True

    def alive() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    return alive


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m miles_tui.core.synth.demo DIR``: keep writing a demo run until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m miles_tui.core.synth.demo", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="directory to fill (created if missing)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between new steps")
    parser.add_argument("--initial", type=int, default=8, help="steps to write at once")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--layout", default="dp2 cp2 tp2 pp2", help="parallel layout, e.g. 'dp2 cp2 tp2 pp2'")
    parser.add_argument("--qkv-format", choices=("thd", "bshd"), default="thd")
    parser.add_argument("--writers", choices=("gated", "all"), default="gated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--parent-pid", type=int, default=None, help="stop when this process exits (the monitor that started us)"
    )
    parser.add_argument(
        "--delete-with-parent",
        type=Path,
        default=None,
        metavar="TEMP_DIR",
        help="a miles-tui-demo-* temp folder to delete once --parent-pid has exited (it died without cleaning up)",
    )
    args = parser.parse_args(argv)
    config = DemoConfig(
        layout=ParallelLayout.parse(args.layout), qkv_format=args.qkv_format, writers=args.writers, seed=args.seed
    )
    parent_alive = _parent_alive(args.parent_pid)
    try:
        run_demo(
            args.run_dir, args.initial, args.interval, args.max_steps, config=config, keep_going=parent_alive,
        )  # fmt: skip
        if args.delete_with_parent is not None and args.parent_pid is not None:
            delete_when_orphaned(args.delete_with_parent, parent_alive, time.sleep)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
