"""The dashboard/ reader: the golden live_streams growth replayed flush by flush, hourly partitions
and time windows, meta.json rewrites, resets, and concurrent polls against a writer process."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from stream_writer import append_slowly

from miles_tui.core.base.tail import MalformedLineError
from miles_tui.core.telemetry import DashboardReader, Phase, export_metrics
from miles_tui.core.telemetry.metrics.metric_store import MetricRecord
from miles_tui.core.telemetry.partitions import HOUR_SECONDS
from miles_tui.core.telemetry.stream_records import DECODERS, GpuUtil, record_time
from miles_tui.core.telemetry.streams import SETTLED_EVERY, StreamsDelta

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
H0 = 1_787_220_000.0  # 2026-08-20T10:00Z


def _hour_name(hour: float) -> str:
    return time.strftime("%Y%m%d_%H", time.gmtime(hour)) + ".jsonl"


def _as_json(record: MetricRecord) -> str:
    """A metrics record as canonical JSON: equal text means equal raw values (1 and 1.0 differ)."""
    data = {"ts": record.ts, "step_key": record.step_key, "step": record.step, "metrics": dict(record.metrics)}
    return json.dumps(data, sort_keys=True)


def _canonical(line: str) -> str:
    return json.dumps(json.loads(line), sort_keys=True)


# --- the golden live_streams case -------------------------------------------------------------


class GoldenReplay:
    """live_streams copied into tmp_path, empty; ``grow`` appends each file up to a given size."""

    def __init__(self, tmp_path: Path) -> None:
        self.truth = json.loads((GOLDEN / "live_streams.truth.json").read_text())
        self.lines = [json.loads(line) for line in (GOLDEN / "live_streams.records.jsonl").read_text().splitlines()]
        self.flushes: list[dict[str, int]] = self.truth["meta"]["flushes"]
        self.run = tmp_path / "run"
        self.dashboard = self.run / "dashboard"
        self.dashboard.mkdir(parents=True)
        source = GOLDEN / "live_streams"
        for name in ("meta.json", "lane_catalog.json"):
            shutil.copyfile(source / "dashboard" / name, self.dashboard / name)
        self.content = {rel: (source / rel).read_bytes() for flush in self.flushes for rel in flush}

    def grow(self, sizes: dict[str, int]) -> None:
        for rel, size in sizes.items():
            path = self.run / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            have = path.stat().st_size if path.exists() else 0
            with open(path, "ab") as handle:
                handle.write(self.content[rel][have:size])

    def expected(self, prefix: str, flush: int | None = None) -> list[dict[str, Any]]:
        """Lines of the files under ``prefix`` (of one flush, or all), files in name order, each in line order."""
        chosen = [
            line for line in self.lines if line["file"].startswith(prefix) and (flush is None or line["flush"] == flush)
        ]
        return sorted(chosen, key=lambda line: (line["file"], line["line_no"]))

    def decoded(self, stream: str, flush: int | None = None) -> list[Any]:
        return [DECODERS[stream](json.loads(line["line"])) for line in self.expected(f"dashboard/{stream}/", flush)]


def test_golden_growth_flush_by_flush(tmp_path: Path) -> None:
    replay = GoldenReplay(tmp_path)
    reader = DashboardReader(replay.dashboard)
    metric_lines: list[str] = []
    for k, sizes in enumerate(replay.flushes):
        replay.grow(sizes)
        delta = reader.poll()
        assert not delta.problems and not delta.resets
        expected_metrics = [line["line"] for line in replay.expected("dashboard/metrics.jsonl", k)]
        got = [_as_json(reader.metrics.record(i)) for i in delta.metric_records]
        assert got == [_canonical(line) for line in expected_metrics], f"flush {k}"
        metric_lines += expected_metrics
        for stream in ("phases", "gpu_util"):
            assert list(delta.records.get(stream, ())) == replay.decoded(stream, k), f"flush {k} {stream}"
        assert reader.poll().is_empty  # nothing on disk changed: nothing reported twice

    assert [_as_json(reader.metrics.record(i)) for i in range(len(reader.metrics))] == [
        _canonical(line) for line in metric_lines
    ]
    for stream in ("phases", "gpu_util"):
        assert reader.records(stream) == replay.decoded(stream)
    dashboard = replay.truth["dashboard"]
    assert reader.record_counts() == dashboard["record_counts"]
    assert list(reader.metrics.keys()) == dashboard["metric_keys"]
    assert list(reader.metrics.step_keys()) == dashboard["step_keys"]
    assert reader.time_range() == pytest.approx(tuple(dashboard["time_range"]), abs=1e-5)
    exported = export_metrics(reader.metrics, list(dashboard["metric_series"]))["metrics"]
    for key, series in dashboard["metric_series"].items():
        assert (exported[key]["x_key"], exported[key]["step"]) == (series["x_key"], series["x"])
        assert exported[key]["value"] == pytest.approx(series["y"], abs=1e-5)
        assert exported[key]["ts"] == pytest.approx(series["ts"], abs=1e-5)
    assert reader.meta is not None and dict(reader.meta.raw) == dashboard["meta"]
    assert reader.meta.start_ts == dashboard["meta"]["start_ts"]


def test_golden_growth_cut_mid_line(tmp_path: Path) -> None:
    """Polls between flushes see files cut anywhere, mid-line too: nothing is lost or doubled."""
    replay = GoldenReplay(tmp_path)
    reader = DashboardReader(replay.dashboard)
    deltas: list[StreamsDelta] = []
    previous: dict[str, int] = {}
    for sizes in replay.flushes:
        for fraction in (0.3, 0.77):
            replay.grow({rel: previous.get(rel, 0) + int((size - previous.get(rel, 0)) * fraction) + 1
                         for rel, size in sizes.items() if size > previous.get(rel, 0)})  # fmt: skip
            deltas.append(reader.poll())
        replay.grow(sizes)
        deltas.append(reader.poll())
        previous = sizes
    assert not any(d.problems or d.resets for d in deltas)
    ranges = [i for d in deltas for i in d.metric_records]
    assert ranges == list(range(len(reader.metrics)))  # each metrics record reported once, in order
    metric_lines = replay.expected("dashboard/metrics.jsonl")
    assert [_as_json(reader.metrics.record(i)) for i in ranges] == [_canonical(m["line"]) for m in metric_lines]
    for stream in ("phases", "gpu_util"):
        reported = [r for d in deltas for r in d.records.get(stream, ())]
        assert Counter(reported) == Counter(replay.decoded(stream))
        assert len(reported) == replay.truth["dashboard"]["record_counts"][stream]
        assert reader.records(stream) == replay.decoded(stream)


# --- partitions and windows ----------------------------------------------------------------


def _gpu_line(ts: float, gpu: int = 0) -> bytes:
    return json.dumps({"ts": ts, "node": "n1", "gpu": gpu, "util": 50, "mem_mb": 1, "power_w": 2}).encode() + b"\n"


def _write_hours(dashboard: Path, hours: int, per_hour: int = 6) -> None:
    folder = dashboard / "gpu_util"
    folder.mkdir(parents=True, exist_ok=True)
    for h in range(hours):
        start = H0 + h * HOUR_SECONDS
        lines = [_gpu_line(start + i * HOUR_SECONDS / per_hour) for i in range(per_hour)]
        (folder / _hour_name(start)).write_bytes(b"".join(lines))


def test_recent_hours_and_window_queries_parse_only_what_they_need(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    _write_hours(dashboard, 5)
    (dashboard / "gpu_util.jsonl").write_bytes(_gpu_line(H0 - 10) + _gpu_line(H0 + 1.5 * HOUR_SECONDS, gpu=7))
    opened: list[str] = []
    reader = DashboardReader(dashboard, recent_hours=2, read_hook=lambda path, _offset: opened.append(path.name))
    delta = reader.poll()
    assert sorted(opened) == sorted(["gpu_util.jsonl", _hour_name(H0 + 3 * HOUR_SECONDS), _hour_name(H0 + 4 * 3600)])
    assert len(delta.records["gpu_util"]) == 2 + 2 * 6
    assert [p.loaded for p in reader.partitions("gpu_util")] == [True, False, False, False, True, True]
    assert reader.partitions("gpu_util")[0].hour is None  # the flat file: all time

    opened.clear()
    since, until = H0 + HOUR_SECONDS + 100, H0 + 2 * HOUR_SECONDS - 100
    window = reader.records("gpu_util", since, until)
    assert opened == [_hour_name(H0 + HOUR_SECONDS)]  # hour 1 only (the flat file was already read)
    assert all(isinstance(r, GpuUtil) and since <= r.ts <= until for r in window)
    assert [record_time(r) for r in window] == [
        H0 + 1.5 * HOUR_SECONDS,
        *(H0 + HOUR_SECONDS + i * 600 for i in range(1, 6)),
    ]
    assert reader.poll().is_empty  # a query's history is not reported as new
    assert reader.record_counts()["gpu_util"] == 2 + 3 * 6


def test_new_hourly_file_is_picked_up(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    _write_hours(dashboard, 1)
    reader = DashboardReader(dashboard, recent_hours=1)
    reader.poll()
    later = H0 + 7 * HOUR_SECONDS
    (dashboard / "gpu_util" / _hour_name(later)).write_bytes(_gpu_line(later) + b'{"ts": ')
    (dashboard / "gpu_util" / "notes.txt").write_text("ignored")
    delta = reader.poll()
    assert [record_time(r) for r in delta.records["gpu_util"]] == [later]
    assert [p.hour for p in reader.partitions("gpu_util")] == [H0, later]


def test_phases_are_partitioned_by_end_hour(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    (dashboard / "phases").mkdir(parents=True)
    spanning = {"name": "actor_train", "t0": H0 + 3500, "t1": H0 + 3700, "node": "n", "gpus": [0], "rank": 0}
    (dashboard / "phases" / _hour_name(H0 + HOUR_SECONDS)).write_text(json.dumps(spanning) + "\n")
    reader = DashboardReader(dashboard, recent_hours=0)
    assert reader.poll().is_empty
    assert reader.records("phases", H0, H0 + 3599) == []
    (phase,) = reader.records("phases", H0 + 3600, H0 + 7199)
    assert isinstance(phase, Phase) and (phase.t0, phase.t1, phase.gpus, phase.role) == (
        H0 + 3500,
        H0 + 3700,
        (0,),
        None,
    )


def test_settled_partitions_are_still_followed(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    _write_hours(dashboard, 4)
    reader = DashboardReader(dashboard)
    reader.poll()
    with open(dashboard / "gpu_util" / _hour_name(H0), "ab") as handle:
        handle.write(_gpu_line(H0 + 1))  # a late line, three hours behind the newest partition
    polls = [reader.poll() for _ in range(SETTLED_EVERY)]
    late = [r for d in polls for r in d.records.get("gpu_util", ())]
    assert [record_time(r) for r in late] == [H0 + 1]


# --- meta.json, resets, problems --------------------------------------------------------------


def test_meta_is_reread_when_a_resumed_run_rewrites_it(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    dashboard.mkdir()
    meta = dashboard / "meta.json"
    meta.write_text(json.dumps({"run_name": "r", "start_ts": 100.0, "args": {"a": 1}, "schema_version": 1}))
    reader = DashboardReader(dashboard)
    first = reader.poll()
    assert first.meta_changed and first.meta is not None and first.meta.start_ts == 100.0
    assert not reader.poll().meta_changed
    meta.write_text(json.dumps({"run_name": "r", "start_ts": 5000, "args": {}, "schema_version": 1, "new": True}))
    second = reader.poll()
    assert second.meta_changed and second.meta is not None and second.meta.start_ts == 5000
    assert second.meta.raw["new"] is True
    meta.write_text('{"run_name": "r", "start_')  # a non-atomic rewrite caught midway
    broken = reader.poll()
    assert not broken.meta_changed and broken.meta == second.meta
    assert len(broken.problems) == 1 and broken.problems[0].path == meta
    assert reader.poll().problems == ()  # reported once per version of the file


def test_rewritten_metrics_file_resets_the_store(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    dashboard.mkdir()
    path = dashboard / "metrics.jsonl"

    def line(step: int, value: float) -> str:
        return json.dumps({"ts": step, "step_key": "train/step", "step": step, "metrics": {"train/loss": value}})

    path.write_text("".join(line(i, 0.5) + "\n" for i in range(10)))
    reader = DashboardReader(dashboard)
    assert reader.poll().metric_records == range(10)
    path.write_text(line(0, 0.9) + "\n" + line(1, 0.8) + "\n")
    delta = reader.poll()
    assert delta.reset_streams == ("metrics",) and delta.resets[0].reason == "shrank"
    assert delta.metric_records == range(2) and delta.metric_keys == ("train/loss",)
    assert reader.metrics.points("train/loss", "train/step") == ([0, 1], [0.9, 0.8], [0, 1])


def test_malformed_lines_are_reported_and_reading_goes_on(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    folder = dashboard / "gpu_util"
    folder.mkdir(parents=True)
    good, early = _gpu_line(H0), b'{"ts": "soon", "node": "n", "gpu": 0}\n'
    (folder / _hour_name(H0)).write_bytes(good + early + b"garbage\n" + good)
    (dashboard / "metrics.jsonl").write_bytes(b'{"ts": 1, "step": 0, "metrics": {}}\n')
    reader = DashboardReader(dashboard)
    delta = reader.poll()
    assert len(delta.records["gpu_util"]) == 2
    offsets = {(Path(str(p.path)).name, p.offset) for p in delta.problems if isinstance(p, MalformedLineError)}
    assert offsets == {(_hour_name(H0), len(good)), (_hour_name(H0), len(good + early)), ("metrics.jsonl", 0)}
    assert sum(reader.malformed_counts().values()) == 3


# --- concurrency ---------------------------------------------------------------------------


def test_two_polls_from_the_same_stale_offset_do_not_duplicate(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    _write_hours(dashboard, 2, per_hour=50)
    state: dict[str, Any] = {}
    deltas: list[StreamsDelta] = []

    def hook(path: Path, offset: int) -> None:
        if "b" not in state and path.parent.name == "gpu_util":
            state["b"] = b = threading.Thread(target=lambda: deltas.append(reader.poll()))
            b.start()
            b.join(timeout=0.3)
            state["blocked"] = b.is_alive()

    reader = DashboardReader(dashboard, read_hook=hook)
    deltas.append(reader.poll())
    state["b"].join(timeout=5)
    assert state["blocked"]  # B waited for A's transaction instead of reading the same offset
    reported = [r for d in deltas for r in d.records.get("gpu_util", ())]
    assert len(reported) == 100 and len(set(reported)) == 100
    assert reader.records("gpu_util") == reported


def _plan(dashboard: Path, n: int) -> tuple[list[tuple[str, bytes]], list[bytes], list[bytes]]:
    """Interleaved metrics and gpu_util lines; the second hour's file appears halfway through."""
    plan, metrics, gpu = [], [], []
    for i in range(n):
        m = json.dumps({"ts": H0 + i, "step_key": "s", "step": i, "metrics": {"k": i / 7, "j": i}}).encode() + b"\n"
        ts = H0 + i * (2 * HOUR_SECONDS / n)
        g = _gpu_line(ts, gpu=i)
        plan += [(str(dashboard / "metrics.jsonl"), m), (str(dashboard / "gpu_util" / _hour_name(ts - ts % 3600)), g)]
        metrics.append(m)
        gpu.append(g)
    return plan, metrics, gpu


