"""Write a ``--dump-details`` run directory exactly as miles does.

Used by training code, ``--demo``, test fixtures and benchmarks. Every file it
writes has the keys, nesting and dtypes of the files in ``shared/golden`` and
reads back exactly through :func:`core.pt_archive.load_pt`:

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
columns, CP-slice every per-token field with :func:`core.cp.slice_response`
and save per rank. Files are written to a temporary name in the same folder
and renamed, so a reader never sees half a file unless ``atomic=False``
(for tests that simulate a crash mid-write).

Files are written by core.pt_writer in torch.save's format, without torch:
the demo and the test fixtures run where torch is not installed, and
torch.load reads what they write. This module never
reads a dump back and never decides what a reader should make of one.
"""

from __future__ import annotations

import heapq
import json
import os
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import numpy.typing as npt

from core.cp import QkvFormat, slice_response
from core.pt_writer import KeepAsIs, save_pt

Writers = Literal["gated", "all"]

MODEL_OUTPUT_KEYS = ("log_probs", "entropy", "ref_log_probs", "ref_entropy", "advantages", "returns")
"""Per-token values only the last PP stage computes, in the column order miles writes them."""

SHARD_LAYOUT_KEYS = ("cp_rank", "cp_size", "qkv_format")
"""Top-level train-file keys that legacy dumps lack."""

SAMPLE_KEYS = (
    "group_index", "index", "rollout_id", "prompt", "tokens", "multimodal_inputs",
    "multimodal_train_inputs", "response", "response_length", "label", "reward", "loss_mask",
    "weight_versions", "rollout_log_probs", "rollout_routed_experts", "rollout_indexer_topk",
    "remove_sample", "teacher_log_probs", "opd_reverse_kl", "status", "metadata",
    "generate_function_path", "train_metadata", "adapter", "reward_spec", "routing_key",
    "non_generation_time", "spec_info", "prefix_cache_info",
)  # fmt: skip
"""Every key of a miles ``Sample`` as ``rollout_data/{rid}.pt`` stores it, in order."""

_GRPO_EPS = 1e-6


@dataclass(frozen=True)
class RankCoords:
    """Where one global rank sits in the parallel layout."""

    rank: int
    """Global rank: ``tp + TP*(cp + CP*(dp + DP*pp))`` (order tp-cp-ep-dp-pp, ep = 1)."""
    tp: int
    """Tensor-parallel rank."""
    cp: int
    """Context-parallel rank."""
    dp: int
    """Data-parallel rank: which shard of the batch the rank trains on."""
    pp: int
    """Pipeline stage."""


