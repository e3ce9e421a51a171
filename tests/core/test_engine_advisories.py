"""Engine telemetry as series, miles' engine rules and tiers, and the live_engines golden case level by level.

The golden truth holds what miles' own rules read (``dashboard.engines``) and what its alarm and tuning
tiers return; ``report --json`` on an aged copy must raise exactly miles' advisories.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.analysis import Advisory, Level
from miles_tui.core.analysis.engine_advisories import (
    ALARM_CODES,
    TUNING_CODES,
    abort_storm,
    dp_imbalance,
    engine_alarms,
    engine_figures,
    engine_tuning,
    kv_cache,
    low_concurrency,
    low_prefix_cache_hit,
    tiered,
)
from miles_tui.core.analysis.engine_feed import reader_engine_figures
from miles_tui.core.analysis.stream_advisories import run_mfu, stream_advisories
from miles_tui.core.commands.report import build_report
from miles_tui.core.follow import RunFollower
from miles_tui.core.synth.dump_files import append_jsonl, write_json
from miles_tui.core.telemetry import EngineSample, EngineSeries, EngineTable, counter_delta, restart_times
from miles_tui.core.telemetry.engine_series import interval_rates
from miles_tui.tui.cli import main
from tests.conftest import GOLDEN, stamp

T = 1_787_223_000.0
CAP = {"sglang_max_running_requests": 256, "sglang_mem_fraction_static": 0.7}


def _samples(metric: str, addr: str, values: list[float], *, every: float = 15.0, **labels: Any) -> list[EngineSample]:
    return [EngineSample(T + i * every, addr, metric, dict(labels), v) for i, v in enumerate(values)]


def _series(values: list[float], every: float = 60.0) -> EngineSeries:
    ts = T + every * np.arange(len(values), dtype=np.float64)
    return EngineSeries("e1", (), None, ts, np.asarray(values, dtype=np.float64))


def _figures(*groups: list[EngineSample]) -> Any:
    return engine_figures(EngineTable([s for group in groups for s in group]))


def _numbers(message: str) -> list[float]:
    """The figures a message states, in order (miles' wording and ours differ; the numbers must not)."""
    return [float(n) for n in re.findall(r"\d+(?:\.\d+)?", message)]


# --- series ------------------------------------------------------------------------------------------------


def test_dp_ranks_fold_into_the_engine_as_miles_does() -> None:
    samples = [
        *_samples("sglang:num_running_reqs", "e1", [4.0, 6.0], dp_rank="0"),
        *_samples("sglang_num_running_reqs", "e1", [1.0, 2.0], dp_rank="1"),
        *_samples("sglang_token_usage", "e1", [0.8, 0.9], dp_rank="0"),
        *_samples("sglang_token_usage", "e1", [0.4, 0.5], dp_rank="1"),
    ]
    table = EngineTable(samples)
    assert table.metrics() == ("sglang_num_running_reqs", "sglang_token_usage")  # sglang:x is sglang_x
    [running] = table.series("sglang_num_running_reqs")
    assert running.dp_rank is None and running.value.tolist() == [5.0, 8.0]  # summed per scrape
    [usage] = table.series("sglang_token_usage")
    assert usage.value.tolist() == pytest.approx([0.6, 0.7])  # averaged: an intensive metric
    per_rank = table.series("sglang_num_running_reqs", per_dp_rank=True)
    assert [(s.dp_rank, s.value.tolist()) for s in per_rank] == [("0", [4.0, 6.0]), ("1", [1.0, 2.0])]
    assert table.dp_ranks("e1") == ("0", "1") and table.addrs() == ("e1",)


def test_values_that_are_not_numbers_are_skipped_never_zero() -> None:
    samples = [
        EngineSample(T, "e1", "sglang_num_running_reqs", {}, 3.0),
        EngineSample(T + 1, "e1", "sglang_num_running_reqs", {}, "7"),
        EngineSample(T + 2, "e1", "sglang_num_running_reqs", {}, math.nan),
        EngineSample(T + 3, "e1", "sglang_num_running_reqs", {}, True),
        EngineSample(T + 4, "e1", "sglang_num_running_reqs", {"engine_type": None}, 5.0),
    ]
    table = EngineTable(samples)
    [series] = table.series("sglang_num_running_reqs")  # a null label does not split the series
    assert series.value.tolist() == [3.0, 5.0] and table.skipped == 3
    odd = [
        EngineSample(T, "e1", "sglang_num_running_reqs", {"b": 2, "a": 1}, 1.0),
        EngineSample(T + 1, "e1", "sglang_num_running_reqs", {"a": 1, "b": 2}, 2.0),  # the same label set
        EngineSample(T + 2, "e1", "sglang_num_running_reqs", {"a": [1]}, 3.0),  # an unhashable label value
        EngineSample(T + 3, "e1", "sglang_num_running_reqs", ["not", "a", "mapping"], 4.0),  # type: ignore[arg-type]
    ]
    by_labels = {s.labels: s.value.tolist() for s in EngineTable(odd).series("sglang_num_running_reqs")}
    assert by_labels == {(): [4.0], (("a", "1"), ("b", "2")): [1.0, 2.0], (("a", "[1]"),): [3.0]}


def test_a_counter_reset_drops_its_interval() -> None:
    # 10 -> 30 -> (restart) 5 -> 15: the restart interval's increase is unknown and is left out (miles),
    # not counted as the new value 5 (Prometheus' increase())
    counter = _series([10.0, 30.0, 5.0, 15.0])
    assert counter_delta([counter]) == 20 + 10
    assert counter_delta([counter], since=T + 150) == 10
    assert restart_times(counter).tolist() == [T + 120]
    ends, rates = interval_rates(counter)
    assert ends.tolist() == [T + 60, T + 180] and rates.tolist() == pytest.approx([20 / 60, 10 / 60])


# --- abort storm ---------------------------------------------------------------------------------------------


def _counters(addr: str, requests: list[float], aborted: list[float]) -> list[EngineSample]:
    return [
        *_samples("sglang:num_requests_total", addr, requests, every=60.0),
        *_samples("sglang:num_aborted_requests_total", addr, aborted, every=60.0),
    ]


def test_abort_storm_fires_on_many_aborts_in_the_last_half_hour() -> None:
    figures = _figures(
        _counters("e1", [100.0 * i for i in range(31)], [10.0 * i for i in range(31)]),
        _counters("e2", [50.0 * i for i in range(31)], [0.0] * 31),
    )
    [advisory] = abort_storm(figures, {"n_samples_per_prompt": 8})
    assert advisory.level is Level.WARNING and advisory.code == "engine_abort_storm"
    # 30 one-minute intervals end in the window: 3000 + 1500 requests, 300 aborted, all on e1
    assert "300 of 4500 engine requests (7%)" in advisory.message and "(7% over the run)" in advisory.message
    assert "8 samples per prompt" in advisory.message


def test_abort_storm_quiet_when_rare_old_or_too_few() -> None:
    rare = _counters("e1", [100.0 * i for i in range(31)], [2.0 * i for i in range(31)])
    assert abort_storm(_figures(rare), {}) == []  # 2 %
    # a storm an hour before the newest counter scrape is history, not the engines' current state
    old = _counters("e1", [100.0 * i for i in range(91)], [50.0 * min(i, 10) for i in range(91)])
    assert abort_storm(_figures(old), {}) == []
    few = _counters("e1", [float(i) for i in range(31)], [i / 2 for i in range(31)])
    assert abort_storm(_figures(few), {}) == []  # 15 of 30 requests: too few to call a storm
    assert abort_storm(_figures([]), {}) == []


def test_abort_storm_drops_the_restart_interval() -> None:
    # 200 requests a minute, 6 aborted a minute (3 %); the engine restarts at minute 25 and its counters start
    # again from 0, reading 100 requests and 130 aborts after the restart interval. Counting those new values
    # (Prometheus' increase()) puts 5900 requests and 304 aborts in the window: 5.2 %, a storm. Dropped: 3 %.
    requests = [200.0 * i for i in range(25)] + [100.0 + 200.0 * i for i in range(6)]
    aborted = [6.0 * i for i in range(25)] + [130.0 + 6.0 * i for i in range(6)]
    figures = _figures(_counters("e1", requests, aborted))
    assert figures.abort_window.requests == 29 * 200 and figures.abort_window.aborted == 29 * 6
    assert abort_storm(figures, {}) == []


# --- KV cache -----------------------------------------------------------------------------------------------


def _engine(usage: float, running: float, hit: float = 0.5) -> list[EngineSample]:
    return [
        *_samples("sglang_token_usage", "e1", [usage] * 20),
        *_samples("sglang_num_running_reqs", "e1", [running] * 20),
        *_samples("sglang_cache_hit_rate", "e1", [hit] * 20),
    ]


def test_kv_pool_bound_when_usage_is_high_and_concurrency_far_below_the_cap() -> None:
    [advisory] = kv_cache(_figures(_engine(0.93, 55.0)), CAP)
    assert advisory.code == "kv_cache_pool_bound" and advisory.level is Level.WARNING
    assert _numbers(advisory.message) == [93, 55, 256, 0.7]
    # at half the cap or more, very high usage is a throughput bottleneck instead
    [high] = kv_cache(_figures(_engine(0.97, 128.0)), CAP)
    assert high.code == "kv_cache_high" and "97.0%" in high.message
    # without the cap recorded, only the consistently-high rule can judge
    assert [a.code for a in kv_cache(_figures(_engine(0.97, 5.0)), {})] == ["kv_cache_high"]


def test_kv_quiet_with_room_in_the_cache() -> None:
    assert kv_cache(_figures(_engine(0.90, 5.0)), CAP) == []  # > 0.90, not >=
    assert kv_cache(_figures(_engine(0.93, 128.0)), CAP) == []  # busy and under 95 %
    assert kv_cache(_figures([]), CAP) == []


def test_kv_usage_in_percent_is_read_as_a_fraction() -> None:
    [advisory] = kv_cache(_figures(_engine(93.0, 55.0)), CAP)
    assert _numbers(advisory.message)[0] == 93


# --- tuning rules ---------------------------------------------------------------------------------------------


def test_low_concurrency_and_low_prefix_cache_hit() -> None:
    figures = _figures(_engine(0.5, 55.0, hit=0.05))
    [concurrency] = low_concurrency(figures, CAP)
    assert concurrency.level is Level.INFO and _numbers(concurrency.message) == [55, 30, 256]
    [cache] = low_prefix_cache_hit(figures, CAP)
    assert cache.level is Level.INFO and "5.0%" in cache.message
    assert low_prefix_cache_hit(figures, {**CAP, "colocate": True}) == []  # colocated engines share memory
    assert "colocated" in low_concurrency(figures, {**CAP, "colocate": True})[0].message
    busy = _figures(_engine(0.5, 77.0, hit=0.10))
    assert low_concurrency(busy, CAP) == [] and low_prefix_cache_hit(busy, CAP) == []  # 77 ≥ 76.8, 10 % ≥ 10 %
    assert low_concurrency(figures, {}) == []  # no cap recorded


def test_dp_imbalance_names_the_engine_and_each_rank() -> None:
    skewed = [
        *_samples("sglang_num_running_reqs", "e1", [8.0] * 10, dp_rank="0"),
        *_samples("sglang_num_running_reqs", "e1", [1.0] * 10, dp_rank="1"),
        *_samples("sglang_num_running_reqs", "e2", [8.0] * 10, dp_rank="0"),
        *_samples("sglang_num_running_reqs", "e2", [3.0] * 10, dp_rank="1"),
    ]
    [advisory] = dp_imbalance(_figures(skewed), {})
    assert advisory.level is Level.WARNING and advisory.code == "dp_imbalance"
    assert advisory.message.startswith("e1:") and "dp0=8.0, dp1=1.0" in advisory.message
    assert "--router-dp-aware" in advisory.message
    idle = [
        *_samples("sglang_num_running_reqs", "e1", [0.9] * 10, dp_rank="0"),
        *_samples("sglang_num_running_reqs", "e1", [0.0] * 10, dp_rank="1"),
    ]
    assert dp_imbalance(_figures(idle), {}) == []  # the busiest rank carries no real load


# --- tiers ------------------------------------------------------------------------------------------------------


def test_an_alarm_suppresses_tuning_advice_but_not_data_advisories() -> None:
    alarm = Advisory(Level.WARNING, "kv_cache_pool_bound", "a")
    data = Advisory(Level.WARNING, "no_new_data", "d")
    advice = Advisory(Level.INFO, "low_concurrency", "t")
    assert tiered([alarm], [advice], [data]) == [alarm, data]
    assert tiered([], [advice], [data]) == [data, advice]
    figures = _figures(_engine(0.93, 55.0))  # the live_engines situation: KV pool-bound and low concurrency
    assert [a.code for a in engine_alarms(figures, CAP)] == ["kv_cache_pool_bound"]
    assert [a.code for a in engine_tuning(figures, CAP)] == ["low_concurrency"]
    assert {a.code for a in engine_alarms(figures, CAP)} <= ALARM_CODES
    assert {a.code for a in engine_tuning(figures, CAP)} <= TUNING_CODES


def _metrics_rows(minutes: int, mfu: float) -> list[dict[str, Any]]:
    rows = []
    for step in range(minutes):
        rows.append({"ts": T + 60 * step, "step_key": "train/step", "step": step, "metrics": {"train/step": step}})
        perf = {"perf/actor_train_mfu": mfu, "perf/mfu_peak_tflops": 989.0, "rollout/step": step}
        rows.append({"ts": T + 60 * step + 1, "step_key": "rollout/step", "step": step, "metrics": perf})
    return rows


def _phase(t0: float, t1: float) -> dict[str, Any]:
    return {"name": "actor_train", "t0": t0, "t1": t1, "node": "10.0.0.7", "gpus": [0], "rank": 0, "role": "train"}


def test_a_stall_suppresses_low_mfu(tmp_path: Path) -> None:
    """Issue 8 item 7: low MFU was reported beside a critical stall."""
    run = tmp_path / "run"
    dashboard = run / "dashboard"
    write_json(dashboard / "meta.json", {"run_name": "r", "start_ts": T, "args": {}, "schema_version": 1})
    append_jsonl(dashboard / "metrics.jsonl", _metrics_rows(180, 0.05))  # three hours of steps, MFU 5 %
    phases = [row for i in range(10) for row in (_phase(T + 50 * i, -1), _phase(T + 50 * i, T + 50 * i + 20))]
    append_jsonl(dashboard / "phases" / "20260820_10.jsonl", phases)
    newest = T + 180 * 60
    stamp(run, newest)
    follower = RunFollower(run)
    follower.poll(newest + 5)
    assert [a.code for a in stream_advisories(follower, newest + 5)] == ["low_mfu"]  # healthy: the advice stands
    # a phase opened an hour in and never closed: the run is stalled (by the clock and by the newest data)
    append_jsonl(dashboard / "phases" / "20260820_10.jsonl", [_phase(T + 3600, -1)])
    stamp(run, newest)
    follower = RunFollower(run)
    follower.poll(newest + 5)
    codes = [a.code for a in stream_advisories(follower, newest + 5)]
    assert codes == ["stalled_phase"]


def test_a_kv_alarm_suppresses_low_mfu_and_the_threshold_turns_it_off(tmp_path: Path) -> None:
    run = tmp_path / "run"
    dashboard = run / "dashboard"
    write_json(dashboard / "meta.json", {"run_name": "r", "start_ts": T, "args": CAP, "schema_version": 1})
    append_jsonl(dashboard / "metrics.jsonl", _metrics_rows(10, 0.05))
    newest = T + 600
    stamp(run, newest)
    follower = RunFollower(run)
    follower.poll(newest + 5)
    assert [a.code for a in stream_advisories(follower, newest + 5)] == ["low_mfu"]
    assert stream_advisories(follower, newest + 5, low_mfu_threshold=0.0) == []  # 0: off
    assert stream_advisories(follower, newest + 5, low_mfu_threshold=0.04) == []  # 5 % is above 4 %
    engine = [
        {"ts": s.ts, "addr": s.addr, "metric": s.metric, "labels": {}, "value": s.value} for s in _engine(0.93, 55.0)
    ]
    append_jsonl(dashboard / "engine_series" / "20260820_10.jsonl", engine)
    stamp(run, newest)
    follower = RunFollower(run)
    follower.poll(newest + 5)
    assert [a.code for a in stream_advisories(follower, newest + 5)] == ["kv_cache_pool_bound"]


def test_engine_figures_are_recomputed_only_when_scrapes_arrive(tmp_path: Path) -> None:
    run = tmp_path / "run"
    dashboard = run / "dashboard"
    write_json(dashboard / "meta.json", {"run_name": "r", "start_ts": T, "args": CAP, "schema_version": 1})
    path = dashboard / "engine_series" / "20260820_10.jsonl"
    engine = [
        {"ts": s.ts, "addr": s.addr, "metric": s.metric, "labels": {}, "value": s.value} for s in _engine(0.5, 55.0)
    ]
    append_jsonl(path, engine)
    follower = RunFollower(run)
    follower.poll(T + 600)
    first = reader_engine_figures(follower.dashboard)
    assert first.peak_running == 55.0
    follower.poll(T + 602)  # nothing new
    assert reader_engine_figures(follower.dashboard) is first
    append_jsonl(path, [{**engine[-1], "ts": T + 900, "metric": "sglang_num_running_reqs", "value": 80.0}])
    follower.poll(T + 904)
    assert reader_engine_figures(follower.dashboard).peak_running == 80.0


# --- the golden live_engines case -----------------------------------------------------------------------------


def _truth() -> dict[str, Any]:
    truth: dict[str, Any] = json.loads((GOLDEN / "live_engines.truth.json").read_text())
    return truth


def _copy(tmp_path: Path, mtime: float) -> Path:
    root = tmp_path / "live_engines"
    shutil.copytree(GOLDEN / "live_engines", root)
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    stamp(root, mtime)
    return root


def _fingerprint(root: Path) -> dict[str, tuple[str, float]]:
    return {
        str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _by_level(advisories: list[dict[str, Any]]) -> list[tuple[str, list[float]]]:
    return [(a["level"], _numbers(a["message"])) for a in advisories]


def test_live_engines_inputs_match_miles(tmp_path: Path) -> None:
    want = _truth()["dashboard"]["engines"]
    root = _copy(tmp_path, T)
    follower = RunFollower(root)
    follower.poll(T + 60)
    figures = engine_figures(EngineTable(follower.dashboard.loaded_records("engine_series")))
    assert list(figures.engines) == want["addrs"]
    assert figures.peak_running == want["peak_running"]
    assert figures.token_usage_mean == pytest.approx(want["token_usage_mean"], abs=1e-6)
    assert figures.cache_hit_rate_mean == pytest.approx(want["cache_hit_rate_mean"], abs=1e-6)
    window = figures.abort_window
    assert (window.edge, window.since) == (want["abort_window"]["edge"], want["abort_window"]["since"])
    assert (window.requests, window.aborted) == (want["abort_window"]["requests"], want["abort_window"]["aborted"])
    assert (figures.abort_run.requests, figures.abort_run.aborted) == (
        want["abort_run"]["requests"],
        want["abort_run"]["aborted"],
    )
    assert figures.dp_rank_running_means == want["dp_rank_running_means"]


def test_live_engines_tiers_match_miles(tmp_path: Path) -> None:
    truth = _truth()
    tiers = truth["dashboard"]["engines"]["advisory_tiers"]
    root = _copy(tmp_path, T)
    follower = RunFollower(root)
    follower.poll(T + 60)
    args = follower.dashboard.meta.args if follower.dashboard.meta else {}
    figures = engine_figures(EngineTable(follower.dashboard.loaded_records("engine_series")))
    mfu = run_mfu(follower.metrics, args)
    assert mfu is not None and mfu.mean == pytest.approx(truth["dashboard"]["mfu_summary"]["mean"], abs=1e-5)
    alarms = engine_alarms(figures, args)  # nothing stalls here: miles' stall rule returns nothing either
    tuning = engine_tuning(figures, args)  # MFU 34 % is above the 15 % threshold
    assert _by_level([a.to_dict() for a in alarms]) == _by_level(tiers["alarm"])
    assert _by_level([a.to_dict() for a in tuning]) == _by_level(tiers["tuning"])


def test_live_engines_report_raises_exactly_miles_advisories(tmp_path: Path) -> None:
    truth = _truth()
    written = time.time() - 300  # aged past every still-writing window, younger than the data-age rule's 10 min
    root = _copy(tmp_path, written)
    before = _fingerprint(root)
    # the run's clock is its newest record, not the copy's file times: judge it 5 minutes after that
    edge = build_report(root, written).health.clock.last_data
    assert edge is not None
    written = edge
    report = build_report(root, written + 300)
    assert _by_level([a.to_dict() for a in report.advisories]) == _by_level(truth["advisories"])
    assert [a.code for a in report.advisories] == ["kv_cache_pool_bound"] and report.exit_status == 1
    # a low-MFU threshold above the run's 34 % would advise, but the KV alarm holds the tuning tier back
    assert [a.code for a in build_report(root, written + 300, low_mfu_threshold=0.5).advisories] == [
        "kv_cache_pool_bound"
    ]
    # aged an hour as the truth was: the data-age advisory joins (miles has no such rule; it suppresses nothing)
    late = build_report(root, written + 3600)
    assert [(a.code, a.level) for a in late.advisories] == [
        ("kv_cache_pool_bound", Level.WARNING),
        ("no_new_data", Level.WARNING),
    ]
    assert _fingerprint(root) == before  # nothing written into the run


def test_live_engines_report_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth = _truth()
    root = _copy(tmp_path, time.time() - 300)
    # months after its records, the run is quiet (no num_rollout says it ended): --quiet-ok keeps exit 1
    assert main(["report", str(root), "--json", "--low-mfu-threshold", "0.5", "--quiet-ok"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert [a["code"] for a in document["advisories"] if a["level"] == "critical"] == ["no_new_data"]
    others = [a for a in document["advisories"] if a["code"] != "no_new_data"]
    assert _by_level(others) == _by_level(truth["advisories"])


@pytest.mark.parametrize("bad", ["-0.1", "1", "nan", "inf", "x"])
def test_low_mfu_threshold_must_be_a_fraction(bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path), "--low-mfu-threshold", bad]) == 2
    err = capsys.readouterr().err
    assert "--low-mfu-threshold" in err and len(err.strip().splitlines()) == 1
