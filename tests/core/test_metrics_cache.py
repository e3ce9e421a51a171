"""The telemetry cache: a re-open reads only the bytes after what the user cache holds; a shrunk, rewritten or
replaced file, a damaged entry, or --no-cache never serves a stale record; the cache is never in the run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core.base import cache_dir
from miles_tui.core.telemetry import DashboardReader
from miles_tui.core.telemetry.metrics import metric_cache


def _line(i: int, **extra: Any) -> bytes:
    metrics = {"train/loss": 1 / (i + 1), "train/step": i, "nan": float("nan") if i % 7 == 0 else 0.5, **extra}
    return json.dumps({"ts": 1000.0 + i, "step_key": "train/step", "step": i, "metrics": metrics}).encode() + b"\n"


def _records(reader: DashboardReader) -> list[str]:
    store = reader.metrics
    return [json.dumps(store.record(i).__dict__, sort_keys=True, default=dict) for i in range(len(store))]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr("miles_tui.core.telemetry.metrics.metric_stream.CACHE_MIN_BYTES", 0)
    monkeypatch.setattr("miles_tui.core.telemetry.metrics.metric_stream.RESAVE_BYTES", 0)
    dash = tmp_path / "run" / "dashboard"
    dash.mkdir(parents=True)
    (dash / "metrics.jsonl").write_bytes(b"".join(_line(i) for i in range(200)))
    return dash


def _reader(dash: Path, opened: list[tuple[str, int]]) -> DashboardReader:
    return DashboardReader(dash, read_hook=lambda path, offset: opened.append((path.name, offset)))


def _entries() -> list[Path]:
    return sorted((cache_dir.cache_root() / metric_cache.KIND).glob("*"))


def test_a_reopen_reads_only_the_new_bytes_and_holds_the_same_records(run: Path) -> None:
    size = (run / "metrics.jsonl").stat().st_size
    first: list[tuple[str, int]] = []
    cold = _reader(run, first)
    cold.poll()
    assert first == [("metrics.jsonl", 0)] and len(_entries()) == 1
    assert not list(run.parent.rglob("*.npy"))  # never in the run
    with (run / "metrics.jsonl").open("ab") as out:
        out.write(b"".join(_line(i, late=i) for i in range(200, 210)) + _line(210)[:30])
    again: list[tuple[str, int]] = []
    warm = _reader(run, again)
    delta = warm.poll()
    assert again == [("metrics.jsonl", size)]  # only what the cache does not cover was read
    assert delta.metric_records == range(210) and "late" in delta.metric_keys
    cold.poll()
    assert _records(warm) == _records(cold) and len(warm.metrics) == 210  # the unterminated line is not a record


@pytest.mark.parametrize("change", ["shrunk", "rewritten", "replaced"])
def test_a_changed_file_drops_its_entry(run: Path, change: str) -> None:
    _reader(run, []).poll()
    path = run / "metrics.jsonl"
    data = path.read_bytes()
    if change == "shrunk":
        path.write_bytes(data[: len(data) // 2 + data[len(data) // 2 :].index(b"\n") + 1])
    elif change == "rewritten":  # same size and inode, other content
        path.write_bytes(data.replace(b'"ts": 1199.0', b'"ts": 9199.0'))
    else:
        (run / "new.jsonl").write_bytes(b"".join(_line(i) for i in range(300)))
        os.replace(run / "new.jsonl", path)
    opened: list[tuple[str, int]] = []
    reader = _reader(run, opened)
    reader.poll()
    fresh = DashboardReader(run)
    with cache_dir.configured(off=True):
        fresh.poll()
    assert opened == [("metrics.jsonl", 0)]  # read from the start, not from the cached offset
    assert _records(reader) == _records(fresh)


def test_no_cache_reads_and_writes_nothing(run: Path) -> None:
    with cache_dir.configured(off=True):
        _reader(run, []).poll()
    assert _entries() == []
    _reader(run, []).poll()
    with cache_dir.configured(off=True):
        opened: list[tuple[str, int]] = []
        _reader(run, opened).poll()
    assert opened == [("metrics.jsonl", 0)]


@pytest.mark.parametrize("damage", ["truncated", "object array", "out of range", "manifest", "group"])
def test_a_damaged_entry_is_dropped_never_trusted(run: Path, damage: str) -> None:
    cold = _reader(run, [])
    cold.poll()
    (entry,) = _entries()
    if damage == "truncated":
        target = entry / "k0.num.npy"
        target.write_bytes(target.read_bytes()[:-16])
    elif damage == "object array":  # loading it would need pickle: refused
        np.save(entry / "k0.num.npy", np.array([object()] * 200, dtype=object), allow_pickle=True)
    elif damage == "out of range":
        np.save(entry / "r0.npy", np.arange(5, 205, dtype=np.uint32))
    elif damage == "group":  # a key pointing at a record file written after it (or never)
        manifest = json.loads((entry / "manifest.json").read_text())
        manifest["rec"][0] = 2
        (entry / "manifest.json").write_text(json.dumps(manifest))
    else:
        (entry / "manifest.json").write_text("{")
    opened: list[tuple[str, int]] = []
    reader = _reader(run, opened)
    reader.poll()
    assert opened == [("metrics.jsonl", 0)] and _records(reader) == _records(cold)
    third: list[tuple[str, int]] = []
    _reader(run, third).poll()
    assert third == []  # the entry written by the full read covers the whole file again


def test_keys_logged_in_the_same_records_share_one_record_file(run: Path) -> None:
    lines = [_line(i, late=i) if i >= 150 else _line(i) for i in range(200)]
    (run / "metrics.jsonl").write_bytes(b"".join(lines))
    cold = _reader(run, [])
    cold.poll()
    (entry,) = _entries()
    manifest = json.loads((entry / "manifest.json").read_text())
    assert manifest["keys"] == ["train/loss", "train/step", "nan", "late"] and manifest["rec"] == [0, 0, 0, 3]
    assert sorted(p.name for p in entry.glob("r*.npy")) == ["r0.npy", "r3.npy"]
    opened: list[tuple[str, int]] = []
    warm = _reader(run, opened)
    warm.poll()
    assert opened == [] and _records(warm) == _records(cold)
    with (run / "metrics.jsonl").open("ab") as out:  # a restored group is shared: appending must not mix keys
        out.write(_line(200, late=200) + _line(201))
    warm.poll()
    cold.poll()
    assert _records(warm) == _records(cold)
    series = {name: len(warm.metrics.selection(name, "train/step")[0]) for name in ("train/loss", "late")}
    assert series == {"train/loss": 202, "late": 51}


def test_a_small_file_is_not_cached(tmp_path: Path) -> None:
    dash = tmp_path / "dashboard"
    dash.mkdir()
    (dash / "metrics.jsonl").write_bytes(_line(0))
    DashboardReader(dash).poll()
    assert _entries() == []


def test_an_entry_written_in_the_background_holds_what_that_poll_read(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export writes the entry in a thread while it writes its document; lines appended meanwhile are the
    next poll's, never half in the entry."""
    import threading

    started, release = threading.Event(), threading.Event()
    save = metric_cache.save_columns

    def slow_save(*args: Any) -> bool:
        started.set()
        release.wait(10)
        return save(*args)

    monkeypatch.setattr(metric_cache, "save_columns", slow_save)
    size = (run / "metrics.jsonl").stat().st_size
    background = DashboardReader(run, save_in_background=True)
    background.poll()
    assert started.wait(10) and not _entries()  # the poll returned while the entry is being written
    with (run / "metrics.jsonl").open("ab") as out:
        out.write(b"".join(_line(i) for i in range(200, 220)))
    extra = [json.loads(_line(i)) for i in range(5)]  # the store changes meanwhile: the entry holds the poll's
    background.metrics.append_rows([(r["ts"], r["step_key"], r["step"], r["metrics"]) for r in extra])
    release.set()
    background.wait_saved()
    assert len(_entries()) == 1
    opened: list[tuple[str, int]] = []
    warm = _reader(run, opened)
    warm.poll()
    assert opened == [("metrics.jsonl", size)] and len(warm.metrics) == 220
    with cache_dir.configured(off=True):
        cold = DashboardReader(run)
        cold.poll()
    assert _records(warm) == _records(cold)
