"""metric_meaning: one description per traced key, one test per key family; untraced keys get none."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_tui.core.analysis.metric_view import DUMP_EVAL_FIELDS, DUMP_FIELDS
from miles_tui.core.telemetry import metric_meaning, metric_source
from miles_tui.core.telemetry.metric_meaning_perf import PERF_MEANINGS
from miles_tui.core.telemetry.metric_meaning_table import MEANINGS, SAMPLE_METRICS


def test_exact_keys_have_their_own_line() -> None:
    assert metric_meaning("rollout/raw_reward") == "reward before normalization, mean over the step's samples"
    assert "before clipping" in (metric_meaning("train/grad_norm") or "")
    assert "train_wait_time / step_time" in (metric_meaning("perf/wait_time_ratio") or "")


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("rollout/response_len/mean", "mean over the rollout's samples"),
        ("rollout/response_len/median", "median over"),
        ("rollout/response_len/max", "maximum over"),
        ("rollout/weight_version/min", "minimum over samples"),
        ("perf/non_generation_time/max", "maximum over samples"),
        ("multi_turn/round_number_mean", "mean over samples"),
        ("multi_turn/raw_response_length/response_length_min", "minimum over samples"),
    ],
)
def test_stat_family_names_the_statistic(key: str, says: str) -> None:
    assert says in (metric_meaning(key) or "")


def test_numbered_families_fill_the_number() -> None:
    assert metric_meaning("train/lr-pg_0") == "learning rate of optimizer parameter group 0 at this train step"
    assert "group 12 " in (metric_meaning("train/lr-pg_12") or "")
    assert "k = 8" in (metric_meaning("passrate/pass@8") or "")
    assert "k = 4" in (metric_meaning("eval/aime-pass@4") or "")
    assert metric_meaning("train/lr-pg_x") is None


def test_timer_family_only_for_timers_miles_has() -> None:
    assert "'actor_train' timer" in (metric_meaning("perf/actor_train_time") or "")
    assert "'ref_log_probs' timer" in (metric_meaning("perf/ref_log_probs_time") or "")
    assert metric_meaning("perf/gen_time") is None  # no such timer in miles


def test_named_segment_families() -> None:
    assert "all got this reward" in (metric_meaning("rollout/zero_std/count_0.0") or "")
    assert "dropped" in (metric_meaning("rollout/dynamic_filter/drop_zero_std") or "")
    assert "--log-reward-category" in (metric_meaning("rollout/error_cat/timeout") or "")
    assert "GB" in (metric_meaning("perf/cpu_memory_after_offload_gb") or "")
    assert "of this type" in (metric_meaning("rollout/tito_session_mismatch_rate/v2/assistant_text") or "")
    assert metric_meaning("rollout/zero_std/count_0.0/x") is None


def test_eval_families() -> None:
    assert "mean reward over the eval set" in (metric_meaning("eval/aime") or "")
    assert "length cap" in (metric_meaning("eval/aime-truncated_ratio") or "")
    assert "no reward" in (metric_meaning("eval/aime-none_reward_ratio") or "")
    assert "skipped" in (metric_meaning("eval/skipped_no_marker") or "")
    assert "x of eval/*" in (metric_meaning("eval/step") or "")
    nested = metric_meaning("eval/aime/response_len/median") or ""
    assert nested.startswith("eval set aime: ") and "median" in nested
    assert metric_meaning("eval/aime/no_such_metric") is None


def test_dump_fallbacks_all_described() -> None:
    for name in DUMP_FIELDS:
        assert metric_meaning(f"dump/{name}"), name
    for name in DUMP_EVAL_FIELDS:
        assert metric_meaning(f"dump/eval_{name}"), name


@pytest.mark.parametrize(
    "key",
    [
        "rollout/zero_std_ratio",  # not logged by miles: keys miles-tui could not trace get no line
        "rollout/staleness/mean",
        "rollout/n_samples",
        "train/log_probs",
        "custom/thing",
        "",
        "rollout/",
        "eval/",
    ],
)
def test_untraced_keys_get_none(key: str) -> None:
    assert metric_meaning(key) is None
    assert metric_source(key) is None


def test_every_entry_is_one_line_with_a_source() -> None:
    for entry in (*SAMPLE_METRICS, *MEANINGS, *PERF_MEANINGS):
        assert entry.meaning and "\n" not in entry.meaning and len(entry.meaning) <= 170, entry.template
        assert entry.source.startswith(("miles/", "miles_tui ")), entry.template


def test_templates_are_unique() -> None:
    templates = [e.template for e in (*MEANINGS, *PERF_MEANINGS)] + [f"rollout/{e.template}" for e in SAMPLE_METRICS]
    assert len(templates) == len(set(templates))


def test_source_names_the_file() -> None:
    entry = metric_source("train/pg_clipfrac")
    assert entry is not None and "loss_hub/losses.py" in entry.source


def test_the_docs_page_lists_every_entry_as_the_table_says() -> None:
    """docs/metric-meanings.md is where a user looks: one row per entry, word for word."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "metric-meanings.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    expected = [(f"rollout/{e.template}", e) for e in SAMPLE_METRICS] + [
        (e.template, e) for e in (*MEANINGS, *PERF_MEANINGS)
    ]
    assert len(rows) == len(expected)
    for row, (template, entry) in zip(rows, expected, strict=True):
        assert row == f"| `{template}` | {entry.meaning.replace('|', chr(92) + '|')} | {entry.source} |"


def test_importance_sampling_and_multi_lora_families() -> None:
    assert "before clamping (TIS)" in (metric_meaning("train/tis") or "")
    assert "clamped" in (metric_meaning("train/tis_clipfrac") or "")
    assert metric_meaning("perf/fully_async/batch_n_groups") == "prompt groups in the batch handed to training"
    assert metric_meaning("perf/fully_async/queue_length") is None  # its unit was not traced
