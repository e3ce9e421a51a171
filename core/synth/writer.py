"""Write a ``--dump-details`` run directory exactly as miles does.

Used by training code, ``--demo``, test fixtures and benchmarks. Every file it
writes has the keys, nesting and dtypes of the files in ``shared/golden`` and
reads back exactly through :func:`miles_tui.core.dump.pt.pt_archive.load_pt`:

- ``rollout_data/{rid}.pt`` / ``eval_{rid}.pt``: ``{rollout_id, metadata, samples}``;
- ``train_data/{rid}_{rank}.pt``: ``{rollout_id, rank, rollout_data, cp_rank,
  cp_size, qkv_format}``, one file per (DP, CP) shard from TP rank 0 of the last
  PP stage; or, reproducing older runs, one file from every rank, earlier PP
  stages without the per-token model outputs and ``legacy`` files without the
  three CP keys;
- ``policy_loss_debug/rank_{rank}_call_{n}.pt`` and ``trajectory/{rid}.jsonl``.

:func:`write_step` does what miles does between a rollout and its dump: split
the batch into DP shards balanced by sequence length (equal-size
Karmarkar–Karp, the partition ``--balance-data`` uses), build each shard's
columns, CP-slice every per-token field with :func:`miles_tui.core.dump.cp.slice_response`
and save per rank. Files are written to a temporary name in the same folder
and renamed, so a reader never sees half a file unless ``atomic=False``
(for tests that simulate a crash mid-write).

Files are written by miles_tui.core.synth.pt_writer in torch.save's format, without torch:
the demo and the test fixtures run where torch is not installed, and
torch.load reads what they write. This module never
reads a dump back and never decides what a reader should make of one.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from miles_tui.core.dump import QkvFormat, slice_response
from miles_tui.core.synth.dump_files import save_rollout, save_train_shard
from miles_tui.core.synth.layout import MODEL_OUTPUT_KEYS, ParallelLayout, RankCoords, Writers
from miles_tui.core.synth.record_formats import train_weight_versions

_GRPO_EPS = 1e-6


@dataclass(frozen=True)
class ShardFile:
    """One train file :func:`write_step` wrote."""

    coords: RankCoords
    """The rank that wrote it."""
    path: Path
    """``train_data/{rid}_{rank}.pt``."""


@dataclass(frozen=True)
class StepWrite:
    """What :func:`write_step` put on disk (the golden ``meta.write_record`` of one step)."""

    rollout_id: int
    """The step."""
    rollout_path: Path | None
    """``rollout_data/{rid}.pt``, or None when the rollout file was not requested."""
    shard_sample_indices: tuple[tuple[int, ...], ...]
    """Per DP rank, the ``index`` of each row of its shard, in row order."""
    files: tuple[ShardFile, ...]
    """Every train file written, in global rank order."""


# --- the step ----------------------------------------------------------------------------------


class _PartitionState:
    """k partial partitions, largest sum first (one node of Karmarkar–Karp)."""

    def __init__(self, sets: list[tuple[int, list[int]]]) -> None:
        self.sets = sorted(sets, key=lambda s: (s[0], len(s[1]), s[1]), reverse=True)

    def key(self) -> tuple[int, int, int, list[int]]:
        top = self.sets[0]
        return (self.sets[0][0] - self.sets[-1][0], top[0], len(top[1]), top[1])

    def __lt__(self, other: _PartitionState) -> bool:
        # heapq pops the smallest: make that the widest spread, then the largest top set.
        return self.key() > other.key()


def balanced_partitions(lengths: Sequence[int], k: int) -> list[list[int]]:
    """Split positions ``0..n-1`` into ``k`` equal-size parts with near-equal length sums.

    The largest differencing method (Karmarkar–Karp) over equal-size blocks of
    the length-sorted positions, each part returned sorted: the DP split of
    miles' ``--balance-data``. Needs ``len(lengths) % k == 0``.
    """
    if k < 1 or len(lengths) % k:
        raise ValueError(f"cannot split {len(lengths)} samples into {k} equal DP shards")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    heap = [
        _PartitionState([(int(lengths[i]), [i]) for i in order[start : start + k]]) for start in range(0, len(order), k)
    ]
    heapq.heapify(heap)
    while len(heap) > 1:
        first, second = heapq.heappop(heap), heapq.heappop(heap)
        merged = [(a[0] + b[0], a[1] + b[1]) for a, b in zip(first.sets, reversed(second.sets), strict=True)]
        heapq.heappush(heap, _PartitionState(merged))
    return [sorted(items) for _, items in heap[0].sets] if heap else [[] for _ in range(k)]


def reward_value(reward: Any, reward_key: str | None = None) -> float:
    """The scalar of a sample's reward: a number, ``reward[reward_key]`` for a dict, 0.0 for None."""
    if reward is None:
        return 0.0
    if isinstance(reward, Mapping):
        if reward_key is None:
            raise ValueError("dict rewards need reward_key to say which entry is the reward")
        return float(reward[reward_key])
    return float(reward)


