"""Engine metrics as miles derives them: the catalog, rates and interval means (against a plain-Python reference
of miles' ``Store._derived_series`` over random series with resets), per engine and DP rank, and a window read
through the hour stores that opens only the hours it touches."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis.engine_metrics import (
    EngineMetric,
    Points,
    binned,
    exporters,
    latest,
    mean_points,
    metric_catalog,
    metric_series,
    metrics_of,
    rate_points,
)
from miles_tui.core.telemetry import EngineSample, EngineTable
from miles_tui.core.telemetry.engine_hours import EngineHours


def reference_derived(ts: list[float], num: list[float], den: list[float] | None) -> list[tuple[float, float, float]]:
    """miles' ``_derived_series`` for one series, in plain Python: (time, Δnum, Δden) of the kept intervals."""
    out = []
    for i in range(1, len(ts)):
        d_num = num[i] - num[i - 1]
        d_den = ts[i] - ts[i - 1] if den is None else den[i] - den[i - 1]
        if d_num >= 0 and d_den > 0:
            out.append((ts[i], d_num, d_den))
    return out


def _triples(points: Points) -> list[tuple[float, float, float]]:
    return list(zip(points.ts.tolist(), points.num.tolist(), points.den.tolist(), strict=True))


@st.composite
def counter(draw: st.DrawFn, *, strictly: bool = True) -> tuple[list[float], list[float]]:
    """Scrape times (ascending; repeated times when not ``strictly``) and a counter that grows and resets."""
    n = draw(st.integers(0, 40))
    gaps = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 15.0]) if not strictly else st.sampled_from([1.0, 2.0, 15.0]),
                         min_size=n, max_size=n))  # fmt: skip
    steps = draw(st.lists(st.one_of(st.floats(0, 50), st.just(-1.0)), min_size=n, max_size=n))
    ts, values, t, v = [], [], 1000.0, 0.0
    for gap, step in zip(gaps, steps, strict=True):
        t += gap
        v = draw(st.floats(0, 5)) if step < 0 else v + step  # -1: the engine restarted, counting from ~0 again
        ts.append(t)
        values.append(v)
    return ts, values


@settings(max_examples=200, deadline=None)
@given(counter(strictly=False))
def test_rates_are_miles_derived_rates(series: tuple[list[float], list[float]]) -> None:
    ts, values = series
    points = rate_points(np.asarray(ts, dtype=np.float64), np.asarray(values, dtype=np.float64))
    assert _triples(points) == reference_derived(ts, values, None)
    assert np.all(points.den > 0) and np.all(points.num >= 0)


@settings(max_examples=200, deadline=None)
@given(counter(), counter(), st.integers(0, 3))
def test_means_are_miles_interval_means(
    sums: tuple[list[float], list[float]], counts: tuple[list[float], list[float]], drop: int
) -> None:
    # the count series shares the sum's times but for a few scrapes missing from it (a failed scrape)
    sum_ts, sum_values = sums
    count_values = [float(round(v)) for v in counts[1][: len(sum_ts)]] + [0.0] * max(0, len(sum_ts) - len(counts[1]))
    count_ts = [t for i, t in enumerate(sum_ts) if drop == 0 or i % (drop + 2)]
    count_values = [v for i, v in enumerate(count_values) if drop == 0 or i % (drop + 2)]
    points = mean_points(
        np.asarray(sum_ts, dtype=np.float64),
        np.asarray(sum_values, dtype=np.float64),
        np.asarray(count_ts, dtype=np.float64),
        np.asarray(count_values, dtype=np.float64),
    )
    shared = sorted(set(sum_ts) & set(count_ts))
    by_sum, by_count = dict(zip(sum_ts, sum_values, strict=True)), dict(zip(count_ts, count_values, strict=True))
    expected = reference_derived(shared, [by_sum[t] for t in shared], [by_count[t] for t in shared])
    assert _triples(points) == expected


