"""The demo run: loadable steps with the phenomena the monitor exists to show, and live telemetry."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.dump.cp import assemble_response
from miles_tui.core.dump.pt.pt_archive import load_pt
from miles_tui.core.synth.demo import main, run_demo, write_demo_step
from miles_tui.core.synth.demo_batch import DemoConfig
from miles_tui.core.synth.layout import ParallelLayout

NOW = 1_787_223_000.0
CONFIG = DemoConfig(samples_per_step=16, layout=ParallelLayout(tp=2, pp=2, cp=2, dp=2), step_seconds=20.0)


def _step(run_dir: Path, rid: int, config: DemoConfig = CONFIG, now: float = NOW) -> Any:
    return write_demo_step(run_dir, rid, config, np.random.default_rng([config.seed, rid]), now=now)


def _train_rows(run_dir: Path, rid: int) -> dict[int, dict[str, Any]]:
    return {int(p.stem.split("_")[1]): load_pt(p) for p in (run_dir / "train_data").glob(f"{rid}_*.pt")}


def _full(files: dict[int, dict[str, Any]], index: int, key: str, total: int, length: int, cp_size: int) -> Any:
    slices = {}
    for payload in files.values():
        rows = payload["rollout_data"]
        if index in rows["sample_indices"]:
            slices[payload["cp_rank"]] = rows[key][rows["sample_indices"].index(index)]
    return assemble_response(slices, total, length, cp_size)


def test_a_demo_step_has_what_a_monitor_must_show(tmp_path: Path) -> None:
    step = _step(tmp_path, 7)
    samples = load_pt(tmp_path / "rollout_data" / "7.pt")["samples"]
    assert [s["index"] for s in samples] == list(step.sample_indices) == list(range(112, 128))
    files = _train_rows(tmp_path, 7)
    assert sorted(files) == [8, 10, 12, 14] and step.train_files == 4  # gated: rank 0 writes nothing

    groups: dict[int, list[float]] = {}
    for s in samples:
        groups.setdefault(s["group_index"], []).append(s["reward"])
    zero_std = sorted(g for g, rewards in groups.items() if np.std(rewards) == 0)
    assert zero_std and set(step.zero_std_groups) <= set(zero_std)

    truncated = [s for s in samples if s["status"] == "truncated"]
    assert 0.1 <= len(truncated) / len(samples) <= 0.3
    assert all(s["response_length"] == CONFIG.response_len_max for s in truncated)

    multi = [s for s in samples if s["loss_mask"] is not None and not s["remove_sample"]]
    assert multi and all(0 in s["loss_mask"] and 1 in s["loss_mask"] for s in multi)
    assert all(any(m["role"] == "tool" for m in s["prompt"]) for s in multi)
    assert any(len(set(s["weight_versions"])) > 1 for s in samples)  # mixed versions across turns
    assert len({v for s in samples for v in s["weight_versions"]}) > 1

    rows = {}
    for payload in files.values():
        rd = payload["rollout_data"]
        rows.update({i: (rd["rewards"][r], rd["truncated"][r]) for r, i in enumerate(rd["sample_indices"])})
    diffs = []
    for s in samples:
        total, length = len(s["tokens"]), s["response_length"]
        advantages = _full(files, s["index"], "advantages", total, length, 2)
        assert np.allclose(advantages, rows[s["index"]][0])  # GRPO: the group-normalized reward per token
        assert rows[s["index"]][1] == int(s["status"] == "truncated")
        log_probs = _full(files, s["index"], "log_probs", total, length, 2)
        rollout = np.asarray(s["rollout_log_probs"], dtype=np.float32)
        scored = np.asarray(s["loss_mask"] or [1] * length) > 0
        assert not rollout[~scored].any()  # the engine never scored tool output
        diffs.append(np.abs(log_probs - rollout)[scored])
    every = np.concatenate(diffs)
    assert np.median(every) < 0.05 and every.max() > 1.0  # close, with a few outlier tokens

    conversations = [json.loads(line) for line in (tmp_path / "trajectory" / "7.jsonl").read_text().splitlines()]
    assert {c["sample_index"] for c in conversations} == set(step.multi_turn)
    assert all(any(m["role"] == "tool" for m in c["messages"]) for c in conversations)


def test_versions_are_fully_async_and_sometimes_non_numeric(tmp_path: Path) -> None:
    versions: set[str] = set()
    for rid in range(6):
        _step(tmp_path, rid, DemoConfig(layout=ParallelLayout(dp=2), eval_every=0))
        versions |= {
            v for s in load_pt(tmp_path / "rollout_data" / f"{rid}.pt")["samples"] for v in s["weight_versions"]
        }
    assert "default" in versions
    assert {"3", "4", "5"} <= versions


def test_eval_batches_every_fifth_step(tmp_path: Path) -> None:
    config = DemoConfig(samples_per_step=8, layout=ParallelLayout(), eval_samples=8)
    evaluated = [_step(tmp_path, rid, config).evaluated for rid in range(6)]
    assert evaluated == [True, False, False, False, False, True]
    assert sorted(p.name for p in (tmp_path / "rollout_data").glob("eval_*.pt")) == ["eval_0.pt", "eval_5.pt"]
    evals = load_pt(tmp_path / "rollout_data" / "eval_5.pt")
    assert evals["rollout_id"] == 5 and all(s["index"] >= 10_000_000 for s in evals["samples"])


def test_dashboard_streams(tmp_path: Path) -> None:
    for rid in range(3):
        _step(tmp_path, rid, now=NOW + 3600 * rid)  # one step per hour: three partitions
    dash = tmp_path / "dashboard"
    meta = json.loads((dash / "meta.json").read_text())
    assert set(meta) == {"run_name", "start_ts", "args", "schema_version"}
    assert meta["args"]["rollout_max_response_len"] == CONFIG.response_len_max
    assert meta["start_ts"] == NOW - CONFIG.step_seconds  # written once, by the first step
    text = (dash / "metrics.jsonl").read_text()
    assert text.endswith("\n")
    records = [json.loads(line) for line in text.splitlines()]
    assert all(set(r) == {"ts", "step_key", "step", "metrics"} for r in records)
    names = {name for r in records for name in r["metrics"]}
    assert {"train/loss", "rollout/raw_reward", "perf/actor_train_mfu", "eval/aime"} <= names
    for stream, stamp in (("gpu_util", "ts"), ("phases", "t1")):
        files = sorted((dash / stream).glob("*.jsonl"))
        assert len(files) == 3
        for path in files:
            for line in path.read_text().splitlines():
                record = json.loads(line)
                when = record[stamp] if record[stamp] >= 0 else record["t0"]
                assert time.strftime("%Y%m%d_%H", time.gmtime(when)) == path.stem
    phases = [json.loads(line) for path in (dash / "phases").glob("*.jsonl") for line in path.read_text().splitlines()]
    assert {p["name"] for p in phases} >= {"rollout", "actor_train", "update_weights"}
    assert any(p["t1"] == -1 for p in phases)  # an open phase, closed by a later line
    util = [json.loads(line) for path in (dash / "gpu_util").glob("*.jsonl") for line in path.read_text().splitlines()]
    assert {(u["node"], u["gpu"]) for u in util} == {(f"10.0.0.{n}", g) for n in (1, 2) for g in range(8)}
    assert set(util[0]) == {"ts", "node", "gpu", "util", "mem_mb", "power_w"}


def test_same_seed_same_run(tmp_path: Path) -> None:
    _step(tmp_path / "a", 2)
    _step(tmp_path / "b", 2)
    for rel in ("rollout_data/2.pt", "train_data/2_8.pt", "train_data/2_14.pt"):
        a, b = load_pt(tmp_path / "a" / rel), load_pt(tmp_path / "b" / rel)
        assert repr(a) == repr(b), rel
    for rel in ("dashboard/metrics.jsonl", "trajectory/2.jsonl"):
        assert (tmp_path / "a" / rel).read_text() == (tmp_path / "b" / rel).read_text()


def test_run_demo_writes_the_backlog_then_one_step_per_interval(tmp_path: Path) -> None:
    clock = iter(float(NOW + 30 * k) for k in range(100))
    slept: list[float] = []
    config = DemoConfig(samples_per_step=8, layout=ParallelLayout(), step_seconds=30.0)
    written = run_demo(tmp_path, 2, 30.0, 4, config=config, clock=lambda: next(clock), sleep=slept.append)
    assert written == 4 and slept == [30.0, 30.0]
    assert sorted(p.name for p in (tmp_path / "rollout_data").glob("[0-9]*.pt")) == [f"{i}.pt" for i in range(4)]
    ends = [r["ts"] for r in map(json.loads, (tmp_path / "dashboard" / "metrics.jsonl").read_text().splitlines())]
    assert ends == sorted(ends) and max(ends) == NOW + 60  # backlog in the past, then the live clock
    # A restarted demo continues after the newest step.
    assert run_demo(tmp_path, 1, 30.0, 1, config=config, clock=lambda: NOW + 100, sleep=slept.append) == 1
    assert (tmp_path / "rollout_data" / "4.pt").exists() and len(slept) == 2


def test_cli_entry(tmp_path: Path) -> None:
    assert main([str(tmp_path), "--initial", "1", "--max-steps", "1", "--layout", "dp1 cp2 tp1 pp1"]) == 0
    assert sorted(p.name for p in (tmp_path / "train_data").iterdir()) == ["0_0.pt", "0_1.pt"]


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="multiple of group_size"):
        DemoConfig(samples_per_step=10, group_size=4)
    with pytest.raises(ValueError, match="DP size"):
        DemoConfig(samples_per_step=12, group_size=4, layout=ParallelLayout(dp=8))


@pytest.mark.parametrize("interval", [CONFIG.step_seconds, 5.0])
def test_demo_engine_counters_only_grow(tmp_path: Path, interval: float) -> None:
    """A counter that falls reads as an engine restart: the demo's engines must not seem to restart, whether its
    live steps come a step's length apart or closer (`--demo` writes one every few seconds: each step's scrapes
    overlapped the step before's, and the engines view read ↺36 restarts after 8 minutes)."""
    from miles_tui.core.synth.demo import run_demo
    from miles_tui.core.telemetry import EngineTable, restart_times
    from miles_tui.core.telemetry.hours.engine_columns import engine_table
    from miles_tui.core.telemetry.hours.store import HourStore

    ticks = iter(NOW + interval * k for k in range(100))
    run_demo(tmp_path, 2, interval, max_steps=12, config=CONFIG, clock=lambda: next(ticks), sleep=lambda _s: None)
    store = HourStore(tmp_path / "dashboard", "engine_series")
    store.refresh()
    table: EngineTable = engine_table(store.columns())
    for metric in ("sglang_num_requests_total", "sglang_num_aborted_requests_total"):
        series = table.series(metric)
        assert series and all(len(one.ts) > 4 for one in series)
        assert all(not len(restart_times(one)) for one in series), metric
    assert any(float(one.value[-1]) > 0 for one in table.series("sglang_num_aborted_requests_total"))