def normalize_rewards(
    raw: Sequence[float], group_ids: Sequence[object], advantage_estimator: str = "grpo"
) -> list[float]:
    """The ``rewards`` column: per-group baseline (and std for GRPO/GSPO), in float32 like miles."""
    values = np.asarray(raw, dtype=np.float32)
    if advantage_estimator not in ("grpo", "gspo", "reinforce_plus_plus_baseline"):
        return [float(v) for v in values]
    out = values.copy()
    groups: dict[object, list[int]] = {}
    for position, group in enumerate(group_ids):
        groups.setdefault(("solo", position) if group is None else group, []).append(position)
    for members in groups.values():
        centred = values[members] - values[members].mean(dtype=np.float32)
        if advantage_estimator != "reinforce_plus_plus_baseline":
            std = np.float32(values[members].std(ddof=1)) if len(members) > 1 else np.float32(0.0)
            centred = centred / (std + np.float32(_GRPO_EPS))
        out[members] = centred
    return [float(v) for v in out]


@dataclass(frozen=True)
class _BatchColumns:
    """Batch-wide values that every shard draws its rows from (positions in rollout order)."""

    raw_reward: list[float]
    """Scalar raw reward of every sample: the batch-global ``raw_reward`` column."""
    rewards: list[float]
    """Normalized reward of every sample."""
    loss_masks: list[list[int]]
    """Full-response loss mask of every sample (all zero for a removed sample)."""
    rollout_ids: list[int]
    """``rollout_id`` of every sample, falling back to its ``index`` as miles does."""
    mask_sums: dict[int, int]
    """Loss-mask sum per rollout id: the ``rollout_mask_sums`` denominator."""


def _batch_columns(
    samples: Sequence[Mapping[str, Any]],
    per_token: Mapping[str, Sequence[npt.ArrayLike]],
    *,
    rewards: Sequence[float] | None,
    reward_key: str | None,
    advantage_estimator: str,
) -> _BatchColumns:
    """Validate the step's inputs and compute what every shard shares."""
    unknown = sorted(set(per_token) - set(MODEL_OUTPUT_KEYS))
    if unknown:
        raise ValueError(f"per_token has fields miles does not dump per token: {unknown}")
    for key, values in per_token.items():
        if len(values) != len(samples):
            raise ValueError(f"per_token[{key!r}] has {len(values)} entries for {len(samples)} samples")
    with_rollout_lp = [s.get("rollout_log_probs") is not None for s in samples]
    if any(with_rollout_lp) and not all(with_rollout_lp):
        raise ValueError("rollout_log_probs must be given for every sample or for none")
    loss_masks: list[list[int]] = []
    for position, s in enumerate(samples):
        length = int(s["response_length"])
        if len(s["tokens"]) < length:
            raise ValueError(f"sample {s['index']}: response_length {length} exceeds {len(s['tokens'])} tokens")
        mask = [0] * length if s.get("remove_sample") else [int(m) for m in s.get("loss_mask") or [1] * length]
        arrays: dict[str, Any] = {"loss_mask": mask, **{k: v[position] for k, v in per_token.items()}}
        if s.get("rollout_log_probs") is not None:
            arrays["rollout_log_probs"] = s["rollout_log_probs"]
        for name, values in arrays.items():
            if len(values) != length:
                raise ValueError(f"sample {s['index']}: {name} has {len(values)} values, response is {length}")
        loss_masks.append(mask)
    raw = [reward_value(s.get("reward"), reward_key) for s in samples]
    if rewards is None:
        rewards = normalize_rewards(raw, [s.get("group_index") for s in samples], advantage_estimator)
    elif len(rewards) != len(samples):
        raise ValueError(f"{len(rewards)} rewards for {len(samples)} samples")
    rollout_ids = [int(s["index"]) if s.get("rollout_id") is None else int(s["rollout_id"]) for s in samples]
    mask_sums: dict[int, int] = {}
    for rid, mask in zip(rollout_ids, loss_masks, strict=True):
        mask_sums[rid] = mask_sums.get(rid, 0) + sum(mask)
    return _BatchColumns(raw, [float(r) for r in rewards], loss_masks, rollout_ids, mask_sums)


