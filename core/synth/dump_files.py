"""The files of a ``--dump-details`` run, one writer each: train shards, policy-loss debug files,
rollout batches, trajectories, JSON and JSONL.

Written in torch.save's format by :mod:`miles_tui.core.synth.pt_writer` (no torch needed),
atomically (temp file, then rename) unless a test asks to simulate a crash mid-write.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from miles_tui.core.dump import QkvFormat
from miles_tui.core.synth.layout import MODEL_OUTPUT_KEYS, SAMPLE_KEYS, Writers, writes_train_file
from miles_tui.core.synth.pt_writer import KeepAsIs, save_pt


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
