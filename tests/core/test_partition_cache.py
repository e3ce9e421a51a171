"""Partition files as cached columns: a cached read equals a fresh parse of the same bytes, whatever the bytes.

Each property writes a stream's partition files as a writer (or an attacker) would, reads them through
:class:`HourStore` with an empty cache, again from the cache, and again with caching off, and compares every
field with what ``json.loads`` makes of each line, line by line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from miles_tui.core.analysis.engine_advisories import engine_figures, figures_from_digests
from miles_tui.core.analysis.stall_rule import (
    PHASE_NUMBERS,
    PHASE_SHARED,
    stalled_from_digests,
    stalled_phase_arrays,
)
from miles_tui.core.base import cache_dir
from miles_tui.core.telemetry.hours import decode as decode_module
from miles_tui.core.telemetry.hours import hour_workers, scan_decode
from miles_tui.core.telemetry.hours.columns import SPECS
from miles_tui.core.telemetry.hours.decode import decode
from miles_tui.core.telemetry.hours.engine_columns import engine_table
from miles_tui.core.telemetry.hours.gpu_buckets import gpu_buckets
from miles_tui.core.telemetry.hours.store import HourStore

HOUR = 1_787_220_000.0

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
number = st.one_of(st.integers(-(2**60), 2**60), finite, st.none(), st.just(float("nan")))
names = st.sampled_from(["actor_train", "rollout", "train_wait", "update_weights", "ẞ-phase"])
hosts = st.sampled_from(["10.0.0.1", "10.0.0.2", "node-3"])


def gpu_record(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {
        "ts": draw(st.floats(HOUR, HOUR + 3599)),
        "node": draw(hosts),
        "gpu": draw(st.integers(0, 7)),
        "util": draw(number),
        "mem_mb": draw(number),
        "power_w": draw(number),
    }
    if draw(st.booleans()):
        record["temp_c"] = draw(st.integers(20, 90))  # an AMD-style extra field
    return record


def phase_record(draw: st.DrawFn) -> dict[str, Any]:
    t0 = draw(st.floats(HOUR, HOUR + 3000))
    return {
        "name": draw(names),
        "t0": t0,
        "t1": draw(st.one_of(st.just(-1), st.floats(t0, t0 + 500))),
        "node": draw(st.one_of(hosts, st.none())),
        "gpus": draw(st.one_of(st.lists(st.integers(0, 7), max_size=4), st.none())),
        "rank": draw(st.one_of(st.integers(-1, 64), st.none())),
        "role": draw(st.sampled_from(["train", "rollout_manager", None])),
    }


def engine_record(draw: st.DrawFn) -> dict[str, Any]:
    labels = draw(st.one_of(st.none(), st.fixed_dictionaries({"dp_rank": st.sampled_from(["0", "1"])})))
    return {
        "ts": draw(st.floats(HOUR, HOUR + 3599)),
        "addr": draw(st.sampled_from(["http://a:1", "http://b:2", None])),
        "metric": draw(st.sampled_from(["sglang_num_running_reqs", "sglang:token_usage"])),
        "labels": labels,
        "value": draw(number),
    }


MAKERS = {"gpu_util": gpu_record, "phases": phase_record, "engine_series": engine_record}

hostile_lines = st.sampled_from(
    [
        "",
        "   ",
        "not json",
        "[1, 2]",
        '{"ts": NaN, "node": "a", "gpu": 1}',
        '{"ts": 1e400, "node": "a", "gpu": 1}',
        '{"ts": 5, "node": ["x"], "gpu": 1}',
        '{"ts": 5, "node": "a", "gpu": 1152921504606846975}',
        '{"name": {"a": 1}, "t0": 1, "t1": 2}',
        '{"name": "x", "t0": Infinity, "t1": 2}',
        '{"ts": 5, "metric": ["m"], "addr": "a"}',
        '{"ts": 5, "metric": "m", "labels": {"k": [1]}}',
        '{"ts": 5, "node": "a", "gpu": 1, "util": 1' + "0" * 400 + "}",
    ]
)


odd_lines = st.sampled_from(
    [
        '{"name": "x", "t0": 1, "t1": 2, "gpus": [1099511627776], "rank": 0}',
        '{"name": "x", "t0": 1, "t1": 2, "gpus": [0, 1], "rank": 1.5}',
        '{"name": "x", "t0": 1, "t1": 2, "gpus": "0", "rank": null}',
        '{"name": "x", "t0": 1, "t1": 2, "rank": null, "node": null}',
        '{"name": "x", "t0": 1, "t1": 2, "gpus": [0], "extra": [1, 2], "rank": 3}',
        '{"name": "x", "t0": 1, "t1": 2}',
        '{"name": "x", "t1": 2}',
        '{"name": "x", "t0": 1, "t1": 2, "rank": 12345678901234567}',
        '{"ts": 5, "metric": "m", "addr": null, "labels": {"dp_rank": "0"}, "value": 1e999}',
        '{"ts": 5, "metric": "m", "labels": {}, "value": 7}',
        '{"ts": 5, "metric": "m", "labels": {"k": "v", "j": 2}, "value": -0.0}',
        '{"ts": 5, "metric": "m", "labels": 3, "value": 1}',
        '{"ts": 5, "metric": "m"}',
        '{"ts": 5, "node": "a", "gpu": null, "util": 1}',
        '{"ts": 5, "node": "a", "gpu": 1.0, "util": 1}',
        '{"ts": 5, "node": "a", "gpu": -3, "util": true}',
        '{"ts": 5, "node": "a", "gpu": 2, "util": 1, "util": 2}',
        '{"ts":5,"node":"a","gpu":2,"util":1,"x":{"y":1}}',
    ]
)


@st.composite
def stream_file(draw: st.DrawFn, stream: str) -> bytes:
    """A partition's bytes: records in any of json.dumps' styles, some hostile lines, maybe a torn last line."""
    lines = []
    for _ in range(draw(st.integers(0, 40))):
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(hostile_lines))
            continue
        record = MAKERS[stream](draw)
        compact = draw(st.booleans())
        lines.append(json.dumps(record, separators=(",", ":") if compact else None, ensure_ascii=draw(st.booleans())))
    data = "".join(line + "\n" for line in lines).encode()
    if draw(st.booleans()):
        data += b'{"ts": 17872'  # a writer cut mid-line
    return data


def expected(stream: str, data: bytes) -> list[dict[str, Any]]:
    """What each complete line holds, for the lines :func:`decode` keeps (it alone judges validity here)."""
    end = data.rfind(b"\n") + 1
    columns, _ = decode(stream, data[: max(end - 1, 0)], 0, "x") if end else (None, [])
    if columns is None:
        return []
    return [{f: columns.value_of(f, r) for f in SPECS[stream].fields} for r in range(columns.size)]


def rows(store: HourStore) -> list[dict[str, Any]]:
    columns = store.columns()
    return [{f: columns.value_of(f, r) for f in SPECS[store.stream].fields} for r in range(columns.size)]


def same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), stream=st.sampled_from(sorted(MAKERS)))
def test_cached_columns_equal_a_fresh_parse(tmp_path: Path, data: st.DataObject, stream: str) -> None:
    run = Path(tempfile.mkdtemp(dir=tmp_path))
    folder = run / stream
    folder.mkdir(parents=True)
    files = [data.draw(stream_file(stream)) for _ in range(data.draw(st.integers(1, 3)))]
    for hour, content in enumerate(files):
        (folder / f"20260820_{hour:02d}.jsonl").write_bytes(content)
    first = HourStore(run, stream)
    first.refresh()
    fresh = rows(first)
    truth = [r for content in files for r in expected(stream, content)]
    assert same(fresh, truth)
    cached = HourStore(run, stream)  # settled hours come back from the cache
    cached.refresh()
    assert same(rows(cached), truth)
    assert cached.malformed_counts() == first.malformed_counts()
    with cache_dir.configured(off=True):
        uncached = HourStore(run, stream)
        uncached.refresh()
        assert same(rows(uncached), truth)


def test_a_torn_line_counts_once_when_its_newline_comes(tmp_path: Path) -> None:
    folder = tmp_path / "gpu_util"
    folder.mkdir()
    part = folder / "20260820_10.jsonl"
    part.write_bytes(b'{"ts": 1787220000, "node": "a", "gpu": 0, "util": 5}\n{"ts": 1787220001, "node": "a", "gp')
    store = HourStore(tmp_path, "gpu_util")
    store.refresh()
    assert store.records() == 1
    with open(part, "ab") as handle:
        handle.write(b'u": 1, "util": 7}\n')
    store.refresh()
    assert store.columns().column("util") == [5, 7]
    again = HourStore(tmp_path, "gpu_util")
    again.refresh()
    assert again.columns().column("util") == [5, 7]


def test_a_partition_rewritten_in_place_is_not_read_from_its_stale_entry(tmp_path: Path) -> None:
    folder = tmp_path / "phases"
    folder.mkdir()
    old = folder / "20260820_10.jsonl"
    newest = folder / "20260820_12.jsonl"
    line = '{{"name": "{}", "t0": 1787220000.5, "t1": 1787220010.5, "node": "a", "rank": 0, "role": "train"}}\n'
    old.write_text(line.format("rollout") * 50)
    newest.write_text(line.format("rollout"))
    store = HourStore(tmp_path, "phases")
    store.refresh()  # the settled hour is cached
    assert any(cache_dir.cache_root().rglob("manifest.json"))
    stat = old.stat()
    with open(old, "r+b") as handle:  # the same length, other bytes, the same inode
        handle.write(line.format("actor_t").encode() * 50)
    os.utime(old, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    reread = HourStore(tmp_path, "phases")
    reread.refresh()
    assert set(reread.columns().column("name")) == {"actor_t", "rollout"}


def test_a_vanished_partition_is_forgotten(tmp_path: Path) -> None:
    folder = tmp_path / "engine_series"
    folder.mkdir()
    for hour in (10, 11):
        line = {"ts": HOUR + hour * 3600, "addr": "a", "metric": "m", "value": hour}
        (folder / f"20260820_{hour}.jsonl").write_text(json.dumps(line) + "\n")
    store = HourStore(tmp_path, "engine_series")
    store.refresh()
    assert store.columns().column("value") == [10, 11]
    (folder / "20260820_10.jsonl").unlink()
    store.refresh()
    assert store.columns().column("value") == [11]


def test_an_hour_whose_columns_were_trimmed_still_gives_its_summaries(tmp_path: Path) -> None:
    folder = tmp_path / "gpu_util"
    folder.mkdir()
    for hour in (10, 11, 12):
        line = json.dumps({"ts": HOUR + (hour - 10) * 3600, "node": "a", "gpu": 0, "util": hour})
        (folder / f"20260820_{hour}.jsonl").write_text(line + "\n")
    HourStore(tmp_path, "gpu_util").refresh()  # settled hours cached: columns and summaries
    for entry in (cache_dir.cache_root() / "partitions").iterdir():  # the cap trimmed every hour's columns
        shutil.rmtree(entry)
    light = HourStore(tmp_path, "gpu_util", keep_columns=False)
    light.refresh()
    assert light.buckets(600.0).stats["util.max"].tolist() == [10.0, 11.0, 12.0]
    assert light.columns().column("util") == [10, 11, 12], "a window reads the file again"


def test_no_cache_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "gpu_util"
    folder.mkdir(parents=True)
    for hour in (10, 11):
        (folder / f"20260820_{hour}.jsonl").write_text('{"ts": 1787220000, "node": "a", "gpu": 0}\n')
    with cache_dir.configured(off=True):
        HourStore(tmp_path / "run", "gpu_util").refresh()
    assert not list(cache_dir.cache_root().rglob("*.npy"))


def test_only_the_hours_asked_for_are_read(tmp_path: Path) -> None:
    folder = tmp_path / "gpu_util"
    folder.mkdir()
    for hour in range(10, 14):
        (folder / f"20260820_{hour}.jsonl").write_text('{"ts": 1787220000, "node": "a", "gpu": 0}\n')
    (folder / "20260820_10.jsonl").chmod(0)  # a file a read would fail on (root reads it anyway)
    store = HourStore(tmp_path, "gpu_util", keep_columns=False)
    problems = store.refresh(newest=True)
    assert problems == []
    assert [read for _, _, read in store.partitions()] == [False, False, False, True]


def test_buckets_hold_the_exact_extremes_and_means_of_their_samples() -> None:
    lines = [
        json.dumps({"ts": HOUR + s, "node": "n", "gpu": s % 2, "util": float(s % 97), "mem_mb": s, "power_w": None})
        for s in range(0, 3600, 7)
    ]
    columns, bad = decode("gpu_util", "\n".join(lines).encode(), 0, "x")
    assert not bad
    buckets = gpu_buckets(columns, 600.0)
    ts, util, gpu = columns.numbers["ts"], columns.numbers["util"], columns.value_of
    for cell in range(buckets.cells):
        lane = buckets.lanes[int(buckets.lane[cell])]
        start = float(buckets.bucket[cell]) * 600.0
        mine = [r for r in range(columns.size) if gpu("gpu", r) == lane[1] and start <= ts[r] < start + 600.0]
        assert buckets.samples[cell] == len(mine)
        assert buckets.stats["util.max"][cell] == max(util[mine])
        assert buckets.stats["util.min"][cell] == min(util[mine])
        assert math.isclose(buckets.stats["util.sum"][cell] / buckets.stats["util.n"][cell], float(np.mean(util[mine])))
        assert buckets.stats["power_w.n"][cell] == 0 and math.isnan(buckets.stats["power_w.max"][cell])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_stall_rule_over_digests_equals_it_over_every_record(tmp_path: Path, data: st.DataObject) -> None:
    run = Path(tempfile.mkdtemp(dir=tmp_path))
    folder = run / "phases"
    folder.mkdir(parents=True)
    phases = []
    for _ in range(data.draw(st.integers(3, 40))):
        t0 = data.draw(st.sampled_from([HOUR + k * 1000.0 for k in range(10)]))
        name, rank = data.draw(st.sampled_from(["a", "b"])), data.draw(st.integers(0, 3))
        phases.append({"name": name, "t0": t0, "t1": -1, "node": "h", "rank": rank, "role": "train"})
        if data.draw(st.integers(0, 3)):
            t1 = t0 + data.draw(st.sampled_from([5.0, 60.0, 4000.0]))
            phases.append({"name": name, "t0": t0, "t1": t1, "node": "h", "rank": rank, "role": "train"})
    by_hour: dict[int, list[str]] = {}
    for phase in phases:  # the open marker in its start hour, the closing record in its end hour
        when = phase["t0"] if phase["t1"] == -1 else phase["t1"]
        by_hour.setdefault(int((when - HOUR) // 3600), []).append(json.dumps(phase))
    for hour, lines in by_hour.items():
        (folder / f"20260820_{10 + hour:02d}.jsonl").write_text("\n".join(lines) + "\n")
    digests = HourStore(run, "phases", keep_columns=False)
    digests.refresh()
    records = HourStore(run, "phases")
    records.refresh()
    arrays = records.columns().table_arrays(PHASE_NUMBERS, PHASE_SHARED)
    at = HOUR + data.draw(st.sampled_from([3000.0, 20_000.0, 200_000.0]))
    start = data.draw(st.sampled_from([None, HOUR + 2500.0]))
    assert stalled_from_digests(digests.phase_digests(), start, at) == stalled_phase_arrays(arrays, start, at)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), stream=st.sampled_from(sorted(MAKERS)))
def test_the_scanner_reads_every_stream_as_the_general_decoder_does(data: st.DataObject, stream: str) -> None:
    content = data.draw(stream_file(stream))
    if data.draw(st.booleans()):  # shapes the general decoder refuses or reads differently, beside good lines
        content = b"".join(line.encode() + b"\n" for line in data.draw(st.lists(odd_lines, max_size=6))) + content
    end = content.rfind(b"\n")
    if end < 0:
        return
    block = content[:end]
    scanned, scanned_bad = decode(stream, block, 7, "x")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decode_module, "SCANNER", False)
        general, general_bad = decode(stream, block, 7, "x")
    fields = SPECS[stream].fields
    assert same([{f: scanned.value_of(f, r) for f in fields} for r in range(scanned.size)],
                [{f: general.value_of(f, r) for f in fields} for r in range(general.size)])  # fmt: skip
    assert [(e.offset, e.reason) for e in scanned_bad] == [(e.offset, e.reason) for e in general_bad]


def test_hours_no_entry_covers_are_read_by_workers_and_come_back_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "phases"
    folder.mkdir()
    line = '{{"name": "rollout", "t0": {t0}, "t1": {t1}, "node": "a", "rank": 0, "role": "train"}}\n'
    for hour in range(10, 14):
        t0 = HOUR + (hour - 10) * 3600
        (folder / f"20260820_{hour}.jsonl").write_text(
            "".join(line.format(t0=t0 + i, t1=t0 + i + 0.5) for i in range(50))
        )
    monkeypatch.setattr(hour_workers, "PARALLEL_BYTES", 1)
    parallel = HourStore(tmp_path, "phases", workers=2)
    parallel.refresh()
    alone = HourStore(tmp_path, "phases")
    with cache_dir.configured(off=True):
        alone.refresh()
    assert same(rows(parallel), rows(alone)) and parallel.records() == 200
    summaries = list((cache_dir.cache_root() / "partition-summaries").glob("*/manifest.json"))
    assert len(summaries) == 4, "each worker saved its hour"


def test_report_reads_phases_and_engines_in_one_pool_and_saves_their_summaries_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    phase = '{{"name": "{name}", "t0": {t0}, "t1": {t1}, "node": "a", "rank": {rank}, "role": "train"}}\n'
    scrape = '{{"ts": {ts}, "addr": "http://e{e}", "metric": "{m}", "labels": {{}}, "value": {v}}}\n'
    for hour in range(10, 14):
        t0 = HOUR + (hour - 10) * 3600
        lines = [phase.format(name=n, t0=t0 + i, t1=t0 + i + 0.5, rank=i % 3) for i in range(60) for n in ("a", "b")]
        lines.append(phase.format(name="a", t0=t0 + 3599, t1=-1.0, rank=hour))  # open past the hour
        if hour > 10:
            lines.append(phase.format(name="a", t0=t0 - 1, t1=t0 + 5, rank=hour - 1))  # closes the hour before's
        for stream, body in (("phases", lines), ("engine_series", [
            scrape.format(ts=t0 + 15 * i, e=e, m=m, v=i + e)
            for i in range(40) for e in range(2) for m in ("sglang_num_running_reqs", "sglang_num_requests_total")
        ])):  # fmt: skip
            (tmp_path / stream).mkdir(exist_ok=True)
            (tmp_path / stream / f"20260820_{hour}.jsonl").write_text("".join(body))
    monkeypatch.setattr(hour_workers, "PARALLEL_BYTES", 1)
    phases = HourStore(tmp_path, "phases", keep_columns=False, save_columns=False)
    engines = HourStore(tmp_path, "engine_series", keep_columns=False, save_columns=False)
    with hour_workers.refreshing_together((phases, engines), 2) as problems:
        pass
    assert problems == []
    with cache_dir.configured(off=True):
        fresh_phases, fresh_engines = HourStore(tmp_path, "phases"), HourStore(tmp_path, "engine_series")
        fresh_phases.refresh()
        fresh_engines.refresh()
    assert [(d.opens, d.closes) for d in phases.phase_digests()] == [
        (d.opens, d.closes) for d in fresh_phases.phase_digests()
    ]
    assert len(phases.phase_digests()) == 4 and sum(len(d.opens) for d in phases.phase_digests()) == 4
    assert _close(figures_from_digests(engines.engine_digests()), figures_from_digests(fresh_engines.engine_digests()))
    root = cache_dir.cache_root()
    assert len(list((root / "partition-summaries").glob("*/manifest.json"))) == 8, "every hour a worker read"
    assert not list((root / "partitions").glob("*/manifest.json")), "and no columns: report reads none"
    viewer = HourStore(tmp_path, "phases")  # a view that reads columns reads the files once more, then keeps them
    viewer.refresh()
    assert same(rows(viewer), rows(fresh_phases))
    assert len(list((root / "partitions").glob("*/manifest.json"))) == 3


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a) and type(a) is type(b):
        return all(_close(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return bool(a == b)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_engine_figures_from_hourly_digests_equal_those_of_every_record(tmp_path: Path, data: st.DataObject) -> None:
    run = Path(tempfile.mkdtemp(dir=tmp_path))
    folder = run / "engine_series"
    folder.mkdir()
    metrics = ["sglang_num_running_reqs", "sglang:token_usage", "sglang_cache_hit_rate", "sglang_num_requests_total",
               "sglang_num_aborted_requests_total"]  # fmt: skip
    counters: dict[tuple[str, str], float] = {}
    for hour in range(data.draw(st.integers(1, 4))):
        lines = []
        for scrape in range(data.draw(st.integers(0, 12))):
            ts = HOUR + hour * 3600 + scrape * 15.0
            for addr in data.draw(st.lists(st.sampled_from(["http://a:1", "http://b:2"]), min_size=1, unique=True)):
                for metric in metrics:
                    ranks = data.draw(st.sampled_from([[None], ["0", "1"]]))
                    for rank in ranks:
                        if "total" in metric:  # a counter: grows, now and then resets (a restart)
                            key = (addr, metric + str(rank))
                            step = data.draw(st.sampled_from([0.0, 3.0, 50.0, -1.0]))
                            counters[key] = 0.0 if step < 0 else counters.get(key, 0.0) + step
                            value: Any = counters[key]
                        else:
                            value = data.draw(st.one_of(st.floats(0, 150), st.integers(0, 300), st.none()))
                        labels = None if rank is None else {"dp_rank": rank}
                        lines.append(
                            json.dumps({"ts": ts, "addr": addr, "metric": metric, "labels": labels, "value": value})
                        )
        (folder / f"20260820_{10 + hour:02d}.jsonl").write_text("".join(line + "\n" for line in lines))
    store = HourStore(run, "engine_series")
    store.refresh()
    whole = engine_figures(engine_table(store.columns()))
    digested = figures_from_digests(store.engine_digests())
    assert digested is not None and _close(whole, digested)


def test_hundreds_of_line_shapes_are_all_read_by_the_scanner() -> None:
    """A phase per rank on 128 GPUs: every line's shape is learned and found (the general decoder reads none)."""
    if not scan_decode.AVAILABLE:
        pytest.skip("the compiled scanner is not built")
    lines = []
    for rank in range(128):
        for name in ("rollout", "actor_train", "train_wait", "update_weights"):
            t0 = HOUR + rank + len(name) / 7
            record = {"name": name, "t0": t0, "t1": t0 + 2.5, "node": f"10.0.{rank // 8}.1", "gpus": [rank % 8],
                      "rank": rank, "role": "train"}  # fmt: skip
            lines.append(json.dumps(record, separators=(",", ":")))
    block = "\n".join(lines * 2).encode()
    scanned = scan_decode.scan_columns("phases", block, 0)
    assert scanned.unmatched == [] and scanned.columns.size == len(lines) * 2
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decode_module, "SCANNER", False)
        general, _ = decode("phases", block, 0, "x")
    fields = SPECS["phases"].fields
    assert same([{f: scanned.columns.value_of(f, r) for f in fields} for r in range(general.size)],
                [{f: general.value_of(f, r) for f in fields} for r in range(general.size)])  # fmt: skip


