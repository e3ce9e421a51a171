"""The ``perf/`` part of :mod:`miles_tui.core.telemetry.metric_meaning_table`: the trainer's timers and what miles
derives from them, the rollout side's throughput figures, and the multi-LoRA async rollout's batch figures.
"""

from __future__ import annotations

from typing import Final

from miles_tui.core.telemetry.metric_meaning_table import MetricMeaning

_ROLLOUT_METRICS = "miles/ray/rollout/metrics.py"
_TRAIN_ROLLOUT = "miles/backends/training_utils/log_utils.py"
_PERF = "miles/utils/train_metric_utils.py"
_MULTI_LORA = "miles/rollout/multi_lora/async_rollout.py"

TIMERS: Final = (
    "actor_train",
    "critic_train",
    "data_preprocess",
    "export_hf",
    "finalize_and_resume_engines",
    "log_probs",
    "reconcile_adapters",
    "ref_log_probs",
    "ref_model_update",
    "save_model",
    "sleep",
    "teacher_log_probs",
    "update_weights",
    "update_weights_implementation",
    "wake_up",
)
"""The trainer's timers (``timer("...")``, ``@timer`` methods, ``{store_prefix}log_probs``) besides ``train`` and
``train_wait``: miles/backends/megatron_utils/actor.py, miles/backends/fsdp_utils/actor.py,
miles/backends/megatron_utils/update_weight/update_weight_from_distributed/mixin.py."""

PERF_MEANINGS: Final[tuple[MetricMeaning, ...]] = (
    # -- perf/: the trainer's timers (seconds accumulated since the last perf log), and what is derived from them
    MetricMeaning(
        "perf/train_wait_time",
        "seconds the trainer waited between train calls (for rollout data) since the last perf log",
        f"{_PERF}, miles/backends/megatron_utils/actor.py",
    ),
    MetricMeaning(
        "perf/train_time", "seconds the trainer spent in train() for this rollout", f"{_PERF}, miles/utils/timer.py"
    ),
    MetricMeaning(
        "perf/step_time", "train_wait_time + train_time, seconds: one rollout step as the trainer sees it", _PERF
    ),
    MetricMeaning(
        "perf/wait_time_ratio", "train_wait_time / step_time: the share of the step the trainer sat idle", _PERF
    ),
    MetricMeaning(
        "perf/actor_train_tflops",
        "3 x forward TFLOPs per GPU of the rollout batch's sequences / actor_train_time (achieved TFLOP/s per GPU)",
        _PERF,
    ),
    MetricMeaning(
        "perf/actor_train_tok_per_s",
        "prompt + response tokens of the whole rollout batch / actor_train_time, tokens per second",
        _PERF,
    ),
    MetricMeaning(
        "perf/mfu_peak_tflops",
        "peak bf16 TFLOP/s per GPU used as MFU's denominator (--mfu-peak-tflops, else detected)",
        _PERF,
    ),
    MetricMeaning("perf/actor_train_mfu", "model FLOPs utilization: actor_train_tflops / mfu_peak_tflops (0-1)", _PERF),
    MetricMeaning(
        "perf/log_probs_tflops",
        "forward TFLOPs per GPU of the rollout batch's sequences / log_probs_time, TFLOP/s",
        _PERF,
    ),
    MetricMeaning(
        "perf/ref_log_probs_tflops",
        "forward TFLOPs per GPU of the rollout batch's sequences / ref_log_probs_time, TFLOP/s",
        _PERF,
    ),
    MetricMeaning(
        "perf/update_weights_density",
        "fraction of weight bytes that changed in a delta weight update (all-reduced over ranks)",
        "miles/backends/megatron_utils/update_weight/update_weight_from_distributed/delta.py",
    ),
    MetricMeaning(
        "perf/update_weights_wire_bytes",
        "bytes sent for a delta weight update, summed over ranks",
        "miles/backends/megatron_utils/update_weight/update_weight_from_distributed/delta.py",
    ),
    MetricMeaning(
        "perf/cpu_memory_{name}_gb", "system memory in use (psutil 'used'), GB, at the named point", _TRAIN_ROLLOUT
    ),
    # perf/ on the rollout side: _compute_perf_metrics_from_samples
    MetricMeaning(
        "perf/rollout_time",
        "seconds from the start of the rollout's generate call to its metrics being logged",
        f"{_ROLLOUT_METRICS}, miles/ray/rollout/rollout_manager.py",
    ),
    MetricMeaning(
        "perf/non_generation_time/{stat}",
        "seconds a sample spent outside generation (tools, reward), {stat} over samples (when any > 0)",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "perf/tokens_per_gpu_per_sec",
        "response tokens of all samples / rollout_time / rollout GPUs",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning(
        "perf/effective_tokens_per_gpu_per_sec",
        "loss-masked response tokens of all samples / rollout_time / rollout GPUs",
        _ROLLOUT_METRICS,
    ),
    MetricMeaning("perf/longest_sample_tokens_per_sec", "longest response in tokens / rollout_time", _ROLLOUT_METRICS),
    MetricMeaning(
        "perf/longest_effective_sample_tokens_per_sec",
        "longest loss-masked response in tokens / rollout_time",
        _ROLLOUT_METRICS,
    ),
    *(
        MetricMeaning(
            f"perf/longest_{kind}sample_non_generation_time",
            f"non-generation seconds of the longest {what}response(s), mean over them (when any > 0)",
            _ROLLOUT_METRICS,
        )
        for kind, what in (("", ""), ("effective_", "loss-masked "))
    ),
    *(
        MetricMeaning(
            f"perf/longest_{kind}sample_tokens_per_sec_without_non_generation",
            f"longest {what}response in tokens / (rollout_time - its non-generation seconds)",
            _ROLLOUT_METRICS,
        )
        for kind, what in (("", ""), ("effective_", "loss-masked "))
    ),
    MetricMeaning(
        "perf/{timer}_time",
        "seconds the trainer spent in its '{timer}' timer since the last perf log (primary rank)",
        f"{_PERF}, miles/utils/timer.py, miles/backends/megatron_utils/actor.py",
    ),
    # -- perf/fully_async/: the multi-LoRA async rollout, per batch
    *(
        MetricMeaning(f"perf/fully_async/batch_{what}", f"{meaning} in the batch handed to training", _MULTI_LORA)
        for what, meaning in (
            ("n_adapters", "adapters with groups"),
            ("n_groups", "prompt groups"),
            ("n_samples", "samples"),
            ("n_adapters_to_step", "adapters whose optimizer step completes"),
        )
    ),
    MetricMeaning(
        "perf/fully_async/batch_wait_time",
        "seconds from the start of the multi-LoRA generate call to its metrics being logged",
        _MULTI_LORA,
    ),
    MetricMeaning(
        "perf/fully_async/stale_dropped", "stale drops recorded since the last batch (multi-LoRA async)", _MULTI_LORA
    ),
    MetricMeaning(
        "perf/fully_async/stale_dropped_avg_staleness",
        "staleness of the drops recorded since the last batch, mean (multi-LoRA async)",
        _MULTI_LORA,
    ),
    MetricMeaning(
        "perf/fully_async/stale_dropped_max_staleness",
        "staleness of the drops recorded since the last batch, max (multi-LoRA async)",
        _MULTI_LORA,
    ),
)
"""Every traced ``perf/`` key or key family, in lookup order."""
