"""A long run's ``dashboard/metrics.jsonl`` in miles' shape, for the telemetry benchmarks.

Each line is one record as miles' metrics writer puts it on disk:
``{"ts":...,"step_key":...,"step":...,"metrics":{...}}``, compact separators,
values through ``json.dumps`` (so a non-finite float is the literal ``NaN``,
``Infinity`` or ``-Infinity``). Records come in steps: one ``rollout/step``
record (rollout statistics and rollout perf), one ``train/step`` record (the
loss terms, grad norm, learning rates and train perf), and every 20 steps an
``eval/step`` record; about 25 keys a record.

What makes it the real shape, not a toy:

- floats as Python writes them (17 significant digits for computed values,
  a few for rounded ones), ints where miles logs ints (step counters, token
  counts), and one column that mixes both (``rollout/truncated_ratio`` is the
  int ``0`` when nothing was truncated);
- non-finite literals: a diverged step's ``train/grad_norm`` is ``Infinity`` or
  ``NaN`` and ``train/ppo_kl`` is ``-Infinity`` now and then (``--nonfinite``
  is the share of records carrying one);
- a key that appears late (``train/ois``, from 60 % of the file on), and a
  rare ``null`` value;
- an unterminated last line (the writer was cut mid-record); readers must
  not count it.

``generate(path, lines)`` returns :class:`Expected`, the figures a reader must
reproduce. Deterministic for a given seed.

    python bench/telemetry_gen.py OUT.jsonl [--lines 2000000] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

BASE_TS = 1_787_223_000.0
STEP_SECONDS = 47.3

TRAIN_KEYS = (
    "train/loss", "train/pg_loss", "train/entropy_loss", "train/pg_clipfrac", "train/ppo_kl", "train/kl_loss",
    "train/grad_norm", "train/lr-pg_0", "train/lr-pg_1", "train/train_rollout_logprob_abs_diff",
    "train/log_probs", "train/ref_log_probs", "train/advantages", "train/returns", "train/entropy",
    "perf/actor_train_time", "perf/actor_train_tflops", "perf/actor_train_tok_per_s", "perf/actor_train_mfu",
    "perf/log_probs_time", "perf/ref_log_probs_time", "perf/data_preprocess_time", "perf/train_wait_time",
    "perf/step_time",
)  # fmt: skip
"""Logged against train/step (plus train/step itself, and train/ois once it appears): 25 keys."""

ROLLOUT_KEYS = (
    "rollout/raw_reward", "rollout/rewards", "rollout/response_len/mean", "rollout/response_len/max",
    "rollout/response_len/min", "rollout/total_lengths", "rollout/truncated_ratio", "rollout/zero_std_ratio",
    "rollout/log_probs", "rollout/rollout_log_probs", "rollout/advantages", "rollout/returns",
    "rollout/staleness/mean", "rollout/staleness/max", "rollout/weight_version", "rollout/n_samples",
    "rollout/tool_calls/mean", "rollout/turns/mean", "perf/rollout_time", "perf/tokens_per_gpu_per_sec",
    "perf/longest_sample_tokens_per_sec", "perf/wait_time_ratio", "perf/effective_tokens", "perf/gen_time",
)  # fmt: skip
"""Logged against rollout/step (plus rollout/step itself): 25 keys."""

EVAL_KEYS = ("eval/aime", "eval/math500", "eval/gpqa", "eval/livecode", "eval/response_len/mean")

INT_KEYS = frozenset(
    {"rollout/response_len/max", "rollout/response_len/min", "rollout/total_lengths", "rollout/staleness/max",
     "rollout/weight_version", "rollout/n_samples", "perf/effective_tokens"}
)  # fmt: skip
"""Counters miles logs as ints."""

LATE_KEY = "train/ois"
LATE_FROM = 0.6
"""The late key's first record, as a share of the file."""

NULL_KEY = "perf/gen_time"
NULL_EVERY = 9973
"""One rollout record in this many logs ``null`` for NULL_KEY."""


@dataclass
class Expected:
    """What a reader of the generated file must find."""

    records: int = 0
    """Complete lines (records); the unterminated last line is not one."""
    points: dict[str, int] = field(default_factory=dict)
    """Metric key -> points logged (all step keys)."""
    nonfinite: dict[str, int] = field(default_factory=dict)
    """Metric key -> NaN/Infinity/-Infinity values logged."""
    nulls: int = 0
    """``null`` values logged."""
    first_late: int = -1
    """Record index of LATE_KEY's first point."""
    last: dict[str, object] = field(default_factory=dict)
    """The last complete record, as parsed by json.loads."""
    size: int = 0
    """File size in bytes, the unterminated line included."""


