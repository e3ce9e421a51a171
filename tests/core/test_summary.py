"""Derived values: staleness, masked statistics, degenerate groups."""

from __future__ import annotations

import numpy as np

from miles_tui.core.dump import PER_TOKEN_STATISTICS, ROW_COLUMNS, FieldState
from miles_tui.core.dump.resolve import TrainRow
from miles_tui.core.dump.summary import group_rows, sample_row, staleness, step_aggregate


def test_staleness_uses_the_smallest_numeric_version_only() -> None:
    assert staleness(10, ["8", "9"]) == 2
    assert staleness(10, ["default", "v12", "", "9"]) == 1
    assert staleness(10, ["default", "hotfix"]) is None
    assert staleness(10, []) is None
    assert staleness(10, [7]) == 3


def _train(values: dict[str, list[float]], mask: list[int]) -> TrainRow:
    arrays = {k: np.array(v, dtype=np.float64) for k, v in values.items()}
    return TrainRow(
        sample_index=0,
        response_length=len(mask),
        total_length=len(mask) + 2,
        loss_mask=np.array(mask),
        per_token={k: arrays.get(k) for k in ("log_probs", "rollout_log_probs", "entropy", "advantages")},
        field_state=dict.fromkeys(arrays, FieldState.OK),
        alignment_failed=False,
        dumped_rank=0,
        normalized_reward=0.5,
        truncated=None,
        cp_size=1,
    )


def _sample(**extra: object) -> dict[str, object]:
    return {"index": 0, "group_index": 0, "tokens": [1, 2, 3, 4], "response_length": 2,
            "weight_versions": ["3", "5"], "status": "completed", **extra}  # fmt: skip


def test_statistics_use_only_trained_positions() -> None:
    train = _train({"log_probs": [-1.0, -9.0], "rollout_log_probs": [-1.5, 0.0], "entropy": [2.0, 100.0]}, [1, 0])
    row = sample_row(6, _sample(), train, raw_reward=1.0)
    assert row.mean_abs_lp_diff == 0.5 and row.max_abs_lp_diff == 0.5
    assert row.max_entropy == 2.0
    assert row.staleness == 3 and row.mixed_version and row.weight_version == "5"


def test_an_empty_selection_is_none_not_nan() -> None:
    train = _train({"log_probs": [-1.0, -2.0], "rollout_log_probs": [-1.0, -2.0], "entropy": [1.0, 1.0]}, [0, 0])
    row = sample_row(6, _sample(), train, raw_reward=None)
    assert row.mean_entropy is None and row.mean_abs_lp_diff is None and row.mean_imp_ratio is None


def test_degenerate_groups() -> None:
    rows = [
        sample_row(1, _sample(index=i, group_index=g, reward=r), None, None)
        for i, (g, r) in enumerate([(0, 1.0), (0, 1.0), (1, 0.0), (1, 1.0), (2, 0.5)])
    ]
    groups = {g.group_index: g for g in group_rows(rows, evaluation=True)}
    assert groups[0].zero_std and not groups[1].zero_std
    assert groups[2].zero_std  # a one-sample group counts as degenerate
    no_reward = [sample_row(1, _sample(index=9, group_index=5, reward=None), None, None)]
    assert not group_rows(no_reward, evaluation=True)[0].zero_std
    aggregate = step_aggregate(1, True, rows, list(groups.values()))
    assert aggregate.zero_std_group_frac == 2 / 3
    assert aggregate.avg_staleness == 1 - 3


def test_the_per_token_statistics_are_row_columns_and_none_without_train_data() -> None:
    """One list, in core: the sample table's UNREAD rule (tui) and the summary read the same names."""
    assert set(PER_TOKEN_STATISTICS) <= set(ROW_COLUMNS) and len(set(PER_TOKEN_STATISTICS)) == 9
    row = sample_row(1, _sample(), None, None).to_dict()
    assert all(row[name] is None for name in PER_TOKEN_STATISTICS)
