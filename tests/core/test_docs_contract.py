"""The contract ships with the code (issue 24, item 10): docs/cli.md is in the repository, the README links it
(not a file outside the clone), it names every field export and report print, and ``export --help`` says what
each token array covers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from miles_tui.core.dump import ROW_COLUMNS, SERIES
from miles_tui.tui.cli import main

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "cli.md"


def test_the_readme_links_the_contract_inside_the_clone() -> None:
    readme = (REPO / "README.md").read_text()
    assert "(docs/cli.md)" in readme and DOC.is_file()
    links = re.findall(r"\]\(([^)]+)\)|`(\.\./[^`]+)`", readme)
    outside = [a or b for a, b in links if (a or b).startswith("../shared/spec")]
    assert not outside, f"the README points outside the clone: {outside}"


def test_the_contract_names_every_field_export_and_report_print() -> None:
    text = DOC.read_text()
    payload = ["rollout_id", "sample_index", "total_len", "prompt_len", "start", "end", "response_offset",
               "token_ids", "token_text", "loss_mask", "lp_diff", "imp_ratio"]  # fmt: skip
    report = ["data_age_seconds", "state", "last_data_ts", "last_data_from", "quiet_after_seconds", "final_step",
              "open_phases", "exit_status", "--quiet-ok"]  # fmt: skip
    missing = [name for name in [*ROW_COLUMNS, *SERIES, *payload, *report] if name not in text]
    assert not missing, missing
    assert "response part" in text and "response_offset + k" in text


def test_export_help_says_what_each_array_covers(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        assert main(["export", "--help"]) == 0
    except SystemExit as done:  # argparse's own --help exits
        assert done.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "response part" in text and "response_offset + k" in text and "docs/cli.md" in text
    assert "whole response" in text  # --per-token
