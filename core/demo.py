"""A synthetic but realistic miles run, for ``miles-tui --demo`` and the benchmarks.

:func:`write_demo_step` writes one step of a fully-async GRPO run through
:mod:`core.writer`, so the files are exactly what miles writes: the rollout
batch, every writing rank's CP-sliced train shard, a trajectory sidecar, an
eval batch every ``eval_every`` steps, and the ``dashboard/`` telemetry
(``meta.json``, ``metrics.jsonl``, hourly ``gpu_util/`` and ``phases/``).
Each step has what a monitor must show: zero-std groups, truncated samples at
the response cap, multi-turn samples whose tool-output tokens are masked,
chat prompts with ``tool`` messages, weight versions mixed across turns
(sometimes the non-numeric ``"default"``), rollout and train log-probs that
differ slightly with a few outlier tokens, entropy, GRPO advantages and ref
values.

The content is a pure function of the config, the step and ``rng``; the only
clock is the ``now`` argument. :func:`run_demo` is the one loop that waits
between steps, and it takes its clock and sleep as arguments;
``python -m core.demo DIR`` runs it beside the monitor.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from core.cp import QkvFormat
from core.demo_cleanup import delete_when_orphaned
from core.writer import (
    ParallelLayout,
    Writers,
    append_jsonl,
    make_sample,
    normalize_rewards,
    save_rollout,
    write_json,
    write_step,
    write_trajectory,
)

EVAL_INDEX_BASE = 10_000_000
"""Eval sample indices start here, as in miles' eval batches."""

_TOOLS = ("search", "python", "calculator")


@dataclass(frozen=True)
class DemoConfig:
    """Shape of the synthetic run."""

    samples_per_step: int = 32
    """Samples per rollout batch (a multiple of ``group_size`` and of the DP size)."""
    group_size: int = 4
    """Samples per prompt (``n_samples_per_prompt``): one GRPO group."""
    response_len_min: int = 8
    """Shortest response."""
    response_len_max: int = 96
    """The response cap (``rollout_max_response_len``); truncated samples hit it."""
    prompt_len_min: int = 4
    """Shortest prompt, in tokens."""
    prompt_len_max: int = 24
    """Longest prompt, in tokens."""
    layout: ParallelLayout = field(default_factory=lambda: ParallelLayout(tp=2, pp=2, cp=2, dp=2))
    """The training job's parallel layout."""
    qkv_format: QkvFormat = "thd"
    """Attention layout of the train side: thd or bshd."""
    writers: Writers = "gated"
    """Which ranks write train files: current miles (``gated``) or every rank (``all``)."""
    seed: int = 0
    """Seeds each step's generator (with the rollout id)."""
    truncation_rate: float = 0.2
    """Fraction of samples cut at the response cap."""
    multi_turn_rate: float = 0.35
    """Fraction of samples that call a tool (masked tool-output spans)."""
    zero_std_rate: float = 0.25
    """Fraction of groups whose rewards are all equal (at least one per step)."""
    eval_every: int = 5
    """An eval batch at every step divisible by this (0: never)."""
    eval_samples: int = 8
    """Samples per eval batch."""
    vocab_size: int = 100
    """Token ids are drawn below this."""
    step_seconds: float = 30.0
    """Simulated wall time of one step in the telemetry."""
    gpu_period_s: float = 10.0
    """Interval of the gpu_util samples."""
    gpus_per_node: int = 8
    """GPUs per simulated node."""
    run_name: str = "demo"
    """``dashboard/meta.json`` run_name."""

    def __post_init__(self) -> None:
        if self.samples_per_step % self.group_size or self.samples_per_step % self.layout.dp:
            raise ValueError(
                f"samples_per_step {self.samples_per_step} must be a multiple of group_size "
                f"{self.group_size} and of the DP size {self.layout.dp}"
            )
        if not 2 <= self.response_len_min < self.response_len_max:
            raise ValueError("need 2 <= response_len_min < response_len_max")
        if not 1 <= self.prompt_len_min <= self.prompt_len_max:
            raise ValueError("need 1 <= prompt_len_min <= prompt_len_max")


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


@dataclass(frozen=True)
class _Batch:
    """One generated batch before it is written."""

    samples: list[dict[str, Any]]
    """Rollout samples, in rollout order."""
    per_token: dict[str, list[npt.NDArray[np.float32]]]
    """Full-response model outputs per sample."""
    conversations: list[dict[str, Any]]
    """Trajectory sidecar records."""
    zero_std_groups: tuple[int, ...]
    """Groups with all-equal rewards."""