def _shard_columns(
    samples: Sequence[Mapping[str, Any]],
    rows: Sequence[int],
    per_token: Mapping[str, Sequence[npt.ArrayLike]],
    batch: _BatchColumns,
    *,
    cp_rank: int,
    cp_size: int,
    qkv_format: QkvFormat,
    pad_size: int,
) -> dict[str, Any]:
    """One DP shard's ``rollout_data`` as CP rank ``cp_rank`` holds it, in miles' column order."""
    picked = [samples[i] for i in rows]
    totals = [len(s["tokens"]) for s in picked]
    max_seq_len = -(-max(totals) // pad_size) * pad_size if qkv_format == "bshd" and totals else None

    def sliced(values: npt.ArrayLike, total: int) -> Any:
        full = np.asarray(values, dtype=np.float32)
        piece = slice_response(full, total, cp_rank, cp_size, qkv_format, max_seq_len)
        return np.ascontiguousarray(piece, dtype=np.float32)

    cols: dict[str, Any] = {
        "tokens": [np.asarray(s["tokens"], dtype=np.int64) for s in picked],
        "response_lengths": [int(s["response_length"]) for s in picked],
        "rewards": [batch.rewards[i] for i in rows],
        "truncated": [int(s.get("status") == "truncated") for s in picked],
        "loss_masks": [np.asarray(batch.loss_masks[i], dtype=np.int32) for i in rows],
        "sample_indices": [int(s["index"]) for s in picked],
        "rollout_ids": [batch.rollout_ids[i] for i in rows],
        "rollout_mask_sums": np.asarray([batch.mask_sums[batch.rollout_ids[i]] for i in rows], dtype=np.float32),
    }
    if picked and picked[0].get("rollout_log_probs") is not None:
        cols["rollout_log_probs"] = [sliced(s["rollout_log_probs"], t) for s, t in zip(picked, totals, strict=True)]
    if picked and picked[0].get("rollout_routed_experts") is not None:
        cols["rollout_routed_experts"] = [np.asarray(s["rollout_routed_experts"]) for s in picked]
    cols["weight_versions"] = [train_weight_versions(s.get("weight_versions")) for s in picked]
    cols["raw_reward"] = list(batch.raw_reward)
    cols["total_lengths"] = totals
    if max_seq_len is not None:
        cols["max_seq_lens"] = [max_seq_len] * len(picked)
    for key in MODEL_OUTPUT_KEYS:
        if key in per_token:
            cols[key] = [sliced(per_token[key][i], t) for i, t in zip(rows, totals, strict=True)]
    return cols


def rank_columns(
    samples: Sequence[Mapping[str, Any]],
    per_token: Mapping[str, Sequence[npt.ArrayLike]],
    layout: ParallelLayout,
    *,
    dp_rank: int,
    cp_rank: int,
    qkv_format: QkvFormat = "thd",
    advantage_estimator: str = "grpo",
    data_pad_size_multiplier: int = 128,
) -> dict[str, Any]:
    """What one training rank holds when it dumps: DP shard ``dp_rank`` as CP rank ``cp_rank`` sees it.

    The same columns :func:`write_step` saves for that rank, for a caller that
    runs as the rank itself (one process per rank) and saves them with
    :func:`save_train_shard`, whose gate decides whether the rank writes.
    """
    batch = _batch_columns(samples, per_token, rewards=None, reward_key=None, advantage_estimator=advantage_estimator)
    shards = balanced_partitions([len(s["tokens"]) for s in samples], layout.dp)
    return _shard_columns(
        samples,
        shards[dp_rank],
        per_token,
        batch,
        cp_rank=cp_rank,
        cp_size=layout.cp,
        qkv_format=qkv_format,
        pad_size=layout.tp * data_pad_size_multiplier,
    )


def write_step(
    run_dir: Path | str,
    rollout_id: int,
    samples: Sequence[Mapping[str, Any]],
    per_token: Mapping[str, Sequence[npt.ArrayLike]],
    layout: ParallelLayout,
    *,
    qkv_format: QkvFormat = "thd",
    writers: Writers = "gated",
    legacy: bool = False,
    advantage_estimator: str = "grpo",
    rewards: Sequence[float] | None = None,
    reward_key: str | None = None,
    data_pad_size_multiplier: int = 128,
    rollout_metadata: Mapping[str, Any] | None = None,
    write_rollout: bool = True,
    atomic: bool = True,
) -> StepWrite:
    """Write one training step: the rollout file and every rank's train file.

    ``samples`` are rollout samples in rollout order (see :func:`make_sample`).
    ``per_token`` maps each of :data:`MODEL_OUTPUT_KEYS` that the run dumps to
    one FULL-response array per sample (aligned with ``samples``); the writer
    CP-slices them, and ``rollout_log_probs`` from the samples. ``rewards``
    overrides the normalized ``rewards`` column, otherwise computed from the
    raw rewards per ``group_index`` for ``advantage_estimator``. bshd pads
    ``max_seq_lens`` to a multiple of ``tp * data_pad_size_multiplier`` like miles.
    ``legacy`` files come from every rank (the gate is newer than the CP keys),
    so it needs ``writers="all"``.
    """
    if legacy and writers != "all":
        raise ValueError("legacy dumps predate the TP/PP write gate: use writers='all'")
    run_dir = Path(run_dir)
    batch = _batch_columns(
        samples, per_token, rewards=rewards, reward_key=reward_key, advantage_estimator=advantage_estimator
    )
    shards = balanced_partitions([len(s["tokens"]) for s in samples], layout.dp)
    pad_size = layout.tp * data_pad_size_multiplier
    rollout_path = None
    if write_rollout:
        metadata = {"step": rollout_id} if rollout_metadata is None else rollout_metadata
        rollout_path = save_rollout(run_dir, rollout_id, samples, metadata=metadata, atomic=atomic)
    files: list[ShardFile] = []
    built: dict[tuple[int, int], dict[str, Any]] = {}
    for coords in layout.ranks():
        if not layout.writes_train_file(coords, writers):
            continue
        if (coords.dp, coords.cp) not in built:
            built[coords.dp, coords.cp] = _shard_columns(
                samples,
                shards[coords.dp],
                per_token,
                batch,
                cp_rank=coords.cp,
                cp_size=layout.cp,
                qkv_format=qkv_format,
                pad_size=pad_size,
            )
        path = save_train_shard(
            run_dir,
            rollout_id,
            built[coords.dp, coords.cp],
            rank=coords.rank,
            tp_rank=coords.tp,
            pp_rank=coords.pp,
            pp_size=layout.pp,
            cp_rank=coords.cp,
            cp_size=layout.cp,
            qkv_format=qkv_format,
            all_ranks=writers == "all",
            legacy=legacy,
            atomic=atomic,
        )
        if path is not None:
            files.append(ShardFile(coords=coords, path=path))
    return StepWrite(
        rollout_id=rollout_id,
        rollout_path=rollout_path,
        shard_sample_indices=tuple(tuple(int(samples[i]["index"]) for i in rows) for rows in shards),
        files=tuple(files),
    )
