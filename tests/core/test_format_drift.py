"""Format drift: ``spec_info`` under either key set and span-list ``weight_versions`` read exactly as the old
form; any other shape is said (one advisory naming file, field and schema_version; cells "unknown format")."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miles_tui.core.analysis.advisories import step_advisories
from miles_tui.core.analysis.format_drift import schema_label
from miles_tui.core.dump.pt.pt_archive import load_pt
from miles_tui.core.dump.record_formats import (
    UNKNOWN_FORMAT,
    Unrecognised,
    Versions,
    prefix_counts,
    read_versions,
    spec_counts,
)
from miles_tui.core.dump.summary import sample_row
from miles_tui.core.synth.dump_files import save_rollout
from miles_tui.core.synth.record_formats import span_calls, spec_info, train_weight_versions
from miles_tui.core.telemetry.stream_records import decode_meta
from miles_tui.tui.cli import main
from tests.drift_runs import EXPECTED, STEP, write_drift_run

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
VERSION_COLUMNS = ("weight_version", "weight_version_min", "mixed_version", "staleness", "turns")


def _aged(root: Path) -> Path:
    old = time.time() - 3600
    for path in root.rglob("*"):
        os.utime(path, (old, old))
    return root


def _export(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["export", *args]) == 0
    out = capsys.readouterr().out
    return json.loads(out) if out.startswith("{") else out


# --- the readers of each field --------------------------------------------------------------------


def test_spec_counters_are_read_under_either_key_set() -> None:
    assert spec_counts(spec_info(3, 5, 2, 7, "legacy")) == (3, 5)
    assert spec_counts(spec_info(3, 5, 2, 7, "current")) == (3, 5)
    # per counter, the current name first, as miles' SpecInfo.from_dict
    assert spec_counts({"spec_num_correct_drafts": 1, "spec_accept_token_num": 9, "spec_draft_token_num": 4}) == (1, 4)
    assert spec_counts({}) == (None, None) and spec_counts(None) == (None, None)


def test_spec_info_without_either_key_set_is_unrecognised() -> None:
    assert spec_counts({"accepted_drafts": 3, "proposed_drafts": 5}) == Unrecognised("spec_info")
    assert spec_counts({"spec_accept_token_num": 3}) == Unrecognised("spec_info")  # drafted missing


def test_prefix_cache_info_needs_both_counters() -> None:
    assert prefix_counts({"cached_tokens": 3, "total_prompt_tokens": 4}) == (3, 4)
    assert prefix_counts({}) == (None, None) and prefix_counts(None) == (None, None)
    assert prefix_counts({"hit_tokens": 3}) == Unrecognised("prefix_cache_info")


def test_weight_versions_in_both_forms() -> None:
    assert read_versions(["3", "4"]) == Versions(("3", "4"), 2)
    spans = [[{"version": "3", "abs_start": 5, "abs_end": 7}], [], [{"version": "4", "abs_start": 9, "abs_end": 10},
             {"version": "5", "abs_start": 10, "abs_end": 12}]]  # fmt: skip
    assert read_versions(spans) == Versions(("3", "4", "5"), 3)  # an unstamped call is still a turn
    assert read_versions([]) == Versions((), 0) and read_versions(None) == Versions((), 0)


@pytest.mark.parametrize(
    "value",
    [
        [{"version": "3", "start": 0, "end": 2}],  # flat dicts, no calls
        [[{"v": "3", "abs_start": 0, "abs_end": 2}]],  # a span without its version
        ["3", [{"version": "4", "abs_start": 0, "abs_end": 2}]],  # the two forms mixed
        [[["3"]]],
    ],
)
def test_other_weight_versions_shapes_are_unrecognised(value: Any) -> None:
    assert read_versions(value) == Unrecognised("weight_versions")


def _row_from(versions: list[Any], spec: dict[str, Any]) -> dict[str, Any]:
    sample = {"index": 0, "group_index": 0, "tokens": list(range(12)), "response_length": 8,
              "weight_versions": versions, "spec_info": spec}  # fmt: skip
    return sample_row(20, sample, None, None).to_dict()


@given(
    st.lists(st.one_of(st.integers(0, 30).map(str), st.sampled_from(["default", "v3", "+2", ""])), max_size=6),
    st.integers(0, 50),
    st.integers(0, 50),
)
def test_the_upstream_form_reads_exactly_as_the_old_one(versions: list[str], accepted: int, drafted: int) -> None:
    versions = [v for v in versions if v]  # miles asserts a span's version is not empty
    old = _row_from(versions, spec_info(accepted, drafted, 1, 8, "legacy"))
    new = _row_from(span_calls(versions, 12, 8), spec_info(accepted, drafted, 1, 8, "current"))
    assert new == old
    assert new["unknown_format"] is None


def test_the_train_shard_column_keeps_each_form() -> None:
    assert train_weight_versions(["3", 4]) == ["3", "4"]
    calls = span_calls(["3", "4"], 10, 4)
    assert (
        train_weight_versions(calls)
        == calls
        == [
            [{"version": "3", "abs_start": 6, "abs_end": 8}],
            [{"version": "4", "abs_start": 8, "abs_end": 10}],
        ]
    )


# --- golden-style runs, written by core's writer ---------------------------------------------------


@pytest.mark.parametrize("form", ["legacy", "current"])
def test_both_forms_export_the_expected_figures(form: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _aged(write_drift_run(tmp_path / form, form))  # type: ignore[arg-type]
    written = load_pt(root / "rollout_data" / f"{STEP}.pt")["samples"]
    if form == "current":  # the upstream shapes really are on disk
        assert "spec_num_correct_drafts" in written[0]["spec_info"]
        assert isinstance(written[1]["weight_versions"][0], list)
        shard = load_pt(next((root / "train_data").glob(f"{STEP}_*.pt")))["rollout_data"]
        assert all(isinstance(call, list) for cell in shard["weight_versions"] for call in cell)
    document = _export(capsys, str(root), "--step", str(STEP))
    for row, expected in zip(document["samples"], EXPECTED, strict=True):
        assert {k: row[k] for k in expected} == expected
        assert row["unknown_format"] is None
    assert document["aggregate"]["avg_staleness"] == pytest.approx((2 + 3 + 1 + 4) / 4)
    assert document["aggregate"]["mixed_version_frac"] == pytest.approx(2 / 6)


def test_the_staleness_golden_case_rewritten_in_the_upstream_form_matches_its_truth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """miles' own figures for the golden run, from its rollout files rewritten as upstream now writes them."""
    root = tmp_path / "staleness"
    shutil.copytree(GOLDEN / "staleness", root)
    for path in sorted((root / "rollout_data").glob("*.pt")):
        payload = load_pt(path)
        samples = []
        for sample in payload["samples"]:
            spec = sample["spec_info"]
            sample["spec_info"] = spec_info(
                spec["spec_accept_token_num"], spec["spec_draft_token_num"], spec["spec_verify_ct"],
                spec["completion_token_num"], "current",
            )  # fmt: skip
            sample["weight_versions"] = span_calls(
                sample["weight_versions"], len(sample["tokens"]), sample["response_length"]
            )
            samples.append(sample)
        save_rollout(root, payload["rollout_id"], samples, metadata=payload["metadata"])
    truth = json.loads((GOLDEN / "staleness.truth.json").read_text())
    _aged(root)
    compared = 0
    for rid, step in truth["steps"].items():
        document = _export(capsys, str(root), "--step", rid)
        for expected, row in zip(step["summary"], document["samples"], strict=True):
            for key in (*VERSION_COLUMNS, "spec_accept_rate"):
                if isinstance(expected[key], float):
                    assert row[key] == pytest.approx(expected[key], abs=1e-5)
                else:
                    assert row[key] == expected[key], (rid, key)
                compared += 1
    assert compared >= 100