def _check_followed(
    reader: DashboardReader, deltas: list[StreamsDelta], metrics: list[bytes], gpu: list[bytes]
) -> None:
    assert not any(d.problems or d.resets for d in deltas)
    indices = sorted(i for d in deltas for i in d.metric_records)
    assert indices == list(range(len(metrics)))  # every record reported by exactly one poll
    assert [_as_json(reader.metrics.record(i)) for i in indices] == [_canonical(m.decode()) for m in metrics]
    reported = [r for d in deltas for r in d.records.get("gpu_util", ())]
    expected = [DECODERS["gpu_util"](json.loads(g)) for g in gpu]
    assert sorted(r.gpu for r in reported) == list(range(len(gpu)))  # type: ignore[union-attr]
    assert reader.records("gpu_util") == expected


def test_writer_process_against_poller_threads(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    plan, metrics, gpu = _plan(dashboard, 200)
    reader = DashboardReader(dashboard)
    deltas: list[StreamsDelta] = []
    writer = multiprocessing.get_context("spawn").Process(target=append_slowly, args=(plan, 3))
    writer.start()

    def poller() -> None:
        while writer.is_alive():
            deltas.append(reader.poll())

    threads = [threading.Thread(target=poller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    writer.join(timeout=60)
    assert writer.exitcode == 0
    deltas.append(reader.poll())
    _check_followed(reader, deltas, metrics, gpu)


async def test_writer_process_against_asyncio_pollers(tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard"
    plan, metrics, gpu = _plan(dashboard, 150)
    reader = DashboardReader(dashboard)
    deltas: list[StreamsDelta] = []
    writer = multiprocessing.get_context("spawn").Process(target=append_slowly, args=(plan, 5))
    writer.start()
    while writer.is_alive():
        deltas += await asyncio.gather(*(asyncio.to_thread(reader.poll) for _ in range(4)))
    writer.join(timeout=60)
    assert writer.exitcode == 0
    deltas.append(reader.poll())
    _check_followed(reader, deltas, metrics, gpu)


def test_phases_of_a_rank_share_one_gpu_list() -> None:
    """A run holds its phases for hours: a tuple per record was a third of a phase's memory."""
    from miles_tui.core.telemetry.stream_records import decode_phase

    line = {"name": "actor_train", "t0": 1.0, "t1": 2.0, "node": "n0", "gpus": [3, 4], "rank": 7, "role": "train"}
    first, second = decode_phase(dict(line)), decode_phase({**line, "t0": 5.0, "t1": 6.0})
    assert first.gpus == (3, 4) and first.gpus is second.gpus
    # A GPU list is GPU indices (small ints): anything else is a malformed line naming the field.
    for odd in ([1.0], [[1], {"a": 2}], [2**61 - 1], list(range(65)), "0,1"):
        with pytest.raises(ValueError, match="gpus"):
            decode_phase({**line, "gpus": odd})
    assert decode_phase({**line, "gpus": None}).gpus == ()


def test_only_ascii_hour_names_are_partitions() -> None:
    from miles_tui.core.telemetry.partitions import hour_of

    assert hour_of("20260820_10.jsonl") == 1787220000.0
    names = ("2026\uff10820_10.jsonl", "\u0662\u0660260820_10.jsonl", "20260820_1\u00b2.jsonl", "20260820-10.jsonl")
    for name in names:
        assert hour_of(name) is None, name
