"""One demo step's samples: prompts, responses, rewards, weight versions, masked tool spans,
conversations and the per-token model outputs a trainer would log.

A pure function of :class:`DemoConfig`, the step and a numpy ``rng``; it writes no file
(:mod:`miles_tui.core.synth.demo` does).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from miles_tui.core.dump import QkvFormat
from miles_tui.core.synth.dump_files import make_sample
from miles_tui.core.synth.layout import ParallelLayout, Writers
from miles_tui.core.synth.writer import normalize_rewards

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
    num_rollout: int | None = None
    """The ``num_rollout`` argument recorded in meta.json (the run's last step + 1); None: not recorded."""

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
class DemoBatch:
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


def generate_batch(rid: int, config: DemoConfig, rng: np.random.Generator, *, base: int, count: int) -> DemoBatch:
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
    return DemoBatch(
        samples,
        model_outputs(samples, rng),
        [_conversation(s, spans) for s, spans in zip(samples, spans_of, strict=True) if len(spans) > 1],
        tuple(sorted(zero_groups)),
    )


def model_outputs(samples: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> dict[str, list[Any]]:
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
