"""Symbolic link loops in a run (issue 9.4): the bad entry is named in one line, the rest goes on."""

from __future__ import annotations

from pathlib import Path

from conftest import EPOCH
from hostile_fs import age, cli, python, symlink

LOOP = "a symbolic link loop, so it was not read (fix or remove the link)"


def test_a_looping_rollout_file_is_named_and_every_other_step_is_read(demo_run: Path) -> None:
    bad = symlink(demo_run / "rollout_data" / "1.pt", "1.pt")

    listing = cli("export", demo_run)
    assert listing.returncode == 0 and '"train": [0, 1, 2, 3]' in listing.stdout, listing.stderr

    export = cli("export", demo_run, "--step", "1")
    assert export.returncode == 1 and export.stderr.strip().splitlines() == [f"miles-tui: {bad}: {LOOP}"]
    for step in ("0", "2", "3"):
        assert cli("export", demo_run, "--step", step).returncode == 0

    report = cli("report", demo_run)
    assert report.returncode in (0, 1, 2) and "internal error" not in report.stderr
    assert "steps: 4 train" in report.stdout


def test_a_looping_newest_step_is_the_report_verdict(demo_run: Path) -> None:
    bad = symlink(demo_run / "rollout_data" / "4.pt", "4.pt")
    age(bad, EPOCH - 600)  # the link's own time: old enough to be a visible step
    report = cli("report", demo_run)
    lines = [line for line in report.stdout.splitlines() if str(bad) in line]
    assert report.returncode == 2 and len(lines) == 1 and LOOP in lines[0], report.stdout + report.stderr


def test_a_looping_train_shard_is_a_problem_of_its_step(demo_run: Path) -> None:
    shard = sorted((demo_run / "train_data").glob("2_*.pt"))[0]
    symlink(shard, shard.name)
    export = cli("export", demo_run, "--step", "2", "--no-cache")
    assert export.returncode == 0
    assert [line for line in export.stderr.splitlines() if str(shard) in line and LOOP in line]


def test_looping_dashboard_entries_are_named_once_and_telemetry_goes_on(demo_run: Path) -> None:
    dashboard = demo_run / "dashboard"
    folder = symlink(dashboard / "gpu_util", "gpu_util")
    meta = symlink(dashboard / "meta.json", "meta.json")
    report = cli("report", demo_run)
    assert report.returncode in (0, 1, 2) and "internal error" not in report.stderr, report.stderr
    for path in (folder, meta):
        lines = [line for line in report.stdout.splitlines() if str(path) in line]
        assert len(lines) == 1 and "symbolic link loop" in lines[0], report.stdout
    metrics = cli("export", demo_run, "--metrics", "rollout/raw_reward")
    assert metrics.returncode == 0 and '"rollout/raw_reward":{"x_key"' in metrics.stdout


def test_a_looping_metrics_stream_is_named(demo_run: Path) -> None:
    stream = symlink(demo_run / "dashboard" / "metrics.jsonl", "metrics.jsonl")
    report = cli("report", demo_run)
    assert [line for line in report.stdout.splitlines() if str(stream) in line and "symbolic link loop" in line]
    assert "step 3: 16 samples" in report.stdout


def test_looping_sidecar_and_tokenizer_are_named(demo_run: Path) -> None:
    sidecar = symlink(demo_run / "trajectory" / "2.jsonl", "2.jsonl")
    (demo_run / "tokenizer").mkdir(exist_ok=True)
    tokenizer = symlink(demo_run / "tokenizer" / "tokenizer.json", "tokenizer.json")
    code = (
        "from pathlib import Path\n"
        "from miles_tui.core.dump.trajectory import read_sidecar\n"
        "from miles_tui.core.dump.tokenizer import Detokenizer\n"
        f"run = Path({str(demo_run)!r})\n"
        "print(read_sidecar(run, 2, False).problem)\n"
        "print(len(read_sidecar(run, 1, False).conversations))\n"
        "print(Detokenizer(run / 'tokenizer').status.reason)\n"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    problem, others, reason = out.stdout.splitlines()
    assert problem == f"{sidecar}: {LOOP}" and int(others) > 0
    assert reason == f"{tokenizer}: {LOOP}: showing token ids"


def test_a_looping_step_folder_is_one_line_naming_it(demo_run: Path) -> None:
    folder = symlink(demo_run / "rollout_data", "rollout_data")
    listing = cli("export", demo_run)
    assert listing.returncode == 1
    assert listing.stderr.strip().splitlines() == [
        f"miles-tui: {folder}: cannot list this folder (Too many levels of symbolic links); fix or remove it"
    ]
