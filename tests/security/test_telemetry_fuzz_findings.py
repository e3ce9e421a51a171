"""What the telemetry fuzzer found (``test_telemetry_fuzz.py``), each kept as the smallest input that shows it."""

from __future__ import annotations

import json
import math
import shutil
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.analysis.engine_view import engine_view
from miles_tui.core.analysis.stream_advisories import stream_advisories
from miles_tui.core.dump import RunDir
from miles_tui.core.follow import RunFollower
from miles_tui.core.telemetry import EngineSample, EngineTable, TelemetryColumns, TimeWindow, frame
from miles_tui.core.telemetry.hours.decode import decode
from miles_tui.core.telemetry.hours.phase_cover import MAX_CELLS, _sparse_cover, phase_cover
from miles_tui.core.telemetry.hours.scan_decode import AVAILABLE as SCANNER
from miles_tui.core.telemetry.hours.scan_decode import MAX_TEMPLATES, templates_for
from miles_tui.core.telemetry.metrics.metric_batch import decode_block
from miles_tui.core.telemetry.stream_records import decode_engine_sample, decode_gpu_util, decode_meta, decode_phase
from miles_tui.core.telemetry.time_bins import time_bins
from miles_tui.tui.runtime.stream_watch import FOLLOWED_STREAMS, STREAM_HOURS, StreamWatch
from tests.conftest import GOLDEN
from tests.security.fuzzing import MERSENNE

T = 1787223000.0
PHASE = b'{"name":"actor_train","t0":1787223001.0,"t1":1787223002.0,"node":"n","gpus":[1],"rank":1,"role":"train"}'
NOT_UTF8 = PHASE.replace(b'"gpus"', b'"gpu\xd0"')
"""A member the record does not use, whose name is not UTF-8 (a flipped byte): msgspec skips it unread."""


def test_a_line_that_is_not_utf8_is_malformed_whatever_its_neighbours() -> None:
    """The general decoder took the line when the block decoded in one call and refused it when a neighbour
    sent the block line by line, so the GPU view's phase rows depended on other lines (and on the scanner)."""
    for block, where in ((NOT_UTF8, 0), (PHASE + b"\n" + NOT_UTF8, len(PHASE) + 1), (NOT_UTF8 + b"\n" + PHASE, 0)):
        columns, bad = decode("phases", block, 0, "phases/20260820_10.jsonl")
        assert columns.size == block.count(b"\n")  # the good line only
        reason = f"not valid UTF-8 (byte {NOT_UTF8.index(0xD0)} of the line)"
        assert [(b.offset, b.reason) for b in bad] == [(where, reason)]


def _gpu_line(ts: float, gpu: int) -> str:
    return json.dumps({"ts": ts, "node": "n", "gpu": gpu, "util": 50, "mem_mb": 1000, "power_w": 300})


def test_malformed_lines_of_the_newest_gpu_hour_stay_in_the_advisories(tmp_path: Path) -> None:
    """The monitor keeps the last 20 problems; the follower's own GPU hour gave no running count, so its
    malformed lines left the advisories once more than 20 other problems came after them."""
    dashboard = tmp_path / "run" / "dashboard"
    (dashboard / "gpu_util").mkdir(parents=True)
    hour = dashboard / "gpu_util" / "20260820_10.jsonl"
    hour.write_text("\n".join([_gpu_line(T, 0), '{"ts": NaN, "node": "n", "gpu": 0}', _gpu_line(T + 10, 1)]) + "\n")
    follower = RunFollower(tmp_path / "run", recent_hours=STREAM_HOURS, streams=FOLLOWED_STREAMS)
    delta = follower.poll(T + 60)
    assert [p.path for p in delta.problems] == [hour]
    advisories = stream_advisories(follower, T + 60, problems=())  # the problems are gone from the caller's list
    (advisory,) = [a for a in advisories if a.code == "malformed_stream_lines"]
    assert advisory.path == hour and "1 malformed line skipped" in advisory.message
    assert follower.state().malformed_lines == 1


