"""Pathological JSON (issue 9.6): deep nesting and integers no float holds are malformed input,
named with the file (and the byte offset for a stream line); everything else goes on."""

from __future__ import annotations

import json
from pathlib import Path

from hostile_fs import cli

from miles_tui.core.analysis.health import run_name
from miles_tui.core.base.run_files import MAX_JSON_DEPTH
from miles_tui.core.base.tail import MalformedLineError
from miles_tui.core.dump import Run, read_sidecar
from miles_tui.core.telemetry import DashboardReader
from miles_tui.tui.runtime.run_watcher import RunWatcher

DEEP = b"[" * 100_000 + b"]" * 100_000
HUGE = int("9" * 400)


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def test_meta_json_nested_100000_deep_is_named_by_report(demo_run: Path) -> None:
    meta = demo_run / "dashboard" / "meta.json"
    meta.write_bytes(DEEP)
    report = cli("report", demo_run)
    assert "internal error" not in report.stderr, report.stderr
    lines = [line for line in report.stdout.splitlines() if str(meta) in line]
    assert len(lines) == 1 and "JSON nested too deeply to parse" in lines[0]
    assert "step 3: 16 samples" in report.stdout


def test_meta_json_nested_100000_deep_does_not_stop_the_monitor_polls(demo_run: Path) -> None:
    (demo_run / "dashboard" / "meta.json").write_bytes(DEEP)
    watcher = RunWatcher(Run(demo_run))
    streams = watcher.poll_streams_blocking(now=2e9)
    result = watcher.poll_blocking(now=2e9)
    assert result.train == (0, 1, 2, 3) and not result.failures
    assert run_name(watcher.follower.dashboard.meta, demo_run) == "demo"  # the folder's name
    assert any("meta.json" in str(problem) for problem in streams.delta.problems)


def test_meta_json_too_deep_or_with_a_huge_integer_is_refused(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    dashboard.mkdir()
    meta = dashboard / "meta.json"
    for document, reason in (
        ({"run_name": "x", "args": _nested(MAX_JSON_DEPTH + 1)}, f"nested more than {MAX_JSON_DEPTH} levels"),
        ({"run_name": "x", "start_ts": HUGE}, "an integer of 400 digits"),
    ):
        meta.write_text(json.dumps(document))
        delta = DashboardReader(dashboard).poll()
        assert delta.meta is None and len(delta.problems) == 1
        assert str(delta.problems[0]).startswith(f"{meta}: ") and reason in str(delta.problems[0])
    meta.write_text(json.dumps({"run_name": "x", "args": _nested(MAX_JSON_DEPTH - 1), "start_ts": 2**70}))
    assert DashboardReader(dashboard).poll().meta is not None  # deep-ish and big-ish are fine


def test_telemetry_lines_with_a_400_digit_integer_or_deep_nesting_are_skipped_with_their_offset(
    tmp_path: Path,
) -> None:
    dashboard = tmp_path / "dashboard"
    (dashboard / "gpu_util").mkdir(parents=True)
    good = {"ts": 1.0, "node": "n", "gpu": 0, "util": 50, "mem_mb": 1, "power_w": 2}
    lines = [
        json.dumps(good).encode(),
        json.dumps({**good, "util": HUGE}).encode(),
        b'{"ts": 2.0, "node": "n", "gpu": 0, "util": ' + DEEP + b"}",
        json.dumps({**good, "ts": 3.0, "note": "9" * 400}).encode(),  # digits in a string are just text
    ]
    path = dashboard / "gpu_util" / "20260820_10.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    metrics = dashboard / "metrics.jsonl"
    metric = {"ts": 1.0, "step_key": "rollout/step", "step": 0, "metrics": {"rollout/raw_reward": HUGE}}
    metrics.write_text(json.dumps(metric) + "\n")

    delta = DashboardReader(dashboard).poll()
    bad = [p for p in delta.problems if isinstance(p, MalformedLineError)]
    second, third = len(lines[0]) + 1, len(lines[0]) + len(lines[1]) + 2
    assert [(p.path, p.offset) for p in bad] == [(metrics, 0), (path, second), (path, third)]
    assert "integer of 400 digits" in bad[0].reason and "integer of 400 digits" in bad[1].reason
    assert bad[2].reason == "nested too deeply to parse"
    assert [r.ts for r in delta.records["gpu_util"]] == [1.0, 3.0]
    assert str(bad[1]).startswith(f"{path} (byte {second}): ")


def test_sidecar_lines_nested_too_deep_are_bad_lines_and_the_rest_is_read(demo_run: Path) -> None:
    path = demo_run / "trajectory" / "3.jsonl"
    original = path.read_bytes()
    deep = json.dumps({"sample_index": 999, "messages": [], "reward": _nested(MAX_JSON_DEPTH + 5)}).encode()
    path.write_bytes(DEEP + b"\n" + deep + b"\n" + original)
    sidecar = read_sidecar(demo_run, 3, False)
    assert sidecar is not None and sidecar.problem is None
    assert sidecar.bad_lines == (0, len(DEEP) + 1)
    assert 999 not in sidecar.conversations and len(sidecar.conversations) == original.count(b"\n")