def test_a_reset_interval_and_an_interval_without_completions_are_gaps() -> None:
    ts = np.array([0.0, 10.0, 20.0, 30.0, 40.0])
    sums = np.array([0.0, 5.0, 1.0, 3.0, 3.0])  # the sum fell at 20: a restart
    counts = np.array([0.0, 10.0, 2.0, 6.0, 6.0])  # no completion between 30 and 40
    points = mean_points(ts, sums, ts, counts)
    assert points.ts.tolist() == [10.0, 30.0] and points.value.tolist() == [0.5, 0.5]
    rates = rate_points(ts, counts)
    assert rates.ts.tolist() == [10.0, 30.0, 40.0] and rates.value.tolist() == [1.0, 0.4, 0.0]


def test_the_catalog_names_metrics_as_miles_does_and_keeps_every_other_name() -> None:
    raw = [
        "sglang_num_running_reqs",
        "sglang_prompt_tokens_total",
        "sglang_custom_total",
        "sglang_time_to_first_token_seconds_sum",
        "sglang_time_to_first_token_seconds_count",
        "sglang_queue_time_seconds_sum",
        "sglang_queue_time_seconds_count",
        "sglang_lonely_seconds_count",
    ]
    catalog = metric_catalog(raw)
    assert [(m.kind, m.name) for m in catalog] == [
        ("gauge", "sglang_num_running_reqs"),
        ("counter", "sglang_custom_per_s"),
        ("counter", "sglang_lonely_seconds_count_per_s"),
        ("counter", "sglang_prompt_tokens_per_s"),
        ("latency", "sglang_queue_time_seconds_mean"),
        ("latency", "sglang_ttft_mean_s"),
    ]
    ttft = catalog[-1]
    assert ttft.sources == ("sglang_time_to_first_token_seconds_sum", "sglang_time_to_first_token_seconds_count")
    assert {s for m in catalog for s in m.sources} == set(raw)  # every scraped name is charted by something


def _sample(ts: float, addr: str, metric: str, value: float, rank: str | None = None) -> EngineSample:
    return EngineSample(ts, addr, metric, {} if rank is None else {"dp_rank": rank}, value)


def test_series_per_engine_fold_dp_ranks_and_join_sum_with_count_per_rank() -> None:
    records = []
    for i in range(4):
        t = 100.0 + 10 * i
        for rank in ("0", "1"):
            records.append(
                _sample(t, "http://a", "sglang_e2e_request_latency_seconds_sum", 2.0 * i * (1 + int(rank)), rank)
            )
            records.append(_sample(t, "http://a", "sglang_e2e_request_latency_seconds_count", float(i), rank))
            records.append(_sample(t, "http://a", "sglang_token_usage", 0.2 + 0.2 * int(rank), rank))
        records.append(_sample(t, "http://b", "sglang_token_usage", 0.5))
    table = EngineTable(records)
    catalog = {m.name: m for m in metric_catalog(table.metrics())}
    e2e = catalog["sglang_e2e_latency_mean_s"]
    engine = metric_series(table, e2e)
    assert [(line.addr, line.dp_rank) for line in engine] == [("http://a", None)]
    assert engine[0].points.value.tolist() == [3.0, 3.0, 3.0]  # (2+4) seconds over 2 requests each interval
    ranks = metric_series(table, e2e, per_dp_rank=True)
    assert [line.dp_rank for line in ranks] == ["0", "1"]
    assert [line.points.value.tolist() for line in ranks] == [[2.0] * 3, [4.0] * 3]
    usage = metric_series(table, catalog["sglang_token_usage"])
    assert np.allclose([line.points.value[0] for line in usage], [0.3, 0.5])  # ranks averaged, as miles does
    assert exporters(table, catalog["sglang_token_usage"]) == (("http://a", "0"), ("http://a", "1"), ("http://b", None))
    assert [m.name for m in metrics_of(catalog.values(), table, "http://b")] == ["sglang_token_usage"]