def test_a_name_holding_a_lone_surrogate_reads_through_the_scanner() -> None:
    """``"\\ud800"`` is valid JSON; the template learned from it was encoded as UTF-8, which has no lone
    surrogates: UnicodeEncodeError out of the scanner's learning, for the whole hour (a traceback in report)."""
    line = json.dumps({"ts": T, "node": "a\ud800", "gpu": 0, "util": 1, "mem_mb": 2, "power_w": 3}).encode()
    for separators in ((", ", ": "), (",", ":")):
        other = json.dumps({"ts": T, "node": "\ud800", "gpu": 1}, separators=separators).encode()
        columns, bad = decode("gpu_util", line + b"\n" + other, 0, "gpu_util/20260820_10.jsonl")
        assert not bad and columns.column("node") == ["a\ud800", "\ud800"]


def test_a_metrics_line_nested_past_the_recursion_limit_is_malformed() -> None:
    """msgspec raises RecursionError (not DecodeError) on deep nesting, even in a member it skips: the metrics
    decoder let it out, and report, export --metrics and the monitor's metrics poll died."""
    good = b'{"ts": 1787223000.0, "step_key": "train/step", "step": 1, "metrics": {"train/loss": 0.5}}'
    deep = good[:-1] + b', "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    batch, bad = decode_block(good + b"\n" + deep + b"\n" + good, 0)
    assert len(batch) == 2
    assert [(b.offset, b.reason) for b in bad] == [(len(good) + 1, "nested too deeply to parse")]


@pytest.mark.parametrize("ts", [1e300, -5.0, 2.0**34, "1787223000"])
def test_a_time_outside_the_epoch_range_is_malformed_in_every_decoder(ts: Any) -> None:
    """A finite ts of 1e300 passed as a time: the GPU view's bucket arithmetic overflowed (OverflowError from the
    merge of two hours' buckets, for the whole view) and its cast to int64 was garbage."""
    line = json.dumps({"ts": ts, "node": "n", "gpu": 0, "util": 1})
    with pytest.raises(ValueError, match=r"'ts' is not a (time|number)"):
        decode_gpu_util(json.loads(line))
    columns, bad = decode("gpu_util", (_gpu_line(T, 1) + "\n" + line).encode(), 0, "gpu_util/20260820_10.jsonl")
    assert columns.size == 1 and len(bad) == 1
    assert "'ts' is not a time" in bad[0].reason or "'ts' is not a number" in bad[0].reason


def test_an_open_phase_keeps_its_minus_one_and_only_t1_may_hold_it() -> None:
    phase = json.loads(PHASE)
    assert decode_phase({**phase, "t1": -1}).is_open
    with pytest.raises(ValueError, match="'t0' is not a time"):
        decode_phase({**phase, "t0": -1})
    block = b"\n".join(json.dumps({**phase, **change}).encode() for change in ({"t1": -1}, {"t0": -1}))
    columns, bad = decode("phases", block, 0, "phases/20260820_10.jsonl")
    assert columns.column("t1") == [-1] and [b.reason for b in bad] == [
        "field 't0' is not a time (seconds since the epoch, from 0 to 2**34)"
    ]


