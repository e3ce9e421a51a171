"""A field of the wrong type makes that sample (or that train file) unreadable, named; the rest reads on.

The hostile files are written the way a broken or malicious writer would: the
project's own writer (``miles_tui.core.synth.writer`` / ``miles_tui.core.synth.pt_writer``, torch.save's
format) with one field changed, and with torch.save itself where torch is
installed. Each case goes through what a user runs: ``export``, ``report``
and the app.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.base.errors import CorruptFileError
from miles_tui.core.dump import ProblemKind, Run, read_sidecar
from miles_tui.core.dump.pt.pt_archive import load_pt
from miles_tui.core.dump.record_schema import SAMPLE_FIELDS, FieldTypeError, check_shard, field_array, sample_problems
from miles_tui.core.synth.dump_files import save_rollout
from miles_tui.core.synth.pt_writer import save_pt
from tests.conftest import EPOCH, stamp, write_demo_run

ROOT = Path(__file__).resolve().parents[2]
NOW = EPOCH


def _run(tmp_path: Path, name: str = "run") -> Path:
    root = write_demo_run(tmp_path / name, 3)
    stamp(root, EPOCH - 600)
    return root


def _rewrite(path: Path, payload: Any) -> None:
    """Replace a dump file the way a writer does (a new inode: the old mapping stays valid)."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        save_pt(payload, handle)
    os.replace(partial, path)
    os.utime(path, (EPOCH - 600, EPOCH - 600))


def _edit_sample(root: Path, rid: int, position: int, **fields: Any) -> int:
    """Give the sample at ``position`` of step ``rid`` new field values; returns its index."""
    payload = load_pt(root / "rollout_data" / f"{rid}.pt", use_mmap=False)
    samples = [dict(s) for s in payload["samples"]]
    samples[position].update(fields)
    save_rollout(root, rid, samples, metadata=payload["metadata"])
    os.utime(root / "rollout_data" / f"{rid}.pt", (EPOCH - 600, EPOCH - 600))
    return int(payload["samples"][position]["index"])


def _train_file(root: Path, rid: int) -> Path:
    return sorted((root / "train_data").glob(f"{rid}_*.pt"))[0]


def _edit_shard(path: Path, edit: Any) -> None:
    payload = load_pt(path, use_mmap=False)
    edit(payload)
    _rewrite(path, payload)


def _cli(*argv: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MILES_TUI_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "miles_tui.tui.cli", *argv]
    return subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


# --- rollout samples ---------------------------------------------------------------------------

BAD_SAMPLE_FIELDS: list[tuple[str, Any]] = [
    ("weight_versions", 5),
    ("weight_versions", [1.5]),
    ("weight_versions", "3"),
    ("tokens", "abc"),
    ("tokens", 7),
    ("status", 5),
    ("status", ["completed"]),
    ("group_index", "g"),
    ("group_index", 1.5),
    ("response_length", "7"),
    ("reward", "high"),
    ("remove_sample", "yes"),
    ("spec_info", [1, 2]),
    ("prefix_cache_info", "x"),
    ("non_generation_time", "slow"),
    ("loss_mask", "1111"),
    ("rollout_log_probs", {"a": 1}),
    ("prompt", 42),
]


@pytest.mark.parametrize(("name", "value"), BAD_SAMPLE_FIELDS, ids=[f"{n}={v!r}" for n, v in BAD_SAMPLE_FIELDS])
def test_a_mistyped_sample_field_makes_that_sample_unreadable(tmp_path: Path, name: str, value: Any) -> None:
    clean = Run(_run(tmp_path, "clean"), use_cache=False).open(1, False, NOW)
    root = _run(tmp_path)
    index = _edit_sample(root, 1, 2, **{name: value})
    opened = Run(root, use_cache=False).open(1, False, NOW)
    summary = opened.summary
    assert [r.sample_index for r in summary.rows] == [r.sample_index for r in clean.summary.rows]
    bad = opened.row(index)
    assert bad.alignment_failed
    reason = summary.alignment_reason(index) or ""
    assert repr(name) in reason and "1.pt" in reason
    (problem,) = summary.problems
    assert problem.kind is ProblemKind.CORRUPT and problem.path.name == "1.pt"
    assert f"sample {index}" in problem.message and repr(name) in problem.message
    assert str(root / "rollout_data" / "1.pt") in problem.message
    # every other sample reads exactly as in the clean run
    others = [(a, b) for a, b in zip(summary.rows, clean.summary.rows, strict=True) if a.sample_index != index]
    assert all(a == b for a, b in others)
    assert name not in opened.sample(index)  # the mistyped value never reaches a reader


def test_a_sample_without_a_usable_index_is_left_out_and_named(tmp_path: Path) -> None:
    root = _run(tmp_path)
    _edit_sample(root, 1, 0, index="first")
    summary = Run(root, use_cache=False).summary(1, False, NOW)
    assert len(summary.rows) == 15
    (problem,) = summary.problems
    assert "position 0" in problem.message and "'index'" in problem.message


