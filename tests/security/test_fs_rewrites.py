"""Rewrites the follow reader used to miss (issue 9.9): a same-length rewrite in place, and a run
directory deleted and started again in the same folder (partitions that no longer exist)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from miles_tui.core.analysis.stream_advisories import stream_corruption
from miles_tui.core.base.tail import TailFile
from miles_tui.core.follow import RunFollower
from miles_tui.core.telemetry.stream_records import GpuUtil


def _fixed(values: list[int]) -> bytes:
    """Fixed-width records: a rewrite with other values keeps every length and every newline."""
    return b"".join(json.dumps({"v": f"{v:08d}"}).encode() + b"\n" for v in values)


def _identity(value: Any) -> Any:
    return value


def _rewrite_in_place(path: Path, data: bytes, *, keep_mtime: bool = False) -> None:
    before = path.stat()
    with open(path, "r+b") as handle:  # same inode, same length: only the bytes change
        handle.write(data)
    if keep_mtime:  # a writer that restores the modification time (only the ctime tells)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_ino == before.st_ino


def test_a_same_length_rewrite_in_place_drops_the_old_records(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_fixed([1, 2, 3]))
    records: list[Any] = []
    tail: TailFile[Any] = TailFile(path, _identity)
    tail.poll(records.extend, records.clear)
    assert [r["v"] for r in records] == ["00000001", "00000002", "00000003"]

    _rewrite_in_place(path, _fixed([7, 8, 9]))
    read = tail.poll(records.extend, records.clear)
    assert read.reset is not None and read.reset.reason == "rewritten"
    assert [r["v"] for r in records] == ["00000007", "00000008", "00000009"]

    _rewrite_in_place(path, _fixed([4, 5, 6]), keep_mtime=True)
    read = tail.poll(records.extend, records.clear)
    assert read.reset is not None and [r["v"] for r in records] == ["00000004", "00000005", "00000006"]
    assert not tail.poll(records.extend, records.clear).changed  # and then idle again


def test_a_rewrite_that_only_changes_early_bytes_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    values = list(range(500))  # far more than the two fingerprint windows
    path.write_bytes(_fixed(values))
    records: list[Any] = []
    tail: TailFile[Any] = TailFile(path, _identity)
    tail.poll(records.extend, records.clear)
    _rewrite_in_place(path, _fixed([999]))  # only the first record changes...
    with open(path, "ab") as handle:
        handle.write(_fixed([500]))  # ...and the file grows as if appended to
    read = tail.poll(records.extend, records.clear)
    assert read.reset is not None and records[0]["v"] == "00000999" and len(records) == 501


def _gpu(ts: float, util: int) -> dict[str, Any]:
    return {"ts": ts, "node": "n0", "gpu": 0, "util": util, "mem_mb": 1, "power_w": 1}


def _write_run(run: Path, hours: dict[str, list[dict[str, Any]]], metrics: list[dict[str, Any]]) -> None:
    folder = run / "dashboard" / "gpu_util"
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in hours.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "dashboard" / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))


def test_rm_rf_and_a_restart_in_the_same_folder_drops_the_old_runs_records(tmp_path: Path) -> None:
    run = tmp_path / "run"
    old_hours = {f"20260820_{h:02d}": [_gpu(1_787_220_000.0 + h * 3600, 11)] for h in range(10, 14)}
    metric = {"ts": 1.0, "step_key": "rollout/step", "step": 0, "metrics": {"rollout/raw_reward": 0.5}}
    _write_run(run, old_hours, [metric, {**metric, "step": 1}])
    follower = RunFollower(run)
    follower.poll(now=2e9)
    for _ in range(3):
        follower.poll(now=2e9)  # hours 10 and 11 are settled now: stat'ed only every 16th poll
    assert follower.dashboard.record_counts()["gpu_util"] == 4

    shutil.rmtree(run)
    _write_run(run, {"20260901_00": [_gpu(1_788_220_000.0, 99)]}, [{**metric, "step": 7}])
    delta = follower.poll(now=2e9)

    gone = sorted(r.path.name for r in delta.resets if r.reason == "removed")
    assert gone == [f"20260820_{h}.jsonl" for h in range(10, 14)]
    assert "gpu_util" in delta.reset_streams
    held = follower.dashboard.loaded_records("gpu_util")
    assert [r.util for r in held if isinstance(r, GpuUtil)] == [99]  # only the new run's sample
    assert [p.path.name for p in follower.dashboard.partitions("gpu_util")] == ["20260901_00.jsonl"]
    assert follower.metrics.series("rollout/raw_reward", "rollout/step").step.tolist() == [7]
    notices = stream_corruption((), delta.resets)
    assert all("disappeared" in a.message for a in notices if "20260820" in a.message) and len(notices) >= 4


def test_a_deleted_stream_folder_drops_its_records_at_the_next_poll(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _write_run(run, {"20260820_10": [_gpu(1_787_220_000.0, 5)]}, [])
    follower = RunFollower(run)
    follower.poll(now=2e9)
    shutil.rmtree(run / "dashboard" / "gpu_util")
    delta = follower.poll(now=2e9)
    assert [r.reason for r in delta.resets] == ["removed"] and delta.reset_streams == ("gpu_util",)
    assert follower.dashboard.record_counts()["gpu_util"] == 0
    assert follower.poll(now=2e9).is_empty  # said once
