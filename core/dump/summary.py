"""Every derived per-sample, per-group and per-step value, computed once, here.

Contract:
- :class:`SampleRow` holds exactly the ROW columns of the CLI contract, as raw
  values (None where a value does not exist, never 0 or NaN). The row, group
  and aggregate classes live in :mod:`miles_tui.core.dump.step_summary` (numpy-free, for the
  cache) and are re-exported here.
- Staleness is ``rollout_id - min(numeric weight versions)``, numeric meaning
  decimal digits only (miles' rule: "+3", " 3 ", "-1" are not); per-token
  statistics use only positions with ``loss_mask > 0``; an empty selection
  gives None. Views never recompute any of these. ``weight_versions`` and
  ``spec_info`` are read in every shape miles writes
  (:mod:`miles_tui.core.dump.record_formats`); a shape it does not know is named
  in the row's ``unknown_format``, never read as absent.
- A standard deviation (a group's ``reward_std``, a sample's ``adv_std``) is
  the sample standard deviation: None with fewer than two values, never 0.
- Groups are degenerate (``zero_std``) when they have reward data and the
  sample standard deviation of their rewards is <= 1e-12 (a group with one
  reward counts, although its ``reward_std`` is None); a group without reward
  data is not.
This module reads no files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from miles_tui.core.dump.record_formats import Unrecognised, prefix_counts, read_versions, spec_counts
from miles_tui.core.dump.resolve import TrainRow
from miles_tui.core.dump.step_summary import PER_TOKEN_STATISTICS, ROW_COLUMNS, GroupRow, SampleRow, StepAggregate

__all__ = [
    "ROW_COLUMNS",
    "ZERO_STD_EPS",
    "GroupRow",
    "SampleRow",
    "StepAggregate",
    "group_reward",
    "group_rows",
    "numeric_versions",
    "sample_row",
    "staleness",
    "step_aggregate",
    "trained_positions",
]

ZERO_STD_EPS = 1e-12


def numeric_versions(weight_versions: Sequence[Any]) -> list[int]:
    """The weight versions whose text is decimal digits only ("12", or 12), as miles counts them.

    "+3", " 3 ", "-1", "v12", "default" and "" are not numeric (miles tests
    ``str(v).isdigit()``; digits that ``int`` cannot read, such as "²", are
    left out here where miles would raise).
    """
    out = []
    for version in weight_versions:
        text = str(version)
        if text.isdecimal():
            try:
                out.append(int(text))
            except ValueError:  # more digits than int() converts: no real version
                continue
    return out


def staleness(rollout_id: int, weight_versions: Sequence[Any]) -> int | None:
    """rollout_id − min numeric weight version; None when no version is numeric."""
    versions = numeric_versions(weight_versions)
    return rollout_id - min(versions) if versions else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float | np.integer | np.floating):
        result = float(value)
        return result if math.isfinite(result) else None
    return None


def _ratio(numerator: Any, denominator: Any) -> float | None:
    num, den = _number(numerator), _number(denominator)
    if num is None or den is None or den == 0:
        return None
    return num / den


def _mean(values: npt.NDArray[np.float64]) -> float | None:
    return float(values.mean()) if values.size else None


def _max(values: npt.NDArray[np.float64]) -> float | None:
    return float(values.max()) if values.size else None


def _std(values: npt.NDArray[np.float64]) -> float | None:
    """The sample standard deviation; None with fewer than two values (undefined, not 0)."""
    return float(values.std(ddof=1)) if values.size > 1 else None


def trained_positions(train: TrainRow) -> npt.NDArray[np.bool_]:
    """Positions with loss_mask > 0 (all positions when the mask was not dumped)."""
    if train.loss_mask is None:
        return np.ones(train.response_length, dtype=bool)
    return train.loss_mask > 0


def _masked(train: TrainRow, name: str, keep: npt.NDArray[np.bool_] | None) -> npt.NDArray[np.float64] | None:
    """The field at the kept positions (``keep`` None: every position is kept, nothing to copy)."""
    values = train.per_token.get(name)
    if values is None or keep is None:
        return values
    return values[keep]


def sample_row(
    rollout_id: int,
    sample: Mapping[str, Any],
    train: TrainRow | None,
    raw_reward: float | None,
) -> SampleRow:
    """Build the ROW of one rollout sample (``train`` None: no shard holds it, or an eval step)."""
    read = read_versions(sample.get("weight_versions"))
    counts = spec_counts(sample.get("spec_info"))
    prefix = prefix_counts(sample.get("prefix_cache_info"))
    unknown = [r.field for r in (read, counts, prefix) if isinstance(r, Unrecognised)]
    versions = [] if isinstance(read, Unrecognised) else list(read.versions)
    accepted, drafted = (None, None) if isinstance(counts, Unrecognised) else counts
    cached, prompt_tokens = (None, None) if isinstance(prefix, Unrecognised) else prefix
    numeric = numeric_versions(versions)
    prompt = sample.get("prompt")
    tool_calls = None
    if isinstance(prompt, list):
        tool_calls = sum(1 for m in prompt if isinstance(m, Mapping) and m.get("role") == "tool")
    status = sample.get("status")
    status_text = None if status is None else str(getattr(status, "value", status))
    tokens = sample.get("tokens")
    total_length = len(tokens) if tokens is not None else int(sample.get("total_length") or 0)
    response_length = int(sample.get("response_length") or 0)

    stats: dict[str, float | None] = dict.fromkeys(PER_TOKEN_STATISTICS)
    truncated = status_text == "truncated"
    if train is not None:
        trained = trained_positions(train)
        keep = None if trained.all() else trained
        entropy = _masked(train, "entropy", keep)
        if entropy is not None:
            stats["mean_entropy"], stats["max_entropy"] = _mean(entropy), _max(entropy)
        ref_entropy = _masked(train, "ref_entropy", keep)
        if ref_entropy is not None:
            stats["ref_entropy_mean"] = _mean(ref_entropy)
        log_probs = _masked(train, "log_probs", keep)
        rollout_lp = _masked(train, "rollout_log_probs", keep)
        if log_probs is not None and rollout_lp is not None:
            diff = log_probs - rollout_lp
            magnitude = np.abs(diff)
            stats["mean_abs_lp_diff"], stats["max_abs_lp_diff"] = _mean(magnitude), _max(magnitude)
            stats["mean_imp_ratio"] = _mean(np.exp(diff))
        advantages = _masked(train, "advantages", keep)
        if advantages is not None:
            stats["adv_mean"], stats["adv_std"] = _mean(advantages), _std(advantages)
        returns = _masked(train, "returns", keep)
        if returns is not None:
            stats["return_mean"] = _mean(returns)
        if train.truncated is not None:
            truncated = train.truncated
        response_length, total_length = train.response_length, train.total_length

    group = sample.get("group_index")
    return SampleRow(
        sample_index=int(sample.get("index", -1)),
        group_index=None if group is None else int(group),
        status=status_text,
        remove_sample=bool(sample.get("remove_sample") or False),
        response_length=response_length,
        total_length=total_length,
        reward=_number(sample.get("reward")),
        weight_version=None if not versions else str(versions[-1]),
        weight_version_min=min(numeric) if numeric else None,
        mixed_version=len({str(v) for v in versions}) > 1,
        staleness=rollout_id - min(numeric) if numeric else None,
        turns=0 if isinstance(read, Unrecognised) else read.turns,
        tool_calls=tool_calls,
        non_generation_time=_number(sample.get("non_generation_time")),
        spec_accept_rate=_ratio(accepted, drafted),
        prefix_cache_hit_rate=_ratio(cached, prompt_tokens),
        raw_reward=raw_reward if train is not None else None,
        normalized_reward=train.normalized_reward if train is not None else None,
        truncated=truncated,
        dumped_rank=train.dumped_rank if train is not None else None,
        mean_entropy=stats["mean_entropy"],
        max_entropy=stats["max_entropy"],
        ref_entropy_mean=stats["ref_entropy_mean"],
        mean_abs_lp_diff=stats["mean_abs_lp_diff"],
        max_abs_lp_diff=stats["max_abs_lp_diff"],
        mean_imp_ratio=stats["mean_imp_ratio"],
        adv_mean=stats["adv_mean"],
        adv_std=stats["adv_std"],
        return_mean=stats["return_mean"],
        alignment_failed=train.alignment_failed if train is not None else False,
        unknown_format=" ".join(unknown) or None,
    )


def group_reward(row: SampleRow, evaluation: bool) -> float | None:
    """The reward a group statistic uses: raw_reward on train steps, reward on eval steps."""
    return row.reward if evaluation else row.raw_reward


def group_rows(rows: Sequence[SampleRow], evaluation: bool) -> list[GroupRow]:
    """One GroupRow per group_index, in order of first appearance.

    ``zero_std`` follows the spec: reward data, and a sample std <= 1e-12, or a group of one sample. A bigger
    group with one readable reward (the others unreadable) has no std, and its spread is unknown: it is not
    degenerate (it was, and a step with a cut shard said "no policy gradient" of groups whose rollout rewards
    differ).
    """
    by_group: dict[int | None, list[SampleRow]] = {}
    for row in rows:
        by_group.setdefault(row.group_index, []).append(row)
    out = []
    for group_index, members in by_group.items():
        rewards = np.array(
            [r for r in (group_reward(m, evaluation) for m in members) if r is not None], dtype=np.float64
        )
        std = _std(rewards)
        out.append(
            GroupRow(
                group_index=group_index,
                n=len(members),
                reward_mean=_mean(rewards),
                reward_std=std,
                response_length_mean=float(np.mean([m.response_length for m in members])),
                truncated_frac=float(np.mean([m.truncated for m in members])),
                zero_std=bool(rewards.size and (len(members) == 1 or (std is not None and std <= ZERO_STD_EPS))),
            )
        )
    return out


def _present(values: Sequence[float | None]) -> npt.NDArray[np.float64]:
    return np.array([v for v in values if v is not None], dtype=np.float64)


def _read_mixed(rows: Sequence[SampleRow]) -> list[bool]:
    """``mixed_version`` of the rows whose weight_versions was read (an unknown shape is not "not mixed")."""
    return [r.mixed_version for r in rows if not (r.unknown_format and "weight_versions" in r.unknown_format)]


def step_aggregate(
    rollout_id: int, evaluation: bool, rows: Sequence[SampleRow], groups: Sequence[GroupRow]
) -> StepAggregate:
    """The headline figures of a step from its rows and groups."""
    rewards = _present([group_reward(r, evaluation) for r in rows])
    n = len(rows)
    return StepAggregate(
        rollout_id=rollout_id,
        evaluation=evaluation,
        n_samples=n,
        reward_mean=_mean(rewards),
        reward_std=_std(rewards),
        response_length_mean=float(np.mean([r.response_length for r in rows])) if n else None,
        truncated_frac=float(np.mean([r.truncated for r in rows])) if n else None,
        zero_std_group_frac=float(np.mean([g.zero_std for g in groups])) if groups else None,
        mean_abs_lp_diff=_mean(_present([r.mean_abs_lp_diff for r in rows])),
        mean_entropy=_mean(_present([r.mean_entropy for r in rows])),
        mixed_version_frac=float(np.mean(mixed)) if (mixed := _read_mixed(rows)) else None,
        avg_staleness=_mean(_present([None if r.staleness is None else float(r.staleness) for r in rows])),
        alignment_failed=sum(r.alignment_failed for r in rows),
    )