def test_a_flat_gpu_file_joins_only_the_windows_its_samples_fall_in(tmp_path: Path) -> None:
    """A legacy flat ``gpu_util.jsonl`` spans every window by name; its samples' span decides (its 460k rows
    were joined to every 15 min view of the week's run). What a window's caller keeps is unchanged."""
    folder = tmp_path / "gpu_util"
    folder.mkdir()
    (tmp_path / "gpu_util.jsonl").write_text(
        "".join(json.dumps({"ts": HOUR - 7200 + i, "node": "old", "gpu": 0, "util": 1}) + "\n" for i in range(50))
    )
    (folder / "20260820_10.jsonl").write_text(
        "".join(json.dumps({"ts": HOUR + i, "node": "a", "gpu": 0, "util": 9}) + "\n" for i in range(30))
    )
    store = HourStore(tmp_path, "gpu_util")
    store.refresh()
    in_hour = store.columns(HOUR + 5, HOUR + 20)
    assert set(in_hour.column("node")) == {"a"} and in_hour.size == 30  # the flat file's rows are not joined
    both = store.columns(HOUR - 7200 + 10, HOUR + 20)
    assert both.column("node").count("old") == 50 and both.size == 80
    assert store.columns().size == 80
    phases = HourStore(tmp_path, "phases")  # intervals: kept by name (a phase may straddle the window)
    phases.refresh()
    assert phases.columns(HOUR + 5, HOUR + 20).size == 0