def test_the_gpu_view_of_an_hour_with_an_absurd_time_draws_the_rest(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    (dashboard / "gpu_util").mkdir(parents=True)
    (dashboard / "gpu_util" / "20260820_10.jsonl").write_text(_gpu_line(T, 0) + "\n")
    (dashboard / "gpu_util" / "20260820_11.jsonl").write_text(
        _gpu_line(T + 3600, 0) + "\n" + _gpu_line(1e300, 0) + "\n"
    )
    columns = TelemetryColumns(dashboard)
    cells = columns.gpu_cells(T - 3600, T + 7200, 60.0)
    assert cells.lanes == (("n", 0),) and len(cells.ts) == 2


def test_learning_templates_costs_the_same_per_new_name() -> None:
    """Every host is literal in a template: a flood of distinct hosts taught one template per line, each checked
    against every one known and rendered in up to eight styles before the line's own. Three blocks of 4,000
    distinct hosts took 3.6 s, 14 s, then 0.8 s (the table full); now 0.15, 0.23 and 0.04 s."""
    if not SCANNER:
        pytest.skip("the scanner is not built")
    known = len(templates_for("gpu_util").known)
    started = time.perf_counter()
    for block in range(3):
        lines = [_gpu_line(T + k, 0).replace('"node": "n"', f'"node": "host-{block}-{k}"') for k in range(4000)]
        columns, bad = decode("gpu_util", "\n".join(lines).encode(), 0, "gpu_util/20260820_10.jsonl")
        assert columns.size == 4000 and not bad
    elapsed = time.perf_counter() - started
    assert len(templates_for("gpu_util").known) >= min(known + 8000, MAX_TEMPLATES)  # it did learn them
    assert elapsed < 5.0, f"{elapsed:.1f} s to read 12,000 lines of distinct hosts"


@pytest.mark.parametrize("start", [math.nan, math.inf, 1e300, -1.0])
def test_a_meta_start_that_is_no_time_is_no_attempt_start(start: float) -> None:
    """json.loads reads NaN: an attempt that started at NaN made every open phase compare false with it, so the
    follower counted none as open (no stall advisory, no open rows) for the whole run."""
    assert decode_meta({"run_name": "r", "start_ts": start}).start_ts is None
    assert decode_meta({"run_name": "r", "start_ts": T}).start_ts == T


def test_the_monitor_holds_no_stream_that_no_view_reads(tmp_path: Path) -> None:
    """The monitor followed trajectories, topology and data_buffer record by record and no view read them: a
    20 MB topology.jsonl of empty objects took it to 1 GB (7 million records held)."""
    dashboard = tmp_path / "run" / "dashboard"
    (dashboard / "trajectories").mkdir(parents=True)
    for path in ("topology.jsonl", "data_buffer.jsonl", "trajectories/20260820_10.jsonl"):
        (dashboard / path).write_bytes(b"{}\n" * 100_000)
    (dashboard / "engine_series").mkdir()
    (dashboard / "engine_series" / "20260820_10.jsonl").write_text(
        json.dumps({"ts": T, "addr": "http://e", "metric": "sglang_num_running_reqs", "labels": {}, "value": 1}) + "\n"
    )
    watch = StreamWatch(RunDir(tmp_path / "run"))
    watch.poll_blocking(T + 60)
    counts = watch.follower.dashboard.record_counts()
    assert counts["engine_series"] == 1
    assert counts["trajectories"] == counts["topology"] == counts["data_buffer"] == 0


def test_the_engines_view_costs_the_same_per_engine() -> None:
    """Each engine's panels filtered every series of a metric for that engine: 4,000 engines (one scrape each)
    took 9.7 s to lay out, 12,000 (1.2 MB of engine_series) over a minute. Now an index per metric: 1 s."""
    metrics = ("sglang_num_running_reqs", "sglang_num_requests_total")
    samples = [EngineSample(T + k / 100, f"http://e{k}", m, {}, 1.0) for k in range(4000) for m in metrics]
    started = time.perf_counter()
    view = engine_view(EngineTable(samples), time_bins(T, T + 60, 60), now=T + 60, span=None)
    elapsed = time.perf_counter() - started
    assert len(view.engines) == 4000 and view.engines[7].addr == "http://e7"
    assert view.engines[7].panels["sglang_num_running_reqs"].latest == 1.0
    assert elapsed < 4.0, f"{elapsed:.1f} s to lay out 4,000 engines"


@pytest.mark.parametrize("value", [MERSENNE * 3, -(2**40), [1], {"a": 1}, "x" * 300])
def test_a_label_value_is_a_short_scalar(value: Any) -> None:
    """Label sets key the engines' series: labels {"dp_rank": k·(2**61−1)} all hashed alike, and 12,000 such
    lines (1.2 MB) took 51 s to group."""
    line = {"ts": T, "addr": "http://e", "metric": "sglang_num_running_reqs", "labels": {"dp_rank": value}, "value": 1}
    with pytest.raises(ValueError, match="label 'dp_rank' is not a short scalar"):
        decode_engine_sample(line)
    columns, bad = decode("engine_series", json.dumps(line).encode(), 0, "engine_series/20260820_10.jsonl")
    assert columns.size == 0 and [b.reason for b in bad] == ["field 'labels': label 'dp_rank' is not a short scalar"]
    assert (
        decode_engine_sample({**line, "labels": {"dp_rank": 3, "tp": "0", "ok": True, "f": 0.5}}).labels["dp_rank"] == 3
    )


def test_an_empty_newest_gpu_hour_leaves_the_live_window_at_the_last_samples(tmp_path: Path) -> None:
    """A stopped run's live window ends at its newest sample; an empty newest hour (a writer that opened it and
    died, or a file named for the year 2099) made the run's extent None, and the GPU view drew nothing."""
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "live_streams", run)
    before = TelemetryColumns(run / "dashboard").extent()
    assert before is not None
    for name in ("20260820_12.jsonl", "20991231_23.jsonl"):
        (run / "dashboard" / "gpu_util" / name).write_text("")
        columns = TelemetryColumns(run / "dashboard")
        assert columns.extent() == before
        shown = frame(TimeWindow(900.0, None), before[1] + 3600, *before)
        assert shown.anchored_to_data and len(columns.gpu_samples(shown.since, shown.until).ts) > 0