@dataclass(frozen=True)
class ParallelLayout:
    """Sizes of the four parallel dimensions of a training job."""

    tp: int = 1
    """Tensor-parallel size (peers hold identical data)."""
    pp: int = 1
    """Pipeline-parallel size (only the last stage computes per-token outputs)."""
    cp: int = 1
    """Context-parallel size (each rank holds a zigzag slice of every response)."""
    dp: int = 1
    """Data-parallel size (number of batch shards)."""

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "cp", "dp"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} size must be >= 1, got {getattr(self, name)}")

    @classmethod
    def parse(cls, spec: str) -> ParallelLayout:
        """Read ``"dp2 cp2 tp2 pp2"`` (any order; spaces, commas or dashes between parts)."""
        sizes: dict[str, int] = {}
        for part in spec.replace(",", " ").replace("-", " ").split():
            name, digits = part[:2].lower(), part[2:]
            if name not in ("tp", "pp", "cp", "dp") or not digits.isdigit():
                raise ValueError(f"cannot read layout part {part!r} of {spec!r}: expected e.g. 'dp2 cp2 tp2 pp2'")
            sizes[name] = int(digits)
        return cls(**sizes)

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return self.tp * self.pp * self.cp * self.dp

    def rank_of(self, *, tp: int = 0, cp: int = 0, dp: int = 0, pp: int = 0) -> int:
        """The global rank at these coordinates."""
        for name, value, size in (
            ("tp", tp, self.tp),
            ("cp", cp, self.cp),
            ("dp", dp, self.dp),
            ("pp", pp, self.pp),
        ):
            if not 0 <= value < size:
                raise ValueError(f"{name} rank {value} out of range for size {size}")
        return tp + self.tp * (cp + self.cp * (dp + self.dp * pp))

    def coords(self, rank: int) -> RankCoords:
        """The coordinates of a global rank."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} out of range for world size {self.world_size}")
        rest, tp = divmod(rank, self.tp)
        rest, cp = divmod(rest, self.cp)
        pp, dp = divmod(rest, self.dp)
        return RankCoords(rank=rank, tp=tp, cp=cp, dp=dp, pp=pp)

    def ranks(self) -> Iterator[RankCoords]:
        """Every rank, in global rank order."""
        return (self.coords(rank) for rank in range(self.world_size))

    def writes_train_file(self, coords: RankCoords, writers: Writers = "gated") -> bool:
        """Whether this rank writes a train file (see :func:`writes_train_file`)."""
        return writes_train_file(tp_rank=coords.tp, pp_rank=coords.pp, pp_size=self.pp, writers=writers)


def writes_train_file(*, tp_rank: int, pp_rank: int, pp_size: int, writers: Writers = "gated") -> bool:
    """The write gate: every rank writes (``"all"``, older runs), or only TP rank 0 of the last PP stage."""
    return writers == "all" or (tp_rank == 0 and pp_rank == pp_size - 1)


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


# --- files -------------------------------------------------------------------------------------


def _write_file(path: Path, write: Callable[[IO[bytes]], object], *, atomic: bool) -> Path:
    """Write through ``write``; atomically means a temp file in the same folder, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not atomic:
        with open(path, "wb") as handle:
            write(handle)
        return path
    # Not mkstemp: its 0600 mode would hide the file from a monitor run by another user. The
    # temp name does not end in .pt or .jsonl, so no reader glob ever matches it.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _save(path: Path, obj: object, *, atomic: bool) -> Path:
    return _write_file(path, lambda handle: save_pt(obj, handle), atomic=atomic)


def _jsonl(records: Sequence[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records).encode()


def _to_torch(value: Any) -> Any:
    """numpy arrays (also inside lists) are saved as torch tensors; anything else is kept."""
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value)
    if isinstance(value, list):
        return [_to_torch(item) for item in value]
    return value


def _keep_numpy(value: Any) -> Any:
    """Inside rollout samples numpy arrays stay numpy arrays (as miles pickles them), not tensors."""
    if isinstance(value, np.ndarray):
        return KeepAsIs(value)
    if isinstance(value, dict):
        return {k: _keep_numpy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keep_numpy(v) for v in value]
    return value


def save_train_shard(
    run_dir: Path | str,
    rollout_id: int,
    rollout_data: Mapping[str, Any],
    *,
    rank: int,
    tp_rank: int,
    pp_rank: int,
    pp_size: int,
    cp_rank: int,
    cp_size: int,
    qkv_format: QkvFormat,
    all_ranks: bool = False,
    legacy: bool = False,
    atomic: bool = True,
) -> Path | None:
    """Save one rank's shard as ``train_data/{rid}_{rank}.pt``, if this rank writes one.

    Current miles writes only from TP rank 0 on the last PP stage and returns
    None elsewhere. ``all_ranks`` reproduces runs from before that gate: every
    rank writes, and ranks of earlier PP stages drop :data:`MODEL_OUTPUT_KEYS`
    (they never computed them). ``legacy`` reproduces runs from before the CP
    keys existed: implies ``all_ranks`` and omits :data:`SHARD_LAYOUT_KEYS`.
    numpy arrays in ``rollout_data`` are saved as torch tensors.
    """
    writers: Writers = "all" if all_ranks or legacy else "gated"
    if not writes_train_file(tp_rank=tp_rank, pp_rank=pp_rank, pp_size=pp_size, writers=writers):
        return None
    last_stage = pp_rank == pp_size - 1
    columns = {
        key: _to_torch(value) for key, value in rollout_data.items() if last_stage or key not in MODEL_OUTPUT_KEYS
    }
    payload: dict[str, Any] = {"rollout_id": rollout_id, "rank": rank, "rollout_data": columns}
    if not legacy:
        payload.update(cp_rank=cp_rank, cp_size=cp_size, qkv_format=qkv_format)
    return _save(Path(run_dir) / "train_data" / f"{rollout_id}_{rank}.pt", payload, atomic=atomic)


