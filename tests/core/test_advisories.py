"""Every step advisory rule fires when it should and stays quiet when it should not; report exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from miles_tui.core.analysis import Level
from miles_tui.core.analysis.advisories import (
    file_problems,
    ordered,
    truncated_samples,
    unreadable_per_token,
    zero_std_groups,
)
from miles_tui.core.commands.report import build_report
from miles_tui.core.dump import ProblemKind, Run, StepSummary
from miles_tui.core.dump.step_summary import StepProblem
from miles_tui.tui.cli import main
from tests.conftest import EPOCH


def _summary(golden_copy: Callable[[str], Path], case: str, rid: int) -> StepSummary:
    return Run(golden_copy(case), use_cache=False).summary(rid, False, EPOCH)


def test_zero_std_fires_on_degenerate_and_names_all_zero(golden_copy: Callable[[str], Path]) -> None:
    [advisory] = zero_std_groups(_summary(golden_copy, "degenerate", 1))
    assert advisory.code == "all_rewards_zero" and advisory.level is Level.WARNING
    assert advisory.message.startswith("4/4 groups in step 1")
    [partial] = zero_std_groups(_summary(golden_copy, "staleness", 10))
    assert partial.code == "zero_std_groups" and partial.message.startswith("4/5 groups")


def test_zero_std_quiet_below_half(golden_copy: Callable[[str], Path]) -> None:
    summary = _summary(golden_copy, "tp_dup", 0)  # 1/3 groups degenerate
    assert summary.aggregate.zero_std_group_frac == pytest.approx(1 / 3)
    assert zero_std_groups(summary) == []


def test_truncation_fires_and_names_the_cap(golden_copy: Callable[[str], Path]) -> None:
    summary = _summary(golden_copy, "degenerate", 1)
    [advisory] = truncated_samples(summary, 32)
    assert "38%" in advisory.message and "--rollout-max-response-len (32)" in advisory.message
    [without] = truncated_samples(summary, None)
    assert "--rollout-max-response-len;" in without.message


def test_truncation_quiet_below_a_quarter(golden_copy: Callable[[str], Path]) -> None:
    assert truncated_samples(_summary(golden_copy, "tp_dup", 2), 32) == []


def test_unreadable_per_token_fires_with_the_real_reason(golden_copy: Callable[[str], Path]) -> None:
    [legacy] = unreadable_per_token(_summary(golden_copy, "cp_legacy_ambiguous", 1))
    assert legacy.level is Level.INFO and "unreadable, not undumped" in legacy.message
    assert "legacy dump" in legacy.message and "2 samples" in legacy.message
    [missing] = unreadable_per_token(_summary(golden_copy, "cp_missing_rank", 1))
    # miles says this dump "predates the cp_rank/cp_size fields"; it does not: a rank's file is missing.
    assert "CP rank 1" in missing.message and "4 samples" in missing.message
    assert unreadable_per_token(_summary(golden_copy, "cp_missing_rank", 0)) == []


def test_file_problems(golden_copy: Callable[[str], Path]) -> None:
    summary = _summary(golden_copy, "truncated_shard", 1)
    [corrupt] = file_problems(summary)
    assert corrupt.code == "corrupt_file" and corrupt.level is Level.WARNING and "1_1.pt" in corrupt.message
    assert file_problems(_summary(golden_copy, "truncated_shard", 0)) == []
    unsafe = replace(summary, problems=(StepProblem(Path("x.pt"), ProblemKind.UNSAFE, "refused"),))
    assert file_problems(unsafe)[0].level is Level.CRITICAL


def test_ordered_puts_alarms_first(golden_copy: Callable[[str], Path]) -> None:
    summary = _summary(golden_copy, "truncated_shard", 1)
    advisories = ordered([*unreadable_per_token(summary), *file_problems(summary)])
    assert [a.level for a in advisories] == [Level.WARNING, Level.INFO]


@pytest.mark.parametrize(
    ("case", "status", "codes"),
    [
        ("degenerate", 1, ["all_rewards_zero", "truncated_samples"]),
        ("staleness", 1, ["zero_std_groups"]),
        ("cp_legacy_ambiguous", 0, ["per_token_unreadable"]),
        ("tp_dup", 0, []),
    ],
)
def test_report_matches_the_golden_advisories(
    golden_copy: Callable[[str], Path], case: str, status: int, codes: list[str]
) -> None:
    root = golden_copy(case)
    report = build_report(root, EPOCH)
    assert [a.code for a in report.advisories] == codes
    assert report.exit_status == status


def test_report_cli_json_and_exit_codes(golden_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    root = golden_copy("degenerate")
    assert main(["report", str(root), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["steps"] == {"train": 2, "eval": 0, "latest": 1}
    assert document["latest_step"]["reward_mean"] == 0.0
    assert [a["level"] for a in document["advisories"]] == ["warning", "warning"]
    assert main(["report", str(root / "nope")]) == 3
    assert "no such run directory" in capsys.readouterr().err


def test_many_unreadable_steps_make_one_advisory() -> None:
    """20,000 broken step files: one line that counts them and names the first and last, not 20,000."""
    from miles_tui.core.analysis import UnreadableStep
    from miles_tui.core.analysis.advisories import LISTED_STEP_ERRORS, step_errors

    message = "/run/rollout_data/{}.pt: not a torch zip archive"
    failures = [UnreadableStep(rid, False, message.format(rid), False) for rid in range(20_000)]
    failures.reverse()  # any order
    [advisory] = step_errors(failures)
    assert advisory.code == "steps_unreadable" and advisory.level is Level.CRITICAL
    assert advisory.message.startswith("20,000 steps unreadable: first step 0 (/run/rollout_data/0.pt")
    assert "last step 19999 (/run/rollout_data/19999.pt" in advisory.message
    assert advisory.rollout_id == 0
    few = step_errors(failures[:LISTED_STEP_ERRORS])
    assert [a.code for a in few] == ["step_unreadable"] * LISTED_STEP_ERRORS
    assert [a.rollout_id for a in few] == sorted(a.rollout_id or 0 for a in few)
    writing = step_errors([UnreadableStep(rid, True, "still being written", True) for rid in range(10)] + failures[:1])
    assert sorted(a.code for a in writing) == ["step_unreadable", "steps_still_writing"]
