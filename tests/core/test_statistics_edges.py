"""Statistics of one value and numeric weight versions, as the spec defines them.

- A sample standard deviation (a group's ``reward_std``, a sample's ``adv_std``)
  of fewer than two values is undefined: None (JSON null), never 0.0. A group
  of one sample still counts as degenerate (``zero_std``), as the spec says; a
  bigger group with one readable reward does not (its spread is unknown).
- A weight version is numeric only when its text is decimal digits (miles:
  ``str(v).isdigit()``): "+3", " 3 ", "-1" do not count toward staleness.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from miles_tui.core.dump import FieldState
from miles_tui.core.dump.resolve import TrainRow
from miles_tui.core.dump.summary import group_rows, numeric_versions, sample_row, staleness, step_aggregate
from miles_tui.core.synth.dump_files import make_sample
from miles_tui.core.synth.layout import ParallelLayout
from miles_tui.core.synth.writer import write_step
from miles_tui.tui.cli import main
from tests.conftest import EPOCH, stamp


def _train(advantages: list[float], mask: list[int]) -> TrainRow:
    return TrainRow(
        sample_index=0,
        response_length=len(mask),
        total_length=len(mask) + 2,
        loss_mask=np.array(mask),
        per_token={"advantages": np.array(advantages, dtype=np.float64)},
        field_state={"advantages": FieldState.OK},
        alignment_failed=False,
        dumped_rank=0,
        normalized_reward=0.5,
        truncated=None,
        cp_size=1,
    )


def _sample(index: int, group: int, reward: float | None) -> dict[str, Any]:
    return {"index": index, "group_index": group, "tokens": [1, 2, 3], "response_length": 1, "reward": reward}


def test_adv_std_of_one_trained_token_is_none() -> None:
    one = sample_row(1, _sample(0, 0, 1.0), _train([0.7, 5.0, -3.0], [0, 1, 0]), raw_reward=1.0)
    assert one.adv_mean == 5.0 and one.adv_std is None
    two = sample_row(1, _sample(0, 0, 1.0), _train([1.0, 5.0, 3.0], [1, 0, 1]), raw_reward=1.0)
    assert two.adv_std == pytest.approx(np.std([1.0, 3.0], ddof=1))
    none = sample_row(1, _sample(0, 0, 1.0), _train([1.0, 5.0], [0, 0]), raw_reward=1.0)
    assert none.adv_mean is None and none.adv_std is None


def test_reward_std_of_fewer_than_two_rewards_is_none_and_zero_std_keeps_the_spec_rule() -> None:
    rewards = [(0, 1.0), (1, 0.5), (1, 0.5), (2, None), (3, 0.25), (3, None), (3, None), (4, 0.0), (4, 1.0)]
    rows = [sample_row(1, _sample(i, g, r), None, None) for i, (g, r) in enumerate(rewards)]
    groups = {g.group_index: g for g in group_rows(rows, evaluation=True)}
    assert groups[0].reward_std is None and groups[0].zero_std  # one sample: degenerate, std undefined
    assert groups[1].reward_std == 0.0 and groups[1].zero_std  # two equal rewards: std 0
    assert groups[2].reward_std is None and not groups[2].zero_std  # no reward data: not degenerate
    assert groups[3].reward_std is None and not groups[3].zero_std  # three samples, one reward: spread unknown
    assert groups[4].reward_std == pytest.approx(np.std([0.0, 1.0], ddof=1)) and not groups[4].zero_std
    single = step_aggregate(1, True, rows[:1], [groups[0]])
    assert single.reward_std is None and single.zero_std_group_frac == 1.0


def test_export_writes_null_for_the_std_of_one_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real step through the writer and ``export``: a one-sample group and a one-token sample."""
    samples = [
        make_sample(index=0, group_index=0, tokens=[5, 6, 7, 8], response_length=2, reward=1.0,
                    loss_mask=[0, 1], weight_versions=["4"], rollout_log_probs=[-0.5, -0.25]),
        make_sample(index=1, group_index=1, tokens=[5, 6, 7], response_length=1, reward=0.0,
                    weight_versions=["4"], rollout_log_probs=[-0.5]),
        make_sample(index=2, group_index=1, tokens=[5, 6, 7, 9], response_length=2, reward=1.0,
                    weight_versions=["4"], rollout_log_probs=[-0.5, -0.75]),
    ]  # fmt: skip
    rng = np.random.default_rng(3)
    per_token = {
        key: [rng.normal(size=s["response_length"]) for s in samples]
        for key in ("log_probs", "entropy", "advantages", "returns")
    }
    write_step(tmp_path / "run", 5, samples, per_token, ParallelLayout(dp=1))
    stamp(tmp_path / "run", EPOCH - 3600)
    assert main(["export", str(tmp_path / "run"), "--step", "5"]) == 0
    document = json.loads(capsys.readouterr().out)
    groups = {g["group_index"]: g for g in document["groups"]}
    assert groups[0]["reward_std"] is None and groups[0]["zero_std"] is True
    assert groups[1]["reward_std"] == pytest.approx(np.std([0.0, 1.0], ddof=1))
    rows = {r["sample_index"]: r for r in document["samples"]}
    assert rows[0]["adv_std"] is None and rows[0]["adv_mean"] is not None  # one trained token
    assert rows[1]["adv_std"] is None  # a one-token response
    assert rows[2]["adv_std"] is not None


# --- numeric weight versions -------------------------------------------------------------------


def _miles_numeric(versions: list[Any]) -> list[int]:
    """miles' rule (``Sample.oldest_weight_version``), on inputs where it does not raise."""
    return [int(v) for v in versions if str(v).isdigit()]


def test_only_decimal_digit_strings_are_numeric() -> None:
    assert numeric_versions(["+3", " 3 ", "-1", "3 ", "v3", "3.0", "", "default", "0x3"]) == []
    assert numeric_versions(["3", "03", 7, np.int64(9), -1, True, 3.5]) == [3, 3, 7, 9]
    assert staleness(10, ["+3", "8", " 1 ", "-1"]) == 2  # only "8" counts
    assert staleness(10, ["+3", " 3 ", "-1"]) is None
    assert numeric_versions(["²", "1" * 5000]) == []  # int() cannot read them (miles would raise)


@given(st.lists(st.one_of(st.text(max_size=6), st.integers(-(10**6), 10**6), st.sampled_from(["+3", " 3 ", "-1"]))))
@example(["+3", " 3 ", "-1", "7"])
@example(["٣", "12"])
def test_numeric_versions_follow_miles(versions: list[Any]) -> None:
    try:
        expected = _miles_numeric(versions)
    except ValueError:  # miles raises on digits int() cannot read ("²"): we leave those out instead
        expected = [int(str(v)) for v in versions if str(v).isdecimal()]
    assert numeric_versions(versions) == expected
    for value in numeric_versions(versions):
        assert value >= 0
