"""The values of a step's summary: one row per sample, one per group, the aggregate, the problems.

Contract: plain frozen dataclasses of raw values (None where a value does not
exist, never 0 or NaN; never markup), exactly what the tables, ``export`` and
the summary cache carry. They are computed by :mod:`miles_tui.core.dump.summary` and
:mod:`miles_tui.core.dump.step`, which re-export them; this module computes nothing, reads
nothing and imports neither numpy nor the dump reader, so serving a cached
summary (:mod:`miles_tui.core.dump.summary_cache`) stays well under a millisecond. A
summary's rows and groups are any sequence; :mod:`miles_tui.core.dump.step` and the cache
give :class:`~miles_tui.core.dump.column_rows.ColumnRows` (compact columns, kept for every
step of a run).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class SampleRow:
    """One sample of a step: the CLI's ROW, column for column."""

    sample_index: int
    """Run-global sample id."""
    group_index: int | None
    """GRPO group."""
    status: str | None
    """pending, completed, truncated, aborted, failed."""
    remove_sample: bool
    """Whether the rollout removed the sample from training."""
    response_length: int
    """Response tokens."""
    total_length: int
    """Prompt + response tokens."""
    reward: float | None
    """Rollout-side reward (a dict reward yields None here)."""
    weight_version: str | None
    """Last entry of weight_versions."""
    weight_version_min: int | None
    """Smallest numeric weight version."""
    mixed_version: bool
    """More than one distinct weight version across the sample's turns."""
    staleness: int | None
    """rollout_id − weight_version_min."""
    turns: int
    """Generation calls: len(weight_versions) in either of its forms."""
    tool_calls: int | None
    """Messages with role "tool" in a chat prompt (None for a string prompt)."""
    non_generation_time: float | None
    """Seconds spent outside generation."""
    spec_accept_rate: float | None
    """Speculative decoding: accepted / drafted tokens."""
    prefix_cache_hit_rate: float | None
    """Cached prompt tokens / prompt tokens."""
    raw_reward: float | None
    """Batch-global raw reward at the sample's rollout position (train rows only)."""
    normalized_reward: float | None
    """The train row's normalized reward."""
    truncated: bool
    """The train row's flag, else status == "truncated"."""
    dumped_rank: int | None
    """Global rank of the lowest-ranked file holding the row."""
    mean_entropy: float | None
    """Mean entropy over trained positions."""
    max_entropy: float | None
    """Max entropy over trained positions."""
    ref_entropy_mean: float | None
    """Mean reference entropy over trained positions."""
    mean_abs_lp_diff: float | None
    """Mean |log_probs − rollout_log_probs| over trained positions."""
    max_abs_lp_diff: float | None
    """Max |log_probs − rollout_log_probs| over trained positions."""
    mean_imp_ratio: float | None
    """Mean exp(log_probs − rollout_log_probs) over trained positions."""
    adv_mean: float | None
    """Advantage mean over trained positions."""
    adv_std: float | None
    """Advantage sample standard deviation over trained positions (None with fewer than two)."""
    return_mean: float | None
    """Return mean over trained positions."""
    alignment_failed: bool
    """Some per-token data was dumped but could not be placed: unreadable, not undumped."""
    unknown_format: str | None = None
    """The record fields (``spec_info``, ``weight_versions``) in a shape this reader does not know, space-separated;
    the columns derived from them read "unknown format" (None: every field was read)."""

    def to_dict(self) -> dict[str, Any]:
        """The fields by name (the values are plain scalars: nothing to copy deeply)."""
        return {name: getattr(self, name) for name in ROW_COLUMNS}


ROW_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(SampleRow))

PER_TOKEN_STATISTICS: tuple[str, ...] = (
    "mean_entropy",
    "max_entropy",
    "ref_entropy_mean",
    "mean_abs_lp_diff",
    "max_abs_lp_diff",
    "mean_imp_ratio",
    "adv_mean",
    "adv_std",
    "return_mean",
)
"""The ROW_COLUMNS computed from a sample's per-token train data (None when it has none)."""