def test_a_metrics_line_that_is_not_utf8_is_malformed() -> None:
    """msgspec skips a member the record does not name without checking its bytes: a metrics line json.loads
    refuses (the tail's rule) was taken."""
    good = b'{"ts": 1787223000.0, "step_key": "train/step", "step": 1, "metrics": {"train/loss": 0.5}}'
    line = good[:-1] + b', "x\xd0": 1}'
    batch, bad = decode_block(good + b"\n" + line + b"\n" + good, 0)
    assert len(batch) == 2
    assert [(b.offset, b.reason) for b in bad] == [
        (len(good) + 1, f"not valid UTF-8 (byte {line.index(0xD0)} of the line)")
    ]


def _phase_columns(spans: list[tuple[str, float, float]]) -> Any:
    lines = [json.dumps({**json.loads(PHASE), "name": name, "t0": t0, "t1": t1}) for name, t0, t1 in spans]
    columns, bad = decode("phases", "\n".join(lines).encode(), 0, "phases/20260820_10.jsonl")
    assert not bad
    return columns


def test_an_hour_of_many_phases_over_a_week_has_a_bounded_cover() -> None:
    """The zoomed-out cover was one table of (rank and phase) × buckets: 6,000 phases of distinct names (940 KB)
    in an hour that also holds a week-long phase made 6,000 × 10,098 cells, 463 MiB per width (a MemoryError
    under the fuzzer's 512 MB). Now only the cells a span touches, at most MAX_CELLS."""
    spans = [(f"n{k}", T, T + 5436.0) for k in range(6000)] + [("rollout", T - 7 * 86400, T)]
    columns = _phase_columns(spans)
    tracemalloc.start()
    try:
        cover = phase_cover(columns, 60.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20, f"{peak / 2**20:.0f} MiB to cover the hour"
    assert len(cover.seconds) == 6000 * 91 + 7 * 1440  # each span's own buckets, no more
    assert math.isclose(float(cover.seconds.sum()), 6000 * 5436.0 + 7 * 86400, rel_tol=1e-9)
    far = phase_cover(_phase_columns([("a", 0.0, 1.0), ("b", 2.0**34 - 2, 2.0**34 - 1)]), 60.0)
    assert far.bucket.tolist() == [0, int((2.0**34 - 2) // 60)] and far.seconds.tolist() == [1.0, 1.0]
    flood = phase_cover(_phase_columns([(f"n{k}", T, T + 7 * 86400) for k in range(1000)]), 60.0)
    assert len(flood.seconds) <= MAX_CELLS


def test_the_sparse_cover_is_the_table_s() -> None:
    """Both ways of making a cover give the same cells, in the same order, and the same seconds."""
    rng = np.random.default_rng(7)
    spans = []
    for k in range(300):
        t0 = T + float(rng.uniform(0, 7200))
        spans.append((f"p{k % 37}", t0, t0 + float(rng.choice([0.5, 30.0, 61.0, 600.0, 4000.0]))))
    columns = _phase_columns(spans)
    for width in (60.0, 600.0):
        dense = phase_cover(columns, width)
        t0, t1 = columns.numbers["t0"], columns.numbers["t1"]
        key = np.array([dense.pairs.index((p[0], p[1], p[2], p[3], p[4])) for p in _keys(columns)], np.int64)
        pair, bucket, seconds = _sparse_cover(key, t0, t1, width)
        assert pair.tolist() == dense.pair.tolist() and bucket.tolist() == dense.bucket.tolist()
        assert np.allclose(seconds, dense.seconds, rtol=1e-12, atol=1e-9)


def _keys(columns: Any) -> list[Any]:
    values = columns.values
    fields = [columns.codes[name].tolist() for name in ("role", "name", "node", "rank", "gpus")]
    return [
        (values[r], values[n], values[h], values[k], tuple(values[g] or ()))
        for r, n, h, k, g in zip(*fields, strict=True)
    ]


def test_a_metrics_step_no_float_holds_is_malformed_on_every_path() -> None:
    """msgspec reads a 402-digit step as an int, and the decoder's fast path checked only ts: the line was taken
    where the checked path (a block that is not UTF-8, or no scanner) refused it, so the two disagreed."""
    good = b'{"ts": 1787223000.0, "step_key": "train/step", "step": 1, "metrics": {"train/loss": 0.5}}'
    line = good.replace(b'"step": 1', b'"step": 3' + b"0" * 401)
    for block in (line, good + b"\n" + line, good + b"\n" + line + b"\n\xff"):
        batch, bad = decode_block(block, 0)
        assert len(batch) == block.count(b'"ts"') - 1
        assert [b.reason for b in bad][:1] == ["integer of 402 digits: too big for a float64"]


def test_a_broken_meta_json_stays_in_the_advisories_past_a_burst_of_malformed_lines(tmp_path: Path) -> None:
    """The monitor keeps the last 20 problems; meta.json's (said once) was pushed out by the malformed lines read
    after it, so its advisory came and went with how many hours the cache had already read."""
    dashboard = tmp_path / "run" / "dashboard"
    dashboard.mkdir(parents=True)
    (dashboard / "meta.json").write_text('{"run_name": "x')
    good = '{"ts": 1787223000.0, "step_key": "train/step", "step": 1, "metrics": {"train/loss": 0.5}}'
    (dashboard / "metrics.jsonl").write_text("\n".join([good, *["{oops"] * 30]) + "\n")
    watch = StreamWatch(RunDir(tmp_path / "run"))
    codes = [a.code for a in watch.poll_blocking(T + 60).advisories]
    assert "stream_unreadable" in codes and "malformed_stream_lines" in codes


def test_the_engines_view_costs_what_each_engine_has() -> None:
    """Each engine's restarts and last scrape looked up every metric of the run: 6,000 engines beside 6,000
    metric names (1.7 MB of engine_series) took a minute to lay out. Now each engine's own metrics."""
    samples = [EngineSample(T + k, f"http://e{k}", f"sglang_m{k}_total", {}, 1.0) for k in range(3000)]
    started = time.perf_counter()
    view = engine_view(EngineTable(samples), time_bins(T, T + 3600, 60), now=T + 3600, span=None)
    elapsed = time.perf_counter() - started
    assert len(view.engines) == 3000 and view.engines[5].last_seen == T + 5
    assert elapsed < 3.0, f"{elapsed:.1f} s to lay out 3,000 engines of 3,000 metrics"