def _version(rid: int, lag: int) -> str:
    return str(max(rid - lag, 0))


def _spans(rng: np.random.Generator, length: int) -> list[tuple[str, int]] | None:
    """Alternating assistant/tool spans summing to ``length``; None if it is too short."""
    turns = int(rng.integers(2, 4))
    tools = [int(rng.integers(2, 7)) for _ in range(turns - 1)]
    generated = length - sum(tools)
    if generated < 2 * turns:
        return None
    cuts = np.sort(rng.choice(np.arange(1, generated), size=turns - 1, replace=False))
    sizes = np.diff(np.concatenate([[0], cuts, [generated]])).tolist()
    spans: list[tuple[str, int]] = []
    for turn, size in enumerate(sizes):
        spans.append(("assistant", int(size)))
        if turn < len(tools):
            spans.append(("tool", tools[turn]))
    return spans


def _generate(rid: int, config: DemoConfig, rng: np.random.Generator, *, base: int, count: int) -> _Batch:
    """``count`` samples with indices from ``base``: exact counts of zero-std groups, truncations, tool calls."""
    n_groups = count // config.group_size
    n_zero = max(1, round(config.zero_std_rate * n_groups))
    zero_groups = {int(g) for g in rng.choice(n_groups, size=min(n_zero, n_groups), replace=False)}
    all_one = {g for g in zero_groups if rng.random() < 0.4}
    eligible = [i for i in range(count) if i // config.group_size not in all_one]
    n_trunc = min(len(eligible), round(config.truncation_rate * count))
    truncated = {int(i) for i in rng.choice(eligible, size=n_trunc, replace=False)}
    multi = {int(i) for i in rng.choice(count, size=round(config.multi_turn_rate * count), replace=False)}
    p_correct = 0.25 + 0.5 * (1 - np.exp(-rid / 40))
    samples: list[dict[str, Any]] = []
    spans_of: list[list[tuple[str, int]]] = []
    for i in range(count):
        group = i // config.group_size
        index = base + i
        length = (
            config.response_len_max
            if i in truncated
            else int(rng.integers(config.response_len_min, config.response_len_max))
        )
        spans = _spans(rng, length) if i in multi else None
        spans = spans or [("assistant", length)]
        spans_of.append(spans)
        turns = sum(1 for role, _ in spans if role == "assistant")
        lag = int(rng.choice([0, 1, 1, 2, 2, 3]))
        versions = [_version(rid, max(lag - t, 0)) for t in range(turns)]
        if rng.random() < 0.04:
            versions[-1] = "default"
        if group in zero_groups:
            reward = 1.0 if group in all_one else 0.0
        else:
            reward = 0.0 if i in truncated else float(rng.random() < p_correct)
        prompt_tokens = rng.integers(
            0, config.vocab_size, int(rng.integers(config.prompt_len_min, config.prompt_len_max + 1))
        )
        response_tokens = rng.integers(0, config.vocab_size, length)
        mask = np.concatenate([np.full(n, int(role == "assistant"), dtype=np.int64) for role, n in spans])
        rollout_lp = np.where(mask > 0, -rng.gamma(0.6, 0.5, length), 0.0)
        aborted = i not in truncated and group not in zero_groups and rng.random() < 0.02
        if turns > 1:
            prompt: Any = [
                {"role": "system", "content": "You are a careful assistant with tools."},
                {"role": "user", "content": f"Task {index}: {' '.join(map(str, prompt_tokens[:6]))}"},
                {"role": "assistant", "content": "Let me check with a tool."},
                {"role": "tool", "name": _TOOLS[index % 3], "content": f"result for {index}"},
            ]
        else:
            prompt = f"prompt {index}: {' '.join(map(str, prompt_tokens))}"
        cached = int(rng.integers(0, len(prompt_tokens) + 1))
        draft = int(rng.integers(length, 3 * length + 1))
        samples.append(
            make_sample(
                group_index=group,
                index=index,
                prompt=prompt,
                tokens=[int(t) for t in np.concatenate([prompt_tokens, response_tokens])],
                response=" ".join(f"t{t}" for t in response_tokens),
                response_length=length,
                label=str(int(rng.integers(0, 100))),
                reward=0.0 if aborted else reward,
                loss_mask=[int(m) for m in mask] if turns > 1 else None,
                weight_versions=versions,
                rollout_log_probs=[float(v) for v in rollout_lp],
                remove_sample=aborted,
                status="truncated" if i in truncated else "aborted" if aborted else "completed",
                non_generation_time=round(float(rng.uniform(0.05, 2.0)), 3) if turns > 1 else 0.0,
                spec_info={
                    "spec_accept_token_num": int(rng.integers(0, draft + 1)),
                    "spec_draft_token_num": draft,
                    "spec_verify_ct": length,
                    "completion_token_num": length,
                },
                prefix_cache_info={"cached_tokens": cached, "total_prompt_tokens": len(prompt_tokens)},
            )
        )
    return _Batch(
        samples,
        _model_outputs(samples, rng),
        [_conversation(s, spans) for s, spans in zip(samples, spans_of, strict=True) if len(spans) > 1],
        tuple(sorted(zero_groups)),
    )


def _model_outputs(samples: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> dict[str, list[Any]]:
    """Train-side per-token values: close to the engine's, a few outliers, GRPO advantages."""
    normalized = normalize_rewards([s["reward"] for s in samples], [s["group_index"] for s in samples], "grpo")
    out: dict[str, list[Any]] = {k: [] for k in ("log_probs", "entropy", "ref_log_probs", "ref_entropy")}
    out["advantages"], out["returns"] = [], []
    for s, adv in zip(samples, normalized, strict=True):
        n = s["response_length"]
        rollout = np.asarray(s["rollout_log_probs"])
        log_probs = np.minimum(rollout + rng.normal(0, 0.02, n), 0.0)
        scored = np.asarray(s["loss_mask"] or [1] * n) > 0  # tool output: the engine scored nothing
        log_probs[~scored] = -rng.gamma(1.0, 1.0, int((~scored).sum()))
        outliers = rng.random(n) < 0.01
        log_probs[outliers] -= rng.uniform(1.5, 4.0, int(outliers.sum()))
        entropy = rng.gamma(1.5, 0.5, n)
        advantages = np.full(n, adv, dtype=np.float32)
        for key, values in (
            ("log_probs", log_probs),
            ("entropy", entropy),
            ("ref_log_probs", np.minimum(log_probs + rng.normal(0, 0.03, n), 0.0)),
            ("ref_entropy", np.abs(entropy * (1 + rng.normal(0, 0.05, n)))),
            ("advantages", advantages),
            ("returns", advantages.copy()),
        ):
            out[key].append(np.asarray(values, dtype=np.float32))
    return out


def _conversation(sample: Mapping[str, Any], spans: Sequence[tuple[str, int]]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = list(sample["prompt"][:2])
    tool = sample["prompt"][3]["name"]
    for turn, (role, size) in enumerate(spans):
        if role == "tool":
            messages.append({"role": "tool", "name": tool, "content": f'{{"tokens": {size}}}'})
        elif turn + 1 < len(spans):
            call = {"function": {"name": tool, "arguments": json.dumps({"id": sample["index"]})}}
            messages.append({"role": "assistant", "content": "Checking.", "tool_calls": [call]})
        else:
            messages.append({"role": "assistant", "content": f"Done after {size} tokens."})
    return {
        "sample_index": sample["index"],
        "group_index": sample["group_index"],
        "status": sample["status"],
        "reward": sample["reward"],
        "prompt": sample["prompt"],
        "messages": messages,
    }


def _rounded(values: Mapping[str, float]) -> dict[str, float]:
    return {name: round(value, 6) for name, value in values.items()}


def _hour(ts: float) -> str:
    return time.strftime("%Y%m%d_%H", time.gmtime(ts))


def _telemetry(
    run_dir: Path, rid: int, config: DemoConfig, batch: _Batch, rng: np.random.Generator, now: float
) -> None:
    """Append this step's metrics, phases and GPU samples to ``dashboard/``."""
    dash = run_dir / "dashboard"
    d = config.step_seconds
    t0 = now - d
    rollout_end, train_start, train_end = t0 + 0.45 * d, t0 + 0.47 * d, t0 + 0.9 * d
    if not (dash / "meta.json").exists():
        args = {
            "rollout_max_response_len": config.response_len_max,
            "n_samples_per_prompt": config.group_size,
            "global_batch_size": config.samples_per_step,
            "tensor_model_parallel_size": config.layout.tp,
            "pipeline_model_parallel_size": config.layout.pp,
            "context_parallel_size": config.layout.cp,
            "qkv_format": config.qkv_format,
            "advantage_estimator": "grpo",
        }
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
            "perf/step_time": d, "perf/train_time": train_end - train_start,
        }),
    ]  # fmt: skip
    if config.eval_every and rid % config.eval_every == 0:
        metrics.append((now, "eval/step", {"eval/aime": float(np.clip(0.2 + rid / 200, 0, 0.9))}))
    lines = [
        {"ts": round(ts, 3), "step_key": key, "step": rid, "metrics": {**_rounded(values), key: rid}}
        for ts, key, values in metrics
    ]
    append_jsonl(dash / "metrics.jsonl", lines)
    phases: list[dict[str, Any]] = [
        {"name": "rollout", "t0": t0, "t1": rollout_end, "node": "10.0.0.200", "gpus": [], "rank": -1,
         "role": "rollout_manager"},
    ]  # fmt: skip
    gpu_lines: list[dict[str, Any]] = []
    for coords in config.layout.ranks():
        node = f"10.0.0.{1 + coords.rank // config.gpus_per_node}"
        gpu = coords.rank % config.gpus_per_node
        skew = round(0.05 * gpu, 3)
        where = {"node": node, "gpus": [gpu], "rank": coords.rank, "role": "train"}
        phases += [
            {"name": "train_wait", "t0": rollout_end, "t1": train_start + skew, **where},
            {"name": "actor_train", "t0": train_start + skew, "t1": -1.0, **where},
            {"name": "actor_train", "t0": train_start + skew, "t1": train_end + skew, **where},
            {"name": "update_weights", "t0": train_end + skew, "t1": now, **where},
        ]
        ts = np.ceil(t0 / config.gpu_period_s) * config.gpu_period_s
        while ts <= now:
            util = 88.0 if train_start <= ts <= train_end else 25.0
            util = float(np.clip(util + rng.normal(0, 4), 0, 100))
            mem_mb = int(60000 + rng.integers(0, 2000))
            sample = {"ts": float(ts), "node": node, "gpu": gpu, "util": round(util, 1), "mem_mb": mem_mb}
            gpu_lines.append({**sample, "power_w": int(150 + 6 * util)})
            ts += config.gpu_period_s
    phases = [{**p, "t0": round(p["t0"], 3), "t1": round(p["t1"], 3)} for p in phases]
    for stream, records, ts_key in (("phases", phases, "t1"), ("gpu_util", gpu_lines, "ts")):
        by_hour: dict[str, list[dict[str, Any]]] = {}
        for record in records:  # phases go by end hour; an open phase by its start
            stamp = record[ts_key] if record[ts_key] >= 0 else record["t0"]
            by_hour.setdefault(_hour(stamp), []).append(record)
        for hour, chunk in by_hour.items():
            append_jsonl(dash / stream / f"{hour}.jsonl", chunk)


