"""Where each rank of a (TP, PP, CP, DP) layout sits, which ranks write a train file, and the keys
miles writes.

The write gate (:func:`writes_train_file`) is seed 000's rule: only TP rank 0 of the last PP
stage writes, one file per (DP, CP) shard; older runs wrote from every rank. Pure values: this
module touches no file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

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
            if name not in ("tp", "pp", "cp", "dp") or not (digits.isascii() and digits.isdigit()):
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