def test_export_and_report_name_the_file_and_field(tmp_path: Path) -> None:
    root = _run(tmp_path)
    index = _edit_sample(root, 2, 3, weight_versions=5)
    for argv in (("export", str(root), "--step", "2"), ("export", str(root), "--step", "2", "--per-token")):
        done = _cli(*argv, cache=tmp_path / "cache")
        assert done.returncode == 0, done.stderr
        assert "internal error" not in done.stderr
        assert "rollout_data/2.pt" in done.stderr and "'weight_versions'" in done.stderr
        document = json.loads(done.stdout)
        rows = {r["sample_index"]: r for r in document["samples"]}
        assert len(rows) == 16 and rows[index]["alignment_failed"] is True
        assert any("'weight_versions'" in p["message"] for p in document["problems"])
    done = _cli("export", str(root), "--step", "2", "--format", "csv", cache=tmp_path / "cache")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 17
    report = _cli("report", str(root), cache=tmp_path / "cache")
    assert report.returncode in (0, 1, 2), report.stderr
    assert "internal error" not in report.stderr + report.stdout
    assert "rollout_data/2.pt" in report.stdout and "'weight_versions'" in report.stdout


def test_unreadable_token_ids_give_one_line_naming_the_file(tmp_path: Path) -> None:
    root = _run(tmp_path)
    index = _edit_sample(root, 2, 3, tokens="abc")
    done = _cli("export", str(root), "--step", "2", "--sample", str(index), "--tokens", cache=tmp_path / "cache")
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "rollout_data/2.pt" in line and "'tokens'" in line and "internal error" not in line


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([1, "2"], "got str at position 1"),
        ([1, 2.5], "got float at position 1"),
        ([True, False], "got bool at position 0"),
        ([1, 2**70], "more than 64 at position 1"),
        ([[1, 2], [3]], "got list at position 0"),
        ([1, None], "got None at position 1"),
        (np.array([1.0, 2.0]), "got an array of float64"),
        ("12", "got str"),
    ],
)
def test_token_ids_are_checked_when_read(value: Any, reason: str) -> None:
    with pytest.raises(FieldTypeError, match=reason):
        field_array("tokens", value, SAMPLE_FIELDS["tokens"], np.int64)


def test_well_typed_lists_read_exactly() -> None:
    tokens = SAMPLE_FIELDS["tokens"]
    assert field_array("tokens", [3, 1, 2], tokens, np.int64).tolist() == [3, 1, 2]
    assert field_array("tokens", np.array([3, 1], dtype=np.int32), tokens, np.int64).dtype == np.int64
    assert field_array("tokens", [], tokens, np.int64).size == 0
    mask = field_array("loss_mask", [1, 0, True], SAMPLE_FIELDS["loss_mask"], np.int64)
    assert mask.tolist() == [1, 0, 1]
    lp = field_array("rollout_log_probs", [-0.5, -1, np.float32(-2)], SAMPLE_FIELDS["rollout_log_probs"], np.float64)
    assert lp.tolist() == [-0.5, -1.0, -2.0]


def test_golden_samples_and_shards_pass(golden_copy: Any) -> None:
    for case in ("cp2_bshd", "cp_legacy", "gated_tp2_pp2_cp2", "staleness"):
        root = golden_copy(case)
        for path in (root / "rollout_data").glob("*.pt"):
            assert all(not sample_problems(s) for s in load_pt(path)["samples"])
        for path in (root / "train_data").glob("*.pt"):
            try:
                payload = load_pt(path)
            except CorruptFileError:
                continue
            check_shard(payload, path)


# --- train shards ------------------------------------------------------------------------------


def _set(key: str, value: Any) -> Any:
    return lambda payload: payload.__setitem__(key, value)


def _set_column(key: str, value: Any) -> Any:
    def edit(payload: dict[str, Any]) -> None:
        column = payload["rollout_data"][key]
        payload["rollout_data"][key] = value(column) if callable(value) else value

    return edit


BAD_SHARDS: list[tuple[str, Any, str]] = [
    ("rank=x", _set("rank", "x"), "'rank'"),
    ("rank=True", _set("rank", True), "'rank'"),
    ("cp_size=str", _set("cp_size", "2"), "'cp_size'"),
    ("cp_size=huge", _set("cp_size", 10**12), "'cp_size'"),
    ("cp_size=0", _set("cp_size", 0), "'cp_size'"),
    ("cp_rank=out", _set("cp_rank", 7), "'cp_rank'"),
    ("qkv_format=5", _set("qkv_format", 5), "'qkv_format'"),
    ("qkv_format=other", _set("qkv_format", "\x1b[2J"), "'qkv_format'"),
    ("rollout_data=list", _set("rollout_data", [1, 2]), "'rollout_data'"),
    ("sample_indices=str", _set_column("sample_indices", lambda c: ["a"] * len(c)), "sample_indices"),
    ("sample_indices=int", _set_column("sample_indices", 5), "sample_indices"),
    ("response_lengths=str", _set_column("response_lengths", lambda c: [str(v) for v in c]), "response_lengths"),
    ("total_lengths=float", _set_column("total_lengths", lambda c: [float(v) + 0.5 for v in c]), "total_lengths"),
    ("rewards=str", _set_column("rewards", lambda c: ["good"] * len(c)), "rewards"),
    ("raw_reward=dict", _set_column("raw_reward", {"a": 1}), "raw_reward"),
    ("truncated=str", _set_column("truncated", lambda c: ["no"] * len(c)), "truncated"),
    ("log_probs=str", _set_column("log_probs", lambda c: ["x"] * len(c)), "log_probs"),
    ("log_probs=list-of-str", _set_column("log_probs", lambda c: [["-0.1", "x"]] * len(c)), "log_probs"),
    ("loss_masks=int", _set_column("loss_masks", 3), "loss_masks"),
]