def _train(rng: random.Random, step: int, late: bool, diverged: bool) -> dict[str, object]:
    decay = math.exp(-step / 5000.0)
    m: dict[str, object] = {}
    for key in TRAIN_KEYS:
        m[key] = rng.gauss(0.5 * decay, 0.02)
    m["train/lr-pg_0"] = m["train/lr-pg_1"] = 1e-6
    m["perf/actor_train_tok_per_s"] = round(rng.uniform(2000, 4000), 2)
    m["perf/actor_train_tflops"] = round(rng.uniform(250, 330), 3)
    m["perf/step_time"] = round(rng.uniform(44, 50), 3)
    if diverged:
        m["train/grad_norm"] = math.inf if rng.random() < 0.5 else math.nan
        m["train/ppo_kl"] = -math.inf
    if late:
        m[LATE_KEY] = rng.random()
    m["train/step"] = step
    return m


def _rollout(rng: random.Random, step: int, with_null: bool) -> dict[str, object]:
    m: dict[str, object] = {}
    for key in ROLLOUT_KEYS:
        m[key] = rng.randrange(1, 32768) if key in INT_KEYS else round(rng.uniform(0, 1), 6)
    m["rollout/raw_reward"] = rng.random()
    m["rollout/truncated_ratio"] = 0 if rng.random() < 0.3 else rng.random() / 10  # int 0 or a float
    if with_null:
        m[NULL_KEY] = None
    m["rollout/step"] = step
    return m


def _eval(rng: random.Random) -> dict[str, object]:
    return {key: round(rng.random(), 4) for key in EVAL_KEYS}


def generate(path: Path, lines: int, seed: int = 7, nonfinite: float = 0.005) -> Expected:
    """Write ``lines`` complete records and one unterminated line to ``path``; return what a reader must find."""
    rng = random.Random(seed)
    expected = Expected()
    late_from = int(lines * LATE_FROM)
    ts = BASE_TS
    step = 0
    kind = 0  # 0 rollout, 1 train, 2 eval
    record: dict[str, object] = {}
    with open(path, "w", encoding="utf-8") as out:
        buffer: list[str] = []
        for index in range(lines):
            ts += rng.uniform(1.0, STEP_SECONDS / 2)
            if kind == 0:
                metrics = _rollout(rng, step, rng.randrange(NULL_EVERY) == 0)
                record = {"ts": ts, "step_key": "rollout/step", "step": step, "metrics": metrics}
                kind = 1
            elif kind == 1:
                diverged = rng.random() < nonfinite
                metrics = _train(rng, step, index >= late_from, diverged)
                record = {"ts": ts, "step_key": "train/step", "step": step, "metrics": metrics}
                kind = 2 if step % 20 == 0 else 0
                step += kind == 0
            else:
                metrics = _eval(rng)
                record = {"ts": round(ts, 3), "step_key": "eval/step", "step": step, "metrics": metrics}
                kind, step = 0, step + 1
            for key, value in metrics.items():
                expected.points[key] = expected.points.get(key, 0) + 1
                if isinstance(value, float) and not math.isfinite(value):
                    expected.nonfinite[key] = expected.nonfinite.get(key, 0) + 1
                expected.nulls += value is None
            if LATE_KEY in metrics and expected.first_late < 0:
                expected.first_late = index
            buffer.append(json.dumps(record, separators=(",", ":")))
            if len(buffer) >= 10_000:
                out.write("\n".join(buffer) + "\n")
                buffer.clear()
        if buffer:
            out.write("\n".join(buffer) + "\n")
        tail = json.dumps(
            {"ts": ts + 1, "step_key": "train/step", "step": step, "metrics": _train(rng, step, True, False)}
        )
        out.write(tail[: len(tail) // 2])  # the writer was cut mid-record
    expected.records = lines
    expected.last = json.loads(json.dumps(record))
    expected.size = path.stat().st_size
    return expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path)
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--nonfinite", type=float, default=0.005, help="share of train records with NaN/Infinity")
    args = parser.parse_args(argv)
    expected = generate(args.out, args.lines, args.seed, args.nonfinite)
    keys = len(expected.points)
    print(f"{args.out}: {expected.records:,} records, {expected.size / 1e6:.0f} MB, {keys} keys, "
          f"{sum(expected.points.values()) / expected.records:.1f} keys a record, "
          f"{sum(expected.nonfinite.values()):,} non-finite values, {expected.nulls} nulls")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
