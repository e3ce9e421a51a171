"""The facts behind :mod:`miles_tui.core.telemetry.metric_meanings`: each metric key (or key family) miles logs,
what it means, and the file of miles (radixark/miles) it was read from.

Templates: ``{stat}`` is one of ``mean median max min``, ``{n}`` a decimal number, ``{name}`` one path segment.
A key that could not be traced to the code computing it has no entry. The ``perf/`` keys are in
:mod:`miles_tui.core.telemetry.metric_meaning_perf`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class MetricMeaning:
    """One key (or key family) and what it means."""

    template: str
    """The key, with ``{stat}``, ``{n}`` or ``{name}`` for its variable parts."""
    meaning: str
    """One line: what it is, its unit, what it is averaged over, how it is derived."""
    source: str
    """Where it was read from (a miles file, or a miles-tui module for ``dump/*``)."""


_ROLLOUT_METRICS = "miles/ray/rollout/metrics.py"
_TRAIN_ROLLOUT = "miles/backends/training_utils/log_utils.py"
_LOSSES = "miles/backends/training_utils/loss_hub/losses.py"
_ASYNC_BUFFER = "miles/rollout/fully_async_data_buffer.py"
_TRAIN_PER_SAMPLE = "mean per sample (rollout) over its loss-masked tokens, then over the step's samples"
_DUMP = "miles_tui core/dump/summary.py"

SAMPLE_METRICS: Final[tuple[MetricMeaning, ...]] = (
    # miles/ray/rollout/metrics.py _compute_metrics_from_samples (logged as rollout/X and as eval/{name}/X)
    MetricMeaning(
        "response_len/{stat}",
        "response length in tokens (loss-masked tokens when a loss mask exists), {stat} over the rollout's samples",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "truncated_ratio",
        "fraction of the rollout's samples that hit the length cap (status TRUNCATED)",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "repetition_frac",
        "fraction of samples whose response repeats: > 10,000 chars and the last 10,000 compress > 10x",
        "miles/ray/rollout/metrics.py, miles/utils/metric_utils.py",
    ),
    MetricMeaning(
        "zero_std/count_{name}",
        "number of prompt groups whose samples all got this reward (rounded to 0.1): no spread, no GRPO gradient",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "zero_std/all_zero_percentage",
        "fraction (0-1) of the rollout's prompt groups whose samples all got reward 0 (too hard)",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "zero_std/all_one_percentage",
        "fraction (0-1) of the rollout's prompt groups whose samples all got reward 1 (too easy)",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "spec_accept_rate",
        "speculative decoding: mean over samples of the draft-token acceptance rate (with a speculative algorithm)",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "spec_accept_length",
        "speculative decoding: mean over samples of the accepted length per step (with a speculative algorithm)",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "prefix_cache_hit_rate",
        "prefix-cache hits: cached prompt tokens / prompt tokens, each summed over the rollout's samples",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "avg_cached_tokens_per_sample",
        "prefix-cached prompt tokens summed over samples / number of samples",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "error_cat/{name}",
        "fraction of samples whose reward dict's --log-reward-category field has this value",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "weight_version/mixed_version_ratio",
        "fraction of samples whose turns were generated with more than one weight version",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "weight_version/{stat}",
        "oldest weight version a sample was generated with, {stat} over samples that have one",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "tito_session_mismatch_rate/{name}",
        "fraction of samples (with TITO data) whose session had any token-in/token-out mismatch",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "tito_session_mismatch_rate/{name}/{name}",
        "fraction of samples (with TITO data) whose session had a token-in/token-out mismatch of this type",
        _ROLLOUT_METRICS,
    ),
)
"""The rollout-side metrics miles computes from a batch of samples, relative to their prefix."""

MEANINGS: Final[tuple[MetricMeaning, ...]] = (
    # -- the step counters each record is logged against
    MetricMeaning(
        "rollout/step",
        "x of rollout/* and perf/*: the rollout id (with --wandb-always-use-train-step: samples so far / global batch)",
        "miles/utils/metric_utils.py",
    ),
    MetricMeaning(
        "eval/step",
        "x of eval/*: the rollout id evaluated (with --wandb-always-use-train-step: samples so far / global batch)",
        f"{_ROLLOUT_METRICS}, miles/utils/metric_utils.py",
    ),
    MetricMeaning(
        "train/step",
        "x of train/*: rollout id x train steps per rollout + the train step within the rollout",
        _TRAIN_ROLLOUT,
    ),
    # -- rollout/, trainer side: log_rollout_data reduces each field of the train batch (Σsum / Σcount over DP)
    MetricMeaning("rollout/raw_reward", "reward before normalization, mean over the step's samples", _TRAIN_ROLLOUT),
    MetricMeaning(
        "rollout/rewards",
        "reward used for training (group-normalized under grpo/gspo/reinforce++-baseline with reward "
        "normalization, else raw), mean over samples",
        f"{_TRAIN_ROLLOUT}, miles/ray/rollout/train_data_conversion.py",
    ),
    MetricMeaning(
        "rollout/truncated",
        "fraction of the step's samples that hit the length cap (0/1 per sample, averaged)",
        f"{_TRAIN_ROLLOUT}, miles/ray/rollout/train_data_conversion.py",
    ),
    MetricMeaning(
        "rollout/response_lengths", "response length in tokens, mean over the step's samples", _TRAIN_ROLLOUT
    ),
    MetricMeaning(
        "rollout/total_lengths", "prompt + response length in tokens, mean over the step's samples", _TRAIN_ROLLOUT
    ),
    MetricMeaning(
        "rollout/log_probs", f"trainer's log-prob of each response token, {_TRAIN_PER_SAMPLE}", _TRAIN_ROLLOUT
    ),
    MetricMeaning(
        "rollout/ref_log_probs",
        f"reference model's log-prob of each response token, {_TRAIN_PER_SAMPLE}",
        _TRAIN_ROLLOUT,
    ),
    MetricMeaning(
        "rollout/rollout_log_probs",
        f"inference engine's log-prob of each response token, {_TRAIN_PER_SAMPLE}",
        _TRAIN_ROLLOUT,
    ),
    MetricMeaning(
        "rollout/teacher_log_probs",
        f"teacher model's log-prob of each response token, {_TRAIN_PER_SAMPLE}",
        _TRAIN_ROLLOUT,
    ),
    MetricMeaning("rollout/advantages", f"advantage of each response token, {_TRAIN_PER_SAMPLE}", _TRAIN_ROLLOUT),
    MetricMeaning("rollout/returns", f"return of each response token, {_TRAIN_PER_SAMPLE}", _TRAIN_ROLLOUT),
    MetricMeaning("rollout/values", f"critic's value of each response token, {_TRAIN_PER_SAMPLE}", _TRAIN_ROLLOUT),
    MetricMeaning("rollout/entropy", f"token entropy of the policy, {_TRAIN_PER_SAMPLE}", _TRAIN_ROLLOUT),
    MetricMeaning(
        "rollout/opd_reverse_kl", f"on-policy distillation reverse KL per token, {_TRAIN_PER_SAMPLE}", _TRAIN_ROLLOUT
    ),
    MetricMeaning("rollout/round_number", "number of rounds (turns) of a sample, mean over samples", _TRAIN_ROLLOUT),
    # -- rollout/fully_async/ and rollout/dynamic_filter/
    MetricMeaning(
        "rollout/fully_async/queue_size",
        "groups waiting in the async data buffer when the rollout step logged",
        _ASYNC_BUFFER,
    ),
    MetricMeaning(
        "rollout/fully_async/aborted_groups_filtered",
        "groups dropped since the last log because a sample was aborted",
        _ASYNC_BUFFER,
    ),
    MetricMeaning(
        "rollout/fully_async/stale_groups_filtered",
        "groups dropped since the last log for exceeding --max-weight-staleness",
        _ASYNC_BUFFER,
    ),
    MetricMeaning(
        "rollout/fully_async/avg_staleness",
        "weight versions between the trainer's and a group's oldest, mean over groups taken since the last log",
        _ASYNC_BUFFER,
    ),
    MetricMeaning(
        "rollout/fully_async/max_staleness",
        "weight versions between the trainer's and a group's oldest, max over groups taken since the last log",
        _ASYNC_BUFFER,
    ),
    MetricMeaning(
        "rollout/fully_async/buffer_avg_staleness",
        "staleness (weight versions) of the groups still in the buffer, mean",
        _ASYNC_BUFFER,
    ),
    MetricMeaning(
        "rollout/fully_async/buffer_max_staleness",
        "staleness (weight versions) of the groups still in the buffer, max",
        _ASYNC_BUFFER,
    ),
    MetricMeaning(
        "rollout/dynamic_filter/drop_{name}",
        "prompt groups the dynamic sampling filter dropped for this reason since the last log",
        "miles/rollout/filter_hub/base_types.py",
    ),
    # -- multi_turn/ (--log-multi-turn)
    MetricMeaning(
        "multi_turn/raw_response_length/response_length_{stat}",
        "response length in tokens including tool/observation tokens, {stat} over samples",
        _TRAIN_ROLLOUT,
    ),
    MetricMeaning(
        "multi_turn/raw_response_length/response_length_clip_ratio",
        "fraction of samples whose response (with observations) reached --rollout-max-response-len",
        _TRAIN_ROLLOUT,
    ),
    MetricMeaning(
        "multi_turn/wo_obs_response_length/response_length_{stat}",
        "response length in tokens without observations (loss-masked tokens), {stat} over samples",
        _TRAIN_ROLLOUT,
    ),
    MetricMeaning("multi_turn/round_number_{stat}", "rounds (turns) of a sample, {stat} over samples", _TRAIN_ROLLOUT),
    # -- passrate/ (--log-passrate)
    MetricMeaning(
        "passrate/pass@{n}",
        "unbiased pass@k estimate (k = {n}, reward == 1 is a pass), mean over complete prompt groups",
        f"{_ROLLOUT_METRICS}, miles/utils/metric_utils.py",
    ),
    # -- train/: loss_hub/losses.py per micro-batch, aggregate_train_losses over the step, log_train_step
    MetricMeaning(
        "train/loss",
        f"total loss: pg_loss - entropy_coef x entropy + kl_loss_coef x kl_loss, {_TRAIN_PER_SAMPLE}",
        f"{_LOSSES}, {_TRAIN_ROLLOUT}",
    ),
    MetricMeaning(
        "train/pg_loss",
        f"PPO-clipped policy-gradient loss -min(r*A, clip(r)*A) per token, {_TRAIN_PER_SAMPLE}",
        f"{_LOSSES}, miles/backends/training_utils/loss_hub/math_utils.py",
    ),
    MetricMeaning(
        "train/pg_clipfrac",
        f"fraction of tokens where the clipped ratio term was taken (ratio past the clip range), {_TRAIN_PER_SAMPLE}",
        f"{_LOSSES}, miles/backends/training_utils/loss_hub/math_utils.py",
    ),
    MetricMeaning(
        "train/ppo_kl",
        f"old log-prob - new log-prob per token (k1 KL estimate; sequence-level under GSPO), {_TRAIN_PER_SAMPLE}",
        _LOSSES,
    ),
    MetricMeaning(
        "train/entropy_loss",
        f"policy's token entropy (0 when entropy is not computed), {_TRAIN_PER_SAMPLE}",
        _LOSSES,
    ),
    MetricMeaning(
        "train/kl_loss",
        f"KL to the reference model per token (--kl-loss-type; with --use-kl-loss), {_TRAIN_PER_SAMPLE}",
        _LOSSES,
    ),
    MetricMeaning(
        "train/train_rollout_logprob_abs_diff",
        f"|log-prob the trainer scored before the update - inference engine's| per token, {_TRAIN_PER_SAMPLE}",
        _LOSSES,
    ),
    MetricMeaning(
        "train/train_rollout_kl",
        f"KL(rollout || train) per token, k3 estimate clamped to [-10, 10], {_TRAIN_PER_SAMPLE}",
        _LOSSES,
    ),
    MetricMeaning(
        "train/ois",
        f"importance ratio exp(new log-prob - old log-prob) per token (mismatch metrics or TIS), {_TRAIN_PER_SAMPLE}",
        _LOSSES,
    ),
    MetricMeaning(
        "train/tis",
        f"exp(trainer's pre-update log-prob - engine's) per token, before clamping (TIS), {_TRAIN_PER_SAMPLE}",
        f"{_LOSSES}, miles/backends/training_utils/loss_hub/corrections.py",
    ),
    MetricMeaning(
        "train/tis_abs",
        f"|tis - 1| per token (TIS), {_TRAIN_PER_SAMPLE}",
        f"{_LOSSES}, miles/backends/training_utils/loss_hub/corrections.py",
    ),
    MetricMeaning(
        "train/tis_clipfrac",
        f"fraction of tokens whose TIS ratio was clamped (icepop: zeroed), {_TRAIN_PER_SAMPLE}",
        f"{_LOSSES}, miles/backends/training_utils/loss_hub/corrections.py",
    ),
    MetricMeaning(
        "train/ess_ratio",
        "effective sample size of a sample's per-token IS weights / its tokens (1 = on-policy), mean over samples",
        f"{_LOSSES}, miles/backends/training_utils/loss_hub/math_utils.py",
    ),
    MetricMeaning("train/opd_reverse_kl", f"on-policy distillation reverse KL per token, {_TRAIN_PER_SAMPLE}", _LOSSES),
    MetricMeaning(
        "train/grad_norm", "global L2 norm of the gradient before clipping, one value per train step", _TRAIN_ROLLOUT
    ),
    MetricMeaning(
        "train/lr-pg_{n}",
        "learning rate of optimizer parameter group {n} at this train step",
        "miles/backends/megatron_utils/model.py, miles/backends/fsdp_utils/actor.py",
    ),
    MetricMeaning(
        "train/mtp_loss",
        "multi-token-prediction loss x its loss scale, per train step (with MTP training)",
        "miles/backends/megatron_utils/model.py",
    ),
    # -- eval/: log_eval_rollout_data and the rollout manager's extras
    MetricMeaning(
        "eval/lag_steps",
        "rollout steps between the step evaluated and the rollout manager's current step",
        "miles/ray/rollout/rollout_manager.py",
    ),
    MetricMeaning(
        "eval/duration_seconds", "seconds the evaluation took, start to logging", "miles/ray/rollout/rollout_manager.py"
    ),
    MetricMeaning(
        "eval/export_time_seconds",
        "seconds spent exporting the checkpoint the evaluation ran on",
        "miles/ray/rollout/rollout_manager.py",
    ),
    MetricMeaning(
        "eval/skipped_{name}", "1 when the evaluation at this step was skipped, for this reason", _ROLLOUT_METRICS
    ),
    MetricMeaning(
        "eval/{name}-none_reward_ratio",
        "fraction of the eval set's samples with no reward (counted as 0)",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "eval/{name}-truncated_ratio", "fraction of the eval set's samples that hit the length cap", _ROLLOUT_METRICS
    ),
    MetricMeaning(
        "eval/{name}-pass@{n}",
        "unbiased pass@k estimate of the eval set (k = {n}, reward == 1 is a pass), mean over prompts",
        f"{_ROLLOUT_METRICS}, miles/utils/metric_utils.py",
    ),
    MetricMeaning(
        "eval/{name}", "mean reward over the eval set's samples (a missing reward counts as 0)", _ROLLOUT_METRICS
    ),
    # -- dump/: the monitor's own figures from the step dumps (no metrics.jsonl)
    MetricMeaning("dump/reward_mean", "monitor's figure: mean reward over the step's samples that have one", _DUMP),
    MetricMeaning("dump/reward_std", "monitor's figure: sample standard deviation of those rewards", _DUMP),
    MetricMeaning(
        "dump/zero_std_group_frac",
        "monitor's figure: fraction of the step's groups whose rewards are all equal (std <= 1e-12)",
        _DUMP,
    ),
    MetricMeaning("dump/truncated_frac", "monitor's figure: fraction of the step's samples that were truncated", _DUMP),
    MetricMeaning(
        "dump/avg_staleness",
        "monitor's figure: rollout id - oldest numeric weight version, mean over samples that have one",
        _DUMP,
    ),
    MetricMeaning(
        "dump/mean_abs_lp_diff",
        "monitor's figure: |train - rollout log-prob| per trained token, mean per sample, then over samples",
        _DUMP,
    ),
    MetricMeaning(
        "dump/mean_entropy",
        "monitor's figure: token entropy, mean per sample over trained tokens, then over samples",
        _DUMP,
    ),
    MetricMeaning(
        "dump/response_length_mean", "monitor's figure: response length in tokens, mean over the step's samples", _DUMP
    ),
    MetricMeaning(
        "dump/mixed_version_frac",
        "monitor's figure: fraction of samples whose turns ran on several weight versions (of those read)",
        _DUMP,
    ),
    MetricMeaning("dump/eval_reward_mean", "monitor's figure: mean reward over the eval step's samples", _DUMP),
    MetricMeaning(
        "dump/eval_reward_std", "monitor's figure: sample standard deviation of the eval step's rewards", _DUMP
    ),
)
"""Every traced key or key family, in lookup order."""