@dataclass(frozen=True, slots=True)
class GroupRow:
    """One GRPO group of a step."""

    group_index: int | None
    """The group id."""
    n: int
    """Samples in the group."""
    reward_mean: float | None
    """Mean reward (raw_reward for train steps, reward for eval steps)."""
    reward_std: float | None
    """Sample standard deviation of the rewards (None with fewer than two)."""
    response_length_mean: float
    """Mean response length."""
    truncated_frac: float
    """Fraction of truncated samples."""
    zero_std: bool
    """Degenerate: reward data with std <= 1e-12, or a single reward (contributes no policy gradient)."""

    def to_dict(self) -> dict[str, Any]:
        """The fields by name (the values are plain scalars: nothing to copy deeply)."""
        return {name: getattr(self, name) for name in _GROUP_FIELDS}


_GROUP_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(GroupRow))


@dataclass(frozen=True, slots=True)
class StepAggregate:
    """Headline figures of one step."""

    rollout_id: int
    """The step."""
    evaluation: bool
    """Whether it is an eval step."""
    n_samples: int
    """Samples in the rollout file."""
    reward_mean: float | None
    """Mean reward over samples that have one."""
    reward_std: float | None
    """Sample standard deviation of those rewards."""
    response_length_mean: float | None
    """Mean response length."""
    truncated_frac: float | None
    """Fraction of truncated samples."""
    zero_std_group_frac: float | None
    """Fraction of groups that are degenerate."""
    mean_abs_lp_diff: float | None
    """Mean over samples of their mean |lp diff|."""
    mean_entropy: float | None
    """Mean over samples of their mean entropy."""
    mixed_version_frac: float | None
    """Fraction of samples generated across several weight versions (of those whose versions could be read)."""
    avg_staleness: float | None
    """Mean staleness over samples that have one."""
    alignment_failed: int
    """Samples whose per-token data is unreadable."""

    def to_dict(self) -> dict[str, Any]:
        """The fields by name (the values are plain scalars: nothing to copy deeply)."""
        return {name: getattr(self, name) for name in _AGGREGATE_FIELDS}


_AGGREGATE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(StepAggregate))


class ProblemKind(enum.Enum):
    """What happened to a file of a step."""

    STILL_WRITING = "still_writing"
    """Failed to load but young: retried on the next poll."""
    CORRUPT = "corrupt"
    """Failed to load and old: truncated or garbage."""
    UNSAFE = "unsafe"
    """Refused: the pickle reaches for code."""
    IGNORED = "ignored"
    """Never read: its name claims the step (``00005.pt``) but is not the name miles writes and reads."""


@dataclass(frozen=True, slots=True)
class StepProblem:
    """A file of a step that could not be used."""

    path: Path
    """The file."""
    kind: ProblemKind
    """Still writing, corrupt or unsafe."""
    message: str
    """The one-line explanation (already names the file)."""


@dataclass(frozen=True, slots=True)
class StepSummary:
    """Everything a table of the step shows: cacheable, no per-token arrays."""

    rollout_id: int
    """The step."""
    evaluation: bool
    """Whether it is an eval step."""
    rows: Sequence[SampleRow]
    """One per sample, in rollout order."""
    groups: Sequence[GroupRow]
    """One per group, in order of first appearance."""
    aggregate: StepAggregate
    """Headline figures."""
    problems: tuple[StepProblem, ...]
    """Files that could not be used."""
    complete: bool
    """False while some file of the step is still being written."""
    signature: tuple[tuple[str, int, float], ...]
    """The files (name, size, mtime) this summary was computed from."""
    alignment_reasons: tuple[tuple[int, str], ...] = ()
    """(sample index, why its per-token data is unreadable) for every alignment_failed sample."""
    settling_until: float | None = None
    """Set while the newest train file is younger than the still-writing age: other ranks' shards may
    still land, so a sample missing a shard is pending, not unreadable. Complete from then on if no
    file changed."""

    def alignment_reason(self, sample_index: int) -> str | None:
        """Why a sample's per-token data is unreadable (None when it is readable)."""
        return dict(self.alignment_reasons).get(sample_index)