def write_demo_step(
    run_dir: Path | str,
    rid: int,
    config: DemoConfig,
    rng: np.random.Generator,
    now: float | None = None,
) -> DemoStep:
    """Write step ``rid`` of the demo run (train files, eval, sidecars, telemetry) ending at ``now``."""
    run_dir = Path(run_dir)
    now = time.time() if now is None else now
    batch = _generate(rid, config, rng, base=rid * config.samples_per_step, count=config.samples_per_step)
    written = write_step(
        run_dir, rid, batch.samples, batch.per_token, config.layout,
        qkv_format=config.qkv_format, writers=config.writers, advantage_estimator="grpo",
    )  # fmt: skip
    write_trajectory(run_dir, rid, batch.conversations)
    evaluated = bool(config.eval_every) and rid % config.eval_every == 0
    if evaluated:
        base = EVAL_INDEX_BASE + rid * config.eval_samples
        count = config.eval_samples - config.eval_samples % config.group_size or config.group_size
        evals = _generate(rid, config, rng, base=base, count=count)
        save_rollout(run_dir, rid, evals.samples, evaluation=True)
        write_trajectory(run_dir, rid, evals.conversations, evaluation=True)
    _telemetry(run_dir, rid, config, batch, rng, now)
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
    for k in range(initial):
        rid = first + written
        now = start - (initial - 1 - k) * config.step_seconds
        write_demo_step(run_dir, rid, config, np.random.default_rng([config.seed, rid]), now)
        written += 1
    while (max_steps is None or written < max_steps) and keep_going():
        sleep(interval_s)
        if not keep_going():
            break
        rid = first + written
        write_demo_step(run_dir, rid, config, np.random.default_rng([config.seed, rid]), clock())
        written += 1
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
    """``python -m core.demo DIR``: keep writing a demo run until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m core.demo", description=__doc__.splitlines()[0])
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