def save_policy_loss_debug(
    run_dir: Path | str,
    *,
    rank: int,
    tp_rank: int,
    call: int,
    payload: Mapping[str, Any],
    atomic: bool = True,
) -> Path | None:
    """Save ``policy_loss_debug/rank_{rank}_call_{call}.pt`` from TP rank 0; None elsewhere.

    ``payload`` is miles' dict (``samples``, ``ppo_kl``, ``pg_loss``, ``finite``);
    ``rank`` and ``call`` are added as miles does.
    """
    if tp_rank != 0:
        return None
    obj = {"rank": rank, "call": call, **{k: _to_torch(v) for k, v in payload.items()}}
    return _save(Path(run_dir) / "policy_loss_debug" / f"rank_{rank}_call_{call}.pt", obj, atomic=atomic)


def save_rollout(
    run_dir: Path | str,
    rollout_id: int,
    samples: Sequence[Mapping[str, Any]],
    *,
    evaluation: bool = False,
    metadata: Mapping[str, Any] | None = None,
    atomic: bool = True,
) -> Path:
    """Save ``rollout_data/{rid}.pt`` (``eval_{rid}.pt`` for an evaluation batch), samples as given."""
    name = f"eval_{rollout_id}.pt" if evaluation else f"{rollout_id}.pt"
    obj = {
        "rollout_id": rollout_id,
        "metadata": dict(metadata or {}),
        "samples": [_keep_numpy(dict(s)) for s in samples],
    }
    return _save(Path(run_dir) / "rollout_data" / name, obj, atomic=atomic)


def write_trajectory(
    run_dir: Path | str,
    rollout_id: int,
    records: Sequence[Mapping[str, Any]],
    evaluation: bool = False,
    *,
    atomic: bool = True,
) -> Path:
    """Write the ``trajectory/{rid}.jsonl`` sidecar: one JSON line per recorded conversation."""
    name = f"eval_{rollout_id}.jsonl" if evaluation else f"{rollout_id}.jsonl"
    data = _jsonl(records)
    return _write_file(Path(run_dir) / "trajectory" / name, lambda handle: handle.write(data), atomic=atomic)


def write_json(path: Path | str, obj: Mapping[str, Any], *, atomic: bool = True) -> Path:
    """Write one JSON document, such as ``dashboard/meta.json``."""
    data = (json.dumps(obj, ensure_ascii=False, indent=1) + "\n").encode()
    return _write_file(Path(path), lambda handle: handle.write(data), atomic=atomic)


def append_jsonl(path: Path | str, records: Sequence[Mapping[str, Any]]) -> Path:
    """Append complete lines to a telemetry stream in one write (streams are append-only)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as handle:
        handle.write(_jsonl(records))
    return path


def make_sample(**fields: Any) -> dict[str, Any]:
    """A rollout sample with every :data:`SAMPLE_KEYS` key: miles' defaults overridden by ``fields``.

    ``response_length`` defaults to 0; unknown keys are kept after the standard ones.
    """
    sample: dict[str, Any] = dict.fromkeys(SAMPLE_KEYS)
    sample.update(
        prompt="", tokens=[], response="", response_length=0, weight_versions=[], remove_sample=False,
        status="completed", metadata={}, non_generation_time=0.0,
        spec_info={"spec_accept_token_num": 0, "spec_draft_token_num": 0, "spec_verify_ct": 0,
                   "completion_token_num": 0},
        prefix_cache_info={"cached_tokens": 0, "total_prompt_tokens": 0},
    )  # fmt: skip
    sample.update(fields)
    return sample


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
    cols["weight_versions"] = [[str(v) for v in s.get("weight_versions") or []] for s in picked]
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
