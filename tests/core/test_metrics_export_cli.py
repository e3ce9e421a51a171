"""``miles-tui export RUN --metrics ...`` reads dashboard/metrics.jsonl through
miles_tui.core.commands.export.metrics_export and matches the metric series miles' own reader gives for the
live_streams golden case."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from miles_tui.core.base.errors import MetricNotFoundError, RunDirError
from miles_tui.core.commands.export import metrics_export
from miles_tui.tui.cli import main
from tests.conftest import GOLDEN, stamp

TRUTH = GOLDEN / "live_streams.truth.json"


@pytest.fixture
def live_streams(tmp_path: Path) -> Path:
    root = tmp_path / "live_streams"
    shutil.copytree(GOLDEN / "live_streams", root)
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    stamp(root, 1_787_230_000.0)
    return root


def _export(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(["export", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else None, err


def test_metrics_match_the_truth_series(live_streams: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected: dict[str, Any] = json.loads(TRUTH.read_text())["dashboard"]["metric_series"]
    code, document, _ = _export(capsys, str(live_streams), "--metrics", *expected)
    assert code == 0 and list(document["metrics"]) == list(expected)
    for key, series in expected.items():
        got = document["metrics"][key]
        assert got["x_key"] == series["x_key"], key
        assert got["step"] == series["x"], key
        assert got["value"] == pytest.approx(series["y"], abs=1e-5), key
        assert got["ts"] == pytest.approx(series["ts"], abs=1e-5), key


def test_every_key_and_an_explicit_step_key(live_streams: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth = json.loads(TRUTH.read_text())["dashboard"]
    code, document, _ = _export(capsys, str(live_streams), "--metrics")
    assert code == 0 and sorted(document["metrics"]) == truth["metric_keys"]
    # train/loss is logged against train/step only: against rollout/step it has no points
    code, document, _ = _export(capsys, str(live_streams), "--metrics", "train/loss", "--x", "rollout/step")
    empty = {"x_key": "rollout/step", "step": [], "value": [], "ts": []}
    assert code == 0 and document == {"metrics": {"train/loss": empty}}


def test_without_a_dashboard_and_without_a_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run" / "rollout_data").mkdir(parents=True)
    assert metrics_export(tmp_path / "run", None, None) == {"metrics": {}}
    with pytest.raises(MetricNotFoundError, match="no metric 'train/loss': this run has logged no metrics yet"):
        metrics_export(tmp_path / "run", ["train/loss"], None)
    with pytest.raises(RunDirError, match="no such run directory"):
        metrics_export(tmp_path / "missing", None, None)
    code, document, err = _export(capsys, str(tmp_path / "missing"), "--metrics")
    assert code == 1 and document is None and "no such run directory" in err


def test_an_unknown_key_is_an_error_naming_it(live_streams: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a mistyped key used to print empty lists and exit 0: a script plotted nothing, silently
    code, document, err = _export(capsys, str(live_streams), "--metrics", "train/loss", "perf/actor_train_mfx")
    assert code == 1 and document is None
    [line] = err.splitlines()
    assert "'perf/actor_train_mfx'" in line and "metrics.jsonl" in line and "did you mean perf/actor_train_mfu" in line
    code, document, err = _export(capsys, str(live_streams), "--metrics", "train/loss", "--x", "rollout/stp")
    assert code == 1 and document is None and "no step key 'rollout/stp'" in err and len(err.splitlines()) == 1


def test_an_unknown_key_with_no_close_match_names_the_runs_keys(
    live_streams: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to say 'list them with export --metrics', which prints every point of every series."""
    code, document, err = _export(capsys, str(live_streams), "--metrics", "zzzz")
    assert code == 1 and document is None
    [line] = err.splitlines()
    assert "it has: " in line and "list them with" not in line
    assert "train/loss" in line or "in all)" in line


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_a_long_export_keeps_freed_memory_for_the_next_allocation() -> None:
    """After _long_export_memory, a freed 64 MB string's pages serve the next one: few page faults the second
    time."""
    code = """
import resource
from miles_tui.core.commands import export

def faults_of_a_64_mb_string() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    data = b"x" * (64 << 20)
    del data
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

plain = faults_of_a_64_mb_string(), faults_of_a_64_mb_string()
export._long_export_memory()
kept = faults_of_a_64_mb_string(), faults_of_a_64_mb_string()
print(min(plain), kept[1])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    plain, kept = map(int, out.stdout.split())
    assert plain > 10_000 and kept < plain // 10  # 16k pages faulted in each time before; reused after