def test_bins_weight_points_by_their_denominators() -> None:
    points = Points(np.array([1.0, 2.0, 9.0, 10.0]), np.array([10.0, 2.0, 4.0, 1.0]), np.array([5.0, 1.0, 2.0, 1.0]))
    edges = np.array([0.0, 5.0, 10.0])
    assert binned(edges, points).tolist() == [2.0, 5.0 / 3.0]
    assert math.isnan(binned(np.array([20.0, 30.0]), points)[0])
    assert latest(points, 0.0, 9.5) == 2.0 and latest(points, 11.0, 12.0) is None


def _write_hours(dashboard: Path) -> None:
    folder = dashboard / "engine_series"
    folder.mkdir(parents=True)
    base = 1787223600.0  # 2026-08-20 11:00 UTC
    for hour in range(3):
        lines = [
            json.dumps({"ts": base + 3600 * hour + 60 * i, "addr": "http://a", "metric": "sglang_num_requests_total",
                        "labels": {}, "value": float(hour * 60 + i)})
            for i in range(60)
        ]  # fmt: skip
        stamp = f"20260820_{11 + hour:02d}.jsonl"
        (folder / stamp).write_text("\n".join(lines) + "\n")


def test_a_window_opens_only_the_hours_it_touches(tmp_path: Path) -> None:
    _write_hours(tmp_path / "dashboard")
    hours = EngineHours(tmp_path / "dashboard")
    newest = hours.newest()
    assert newest == 1787223600.0 + 7200 + 59 * 60
    table = hours.table(newest - 600, None)
    assert [read for _, read in hours.hours_read()] == [False, False, True]
    line = metric_series(table, EngineMetric("sglang_requests_per_s", "counter", ("sglang_num_requests_total",)))[0]
    assert len(line.points.ts) == 10 and np.allclose(line.points.value, 1 / 60)
    whole = hours.table(None, None)
    assert [read for _, read in hours.hours_read()] == [True, True, True]
    assert len(whole.series("sglang_num_requests_total")[0].ts) == 180


def test_topology_gives_each_engine_its_gpus_in_the_window_and_activity_is_binned() -> None:
    from miles_tui.core.analysis.engine_lanes import engine_activity, engine_gpus
    from miles_tui.core.telemetry.stream_records import Snapshot

    snapshots = [
        Snapshot(0.0, {"engines": [{"addr": "http://a", "gpus": [["n1", 1], ["n1", 0]]}]}),
        Snapshot(
            50.0, {"engines": [{"addr": "http://a", "gpus": [["n2", 0]]}, {"addr": "http://c", "gpus": [["n3", 0]]}]}
        ),
        Snapshot(200.0, {"engines": [{"addr": "http://a", "gpus": [["n9", 0], ["bad"], ["n9", "x"]]}, "junk"]}),
        Snapshot(None, {"engines": []}),
    ]
    early = engine_gpus(snapshots, 10.0, 40.0)
    assert early.lanes == {"http://a": (("n1", 0), ("n1", 1))}
    window = engine_gpus(snapshots, 40.0, 100.0)
    assert window.lanes == {"http://a": (("n1", 0), ("n1", 1), ("n2", 0)), "http://c": (("n3", 0),)}
    late = engine_gpus(snapshots, 300.0, 400.0)
    assert late.lanes == {"http://a": (("n9", 0),)} and late.skipped == 3
    records = [_sample(t, "http://a", "sglang_num_running_reqs", v, rank) for t, v, rank in
               [(45.0, 2.0, "0"), (45.0, 3.0, "1"), (55.0, 7.0, "0"), (55.0, 1.0, "1")]]  # fmt: skip
    rows = engine_activity(EngineTable(records), np.array([40.0, 50.0, 60.0, 70.0]), window)
    assert [row.addr for row in rows] == ["http://a", "http://c"]
    assert rows[0].running.tolist()[:2] == [5.0, 8.0] and math.isnan(rows[0].running[2]) and rows[0].latest == 8.0
    assert rows[1].latest is None and rows[1].lanes == (("n3", 0),)
