"""Integers no float (or 64 bits) holds: that field of that sample is unreadable and named, the step reads on.

A pickle holds an int of any size (LONG4). The hostile rollout files are
written with the project's writer, which spells such an int as ``pickle``
does; each case goes through ``Run.open`` (what the monitor calls), and one
through ``export`` and ``report``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from miles_tui.core.dump import ProblemKind, Run
from miles_tui.core.dump.pt.pt_archive import load_pt
from tests.conftest import EPOCH
from tests.security.test_mistyped_fields import _cli, _edit_sample, _edit_shard, _run, _set_column, _train_file

NOW = EPOCH
HUGE = 10**400
"""Fits no float: ``float()`` raises OverflowError."""
ENDLESS = 10**4400
"""Over 4,300 digits: ``str()`` raises ValueError."""

HUGE_FIELDS: list[tuple[str, Any]] = [
    ("reward", HUGE),
    ("reward", -HUGE),
    ("non_generation_time", HUGE),
    ("spec_info", {"spec_accept_token_num": HUGE, "spec_draft_token_num": 3}),
    ("spec_info", {"spec_accept_token_num": 1, "spec_draft_token_num": HUGE}),
    ("prefix_cache_info", {"cached_tokens": HUGE, "total_prompt_tokens": 5}),
    ("prefix_cache_info", {"cached_tokens": 1, "total_prompt_tokens": HUGE}),
    ("weight_versions", ["3", ENDLESS]),
    ("weight_versions", [2**64]),
    ("group_index", ENDLESS),
    ("response_length", 2**70),
]


def test_the_writer_spells_a_huge_int_as_long4(tmp_path: Path) -> None:
    root = _run(tmp_path)
    _edit_sample(root, 1, 2, reward=HUGE, non_generation_time=ENDLESS)
    samples = load_pt(root / "rollout_data" / "1.pt", use_mmap=False)["samples"]
    assert samples[2]["reward"] == HUGE and samples[2]["non_generation_time"] == ENDLESS


@pytest.mark.parametrize(("name", "value"), HUGE_FIELDS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(HUGE_FIELDS)])
def test_a_huge_int_makes_that_sample_unreadable_and_named(tmp_path: Path, name: str, value: Any) -> None:
    root = _run(tmp_path)
    index = _edit_sample(root, 1, 2, **{name: value})
    opened = Run(root, use_cache=False).open(1, False, NOW)
    summary = opened.summary
    assert len(summary.rows) == 16
    assert opened.row(index).alignment_failed
    assert sum(r.alignment_failed for r in summary.rows) == 1
    (problem,) = summary.problems
    assert problem.kind is ProblemKind.CORRUPT and problem.path.name == "1.pt"
    assert f"sample {index}" in problem.message and repr(name) in problem.message and "bits" in problem.message
    json.dumps([r.reward for r in summary.rows])  # every value left is a float or None


def test_a_huge_index_leaves_that_sample_out_and_named(tmp_path: Path) -> None:
    root = _run(tmp_path)
    _edit_sample(root, 1, 2, index=ENDLESS)
    summary = Run(root, use_cache=False).summary(1, False, NOW)
    assert len(summary.rows) == 15
    (problem,) = summary.problems
    assert "position 2" in problem.message and "'index'" in problem.message


@pytest.mark.parametrize(
    ("column", "value"),
    [("raw_reward", HUGE), ("sample_indices", ENDLESS), ("response_lengths", 2**64)],
    ids=["raw_reward", "sample_indices", "response_lengths"],
)
def test_a_huge_int_in_a_train_column_makes_the_file_unreadable(tmp_path: Path, column: str, value: int) -> None:
    root = _run(tmp_path)
    target = _train_file(root, 2)
    _edit_shard(target, _set_column(column, lambda c: [value, *list(c)[1:]]))
    summary = Run(root, use_cache=False).summary(2, False, NOW)
    assert len(summary.rows) == 16
    (problem,) = summary.problems
    assert problem.path == target and column in problem.message and "bits" in problem.message


def test_export_and_report_name_the_file_not_an_internal_error(tmp_path: Path) -> None:
    root = _run(tmp_path)
    index = _edit_sample(root, 2, 3, reward=HUGE, weight_versions=[ENDLESS])
    cache = tmp_path / "cache"
    for argv in (("export", str(root), "--step", "2"), ("export", str(root), "--step", "2", "--format", "csv")):
        done = _cli(*argv, cache=cache)
        assert done.returncode == 0, done.stderr
        assert "internal error" not in done.stderr and "rollout_data/2.pt" in done.stderr
    document = json.loads(_cli("export", str(root), "--step", "2", cache=cache).stdout)
    rows = {r["sample_index"]: r for r in document["samples"]}
    assert rows[index]["alignment_failed"] is True and rows[index]["reward"] is None
    report = _cli("report", str(root), cache=cache)
    assert report.returncode in (1, 2), report.stderr
    assert "internal error" not in report.stderr + report.stdout
    assert "rollout_data/2.pt" in report.stdout and "'reward'" in report.stdout
