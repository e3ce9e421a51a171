"""A FIFO named like a dump file (issue 9.3): named in one line, never waited on; the rest goes on.

Each FIFO here has no writer, so an ``open()`` for reading would block forever; the commands
run in a child process with a timeout, so a regression shows as a hang, not a stuck suite.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import EPOCH
from hostile_fs import age, cli, fifo, python


def _old_fifo(path: Path) -> Path:
    fifo(path)
    age(path, EPOCH - 600)
    return path


def test_a_fifo_rollout_file_is_named_by_report_and_export(demo_run: Path) -> None:
    bad = _old_fifo(demo_run / "rollout_data" / "4.pt")  # the newest step: report reads it

    report = cli("report", demo_run)
    assert not report.hung, "report waited forever on the FIFO"
    unreadable = [line for line in report.stdout.splitlines() if "step_unreadable" in line]
    assert len(unreadable) == 1 and str(bad) in unreadable[0] and "FIFO" in unreadable[0]
    assert "internal error" not in report.stderr

    export = cli("export", demo_run, "--step", "4")
    assert not export.hung and export.returncode == 1
    assert export.stderr.strip().splitlines() == [
        f"miles-tui: {bad}: a FIFO (named pipe) where a file should be, so it was not read:"
        " miles writes regular files (remove or rename it)"
    ]

    listing = cli("export", demo_run)  # the step list and the other steps go on
    assert listing.returncode == 0 and '"train": [0, 1, 2, 3, 4]' in listing.stdout
    assert cli("export", demo_run, "--step", "3").returncode == 0


def test_a_fifo_train_shard_marks_its_samples_unreadable_and_the_step_goes_on(demo_run: Path) -> None:
    bad = _old_fifo(sorted((demo_run / "train_data").glob("3_*.pt"))[0])
    export = cli("export", demo_run, "--step", "3", "--no-cache")
    assert not export.hung and export.returncode == 0
    warnings = [line for line in export.stderr.splitlines() if str(bad) in line]
    assert len(warnings) == 1 and "FIFO" in warnings[0]
    assert '"alignment_failed": true' in export.stdout


def test_fifo_streams_and_meta_json_are_named_and_the_rest_is_read(demo_run: Path) -> None:
    dashboard = demo_run / "dashboard"
    meta = _old_fifo(dashboard / "meta.json")
    partition = _old_fifo(next((dashboard / "gpu_util").iterdir()))
    metrics = _old_fifo(dashboard / "metrics.jsonl")
    report = cli("report", demo_run)
    assert not report.hung, "report waited forever on a FIFO stream"
    for path in (meta, partition, metrics):
        lines = [line for line in report.stdout.splitlines() if str(path) in line]
        assert len(lines) == 1 and "FIFO" in lines[0], (path, report.stdout)
    assert "step 3: 16 samples" in report.stdout  # the steps were still read
    exported = cli("export", demo_run, "--metrics")
    assert not exported.hung and exported.returncode == 0 and json.loads(exported.stdout) == {"metrics": {}}


def test_a_fifo_sidecar_and_tokenizer_are_named_not_waited_on(demo_run: Path) -> None:
    sidecar = _old_fifo(demo_run / "trajectory" / "3.jsonl")
    (demo_run / "tokenizer").mkdir(exist_ok=True)
    tokenizer = _old_fifo(demo_run / "tokenizer" / "tokenizer.json")
    code = (
        "from pathlib import Path\n"
        "from miles_tui.core.dump.trajectory import read_sidecar\n"
        "from miles_tui.core.dump.tokenizer import Detokenizer\n"
        f"run = Path({str(demo_run)!r})\n"
        "car = read_sidecar(run, 3, False)\n"
        "print(car.problem)\n"
        "print(len(car.conversations))\n"
        "print(Detokenizer(run / 'tokenizer').status.reason)\n"
    )
    out = python(code)
    assert not out.hung, "a sidecar or tokenizer FIFO was waited on"
    problem, count, reason = out.stdout.splitlines()
    assert problem.startswith(f"{sidecar}: a FIFO") and count == "0"
    assert reason.startswith(f"{tokenizer}: a FIFO") and reason.endswith("showing token ids")