def test_a_whole_run_read_caches_summaries_alone_and_a_window_then_caches_its_hours_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole-run GPU view reads every hour's buckets only: its workers save no columns (on 14 days they were
    gigabytes past the cache's cap). A window later reads its hours' files again, once: then their columns are
    cached too."""
    folder = tmp_path / "gpu_util"
    folder.mkdir()
    for hour in range(10, 14):
        lines = [
            json.dumps({"ts": HOUR + (hour - 10) * 3600 + s, "node": "a", "gpu": g, "util": (s + g) % 100})
            for s in range(0, 3600, 20)
            for g in range(2)
        ]
        (folder / f"20260820_{hour}.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(hour_workers, "PARALLEL_BYTES", 1)
    store = HourStore(tmp_path, "gpu_util", keep_columns=False, workers=2)
    store.refresh(columns=False)
    root = cache_dir.cache_root()
    assert len(list((root / "partition-summaries").glob("*/manifest.json"))) == 4
    assert not list((root / "partitions").glob("*/manifest.json")), "no columns for a whole-run read"
    with cache_dir.configured(off=True):
        fresh = HourStore(tmp_path, "gpu_util")
        fresh.refresh()
    assert store.buckets(600.0).stats["util.max"].tolist() == fresh.buckets(600.0).stats["util.max"].tolist()
    since, until = HOUR + 3600, HOUR + 2 * 3600 - 1
    store.refresh(since, until)
    window = store.columns(since, until)
    assert window.column("util") == fresh.columns(since, until).column("util")
    assert len(list((root / "partitions").glob("*/manifest.json"))) == 1, "the hour read again keeps its columns"
    again = HourStore(tmp_path, "gpu_util", keep_columns=False)
    again.refresh(since, until)
    assert again.columns(since, until).column("util") == window.column("util")