@pytest.mark.parametrize(("edit", "field"), [(e, f) for _, e, f in BAD_SHARDS], ids=[i for i, _, _ in BAD_SHARDS])
def test_a_mistyped_train_file_is_unreadable_and_named(tmp_path: Path, edit: Any, field: str) -> None:
    root = _run(tmp_path)
    target = _train_file(root, 2)
    _edit_shard(target, edit)
    summary = Run(root, use_cache=False).summary(2, False, NOW)
    assert len(summary.rows) == 16
    (problem,) = summary.problems
    assert problem.path == target and problem.kind is ProblemKind.CORRUPT
    assert field in problem.message and str(target) in problem.message
    # samples other shards hold still read; those in the bad file are unreadable, never absent
    assert any(not r.alignment_failed and r.dumped_rank is not None for r in summary.rows)
    assert any(r.alignment_failed for r in summary.rows)


def test_a_mistyped_shard_through_export_report_and_torch_save(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    root = _run(tmp_path)
    target = _train_file(root, 2)
    payload = load_pt(target, use_mmap=False)
    payload["rank"] = "x"
    payload["rollout_data"] = {
        k: [torch.from_numpy(np.array(v)) if isinstance(v, np.ndarray) else v for v in column]
        if isinstance(column, list)
        else column
        for k, column in payload["rollout_data"].items()
    }
    partial = target.with_name("partial.pt")
    torch.save(payload, partial)
    os.replace(partial, target)
    os.utime(target, (EPOCH - 600, EPOCH - 600))
    done = _cli("export", str(root), "--step", "2", cache=tmp_path / "cache")
    assert done.returncode == 0 and "internal error" not in done.stderr
    assert target.name in done.stderr and "'rank'" in done.stderr
    assert len(json.loads(done.stdout)["samples"]) == 16
    report = _cli("report", str(root), "--json", cache=tmp_path / "cache")
    assert report.returncode in (1, 2), report.stderr
    advisories = json.loads(report.stdout)["advisories"]
    assert any(target.name in a["message"] and "'rank'" in a["message"] for a in advisories)


async def test_the_app_shows_the_step_and_names_the_field(tmp_path: Path) -> None:
    from miles_tui.tui.app import make_app
    from miles_tui.tui.screens.step_screen import StepScreen
    from miles_tui.tui.widgets.virtual_table import VirtualTable

    root = _run(tmp_path)
    index = _edit_sample(root, 2, 3, weight_versions=5)
    _edit_shard(_train_file(root, 1), _set("rank", "x"))
    app = make_app(root, poll_seconds=3600, clock=lambda: NOW, use_cache=False)
    async with app.run_test(size=(180, 50)) as pilot:
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        assert not app.model.failures, app.model.failures
        assert {(2, False), (1, False)} <= set(app.model.summaries)
        await pilot.press("enter")  # the newest step, 2
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        screen = app.screen
        assert isinstance(screen, StepScreen) and screen.rollout_id == 2
        assert len(screen.query_one("#samples", VirtualTable).rows) == 16
        title = str(screen.query_one("#step-title").render())
        assert "'weight_versions'" in title and "2.pt" in title
        assert app.model.summaries[(2, False)].rows[3].sample_index == index


# --- conversation sidecar ------------------------------------------------------------------------


def test_a_mistyped_conversation_line_is_skipped_with_its_offset(tmp_path: Path) -> None:
    lines = [
        {"sample_index": 1, "group_index": 0, "messages": [{"role": "user", "content": "hi"}]},
        {"sample_index": 2, "group_index": "x", "messages": []},
        {"sample_index": 3, "messages": 5},
        {"sample_index": "4", "messages": []},
        [1, 2],
        {"sample_index": 5, "status": 7},
        {"sample_index": 6, "messages": [{"role": "assistant", "content": "ok", "tool_calls": 5}]},
    ]
    (tmp_path / "trajectory").mkdir()
    (tmp_path / "trajectory" / "1.jsonl").write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    sidecar = read_sidecar(tmp_path, 1, False)
    assert sidecar is not None
    assert sorted(sidecar.conversations) == [1, 6]
    assert len(sidecar.bad_lines) == 5
    assert sidecar.conversations[6].messages[0].tool_calls == ()