# --- a shape no miles writes ----------------------------------------------------------------------


def test_an_unrecognised_shape_reads_unknown_format_in_json_and_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _aged(write_drift_run(tmp_path / "unknown", "unknown"))
    document = _export(capsys, str(root), "--step", str(STEP))
    rows = document["samples"]
    assert rows[0]["unknown_format"] == "weight_versions spec_info"
    assert all(rows[0][k] == UNKNOWN_FORMAT for k in (*VERSION_COLUMNS, "spec_accept_rate"))
    assert rows[1]["spec_accept_rate"] == UNKNOWN_FORMAT and rows[1]["staleness"] == 3  # only its spec is unknown
    assert rows[3]["unknown_format"] is None and rows[3]["staleness"] == 4
    # the step's figures are over the samples whose versions were read (1, 3, 5), not the unknown ones
    assert document["aggregate"]["avg_staleness"] == 3.5 and document["aggregate"]["mixed_version_frac"] == 2 / 3
    table = list(csv.DictReader(io.StringIO(_export(capsys, str(root), "--step", str(STEP), "--format", "csv"))))
    assert table[0]["staleness"] == UNKNOWN_FORMAT and table[0]["spec_accept_rate"] == UNKNOWN_FORMAT
    assert table[4]["staleness"] == UNKNOWN_FORMAT and table[4]["spec_accept_rate"] == "0.125"
    assert rows[5]["unknown_format"] == "prefix_cache_info" and rows[5]["prefix_cache_hit_rate"] == UNKNOWN_FORMAT
    assert rows[4]["prefix_cache_hit_rate"] is None and rows[5]["spec_accept_rate"] == 0.5  # 0 of 0 prompt tokens


def test_one_advisory_names_file_fields_and_schema_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _aged(write_drift_run(tmp_path / "unknown", "unknown", schema_version=3))
    main(["report", str(root), "--json"])
    report = json.loads(capsys.readouterr().out)
    found = [a for a in report["advisories"] if a["code"] == "unknown_format"]
    assert len(found) == 1
    advisory = found[0]
    assert advisory["level"] == "warning" and advisory["rollout_id"] == STEP and advisory["sample_index"] == 0
    message = advisory["message"]
    assert message.startswith(f"rollout_data/{STEP}.pt") and "schema_version 3 in dashboard/meta.json" in message
    assert "'weight_versions' of 3 samples (weight_version, weight_version_min, mixed_version, staleness, turns)" in (
        message
    )
    assert "'spec_info' of 3 samples (spec_accept_rate)" in message
    assert "'prefix_cache_info' of 1 sample (prefix_cache_hit_rate)" in message


def test_known_forms_raise_no_advisory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _aged(write_drift_run(tmp_path / "current", "current"))
    main(["report", str(root), "--json"])
    assert not [a for a in json.loads(capsys.readouterr().out)["advisories"] if a["code"] == "unknown_format"]


def test_schema_label_says_where_the_version_comes_from() -> None:
    assert schema_label(None) == "schema_version unknown (no dashboard/meta.json)"
    assert schema_label(decode_meta({"run_name": "x"})) == "schema_version not recorded in dashboard/meta.json"
    assert schema_label(decode_meta({"schema_version": 2})) == "schema_version 2 in dashboard/meta.json"


def test_the_rule_is_quiet_on_a_step_without_drift(tmp_path: Path) -> None:
    from miles_tui.core.dump import Run

    root = _aged(write_drift_run(tmp_path / "legacy", "legacy"))
    summary = Run(root).summary(STEP, False, time.time())
    assert not [a for a in step_advisories(summary, None, schema_label(None)) if a.code == "unknown_format"]
