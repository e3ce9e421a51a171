"""The parsed-shard cache is bounded by bytes: shards are copies of their files, so 64 big ones held gigabytes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from miles_tui.core.dump import Run, RunDir
from miles_tui.core.dump.parsed_files import ARRAY_HEADER_BYTES, ParsedFiles, held_bytes
from miles_tui.core.dump.run_dir import TrainFile
from tests.conftest import EPOCH


def test_an_array_counts_its_elements_once_however_many_views_share_them() -> None:
    owner = np.zeros(1000, dtype=np.float64)
    views = [owner[::2], owner[10:20], owner]
    weight = held_bytes({"a": views})
    assert 8000 <= weight < 8000 + 10 * ARRAY_HEADER_BYTES + 1000
    # A broadcast tensor (stride 0) holds its one element, not the shape it claims: as the reader builds it...
    element = np.zeros(1, dtype=np.int64)
    assert held_bytes([np.ndarray((1 << 26,), np.int64, element, 0, (0,))]) < 1000
    # ... or over a buffer that is not an array.
    broadcast = np.lib.stride_tricks.as_strided(element, shape=(1 << 26,), strides=(0,))
    assert held_bytes([broadcast]) < 1000


def test_containers_and_records_are_walked() -> None:
    arrays = [np.ones(256, dtype=np.int32) for _ in range(4)]
    value = {"tokens": arrays, "meta": ("x" * 5000, 3)}
    assert held_bytes(value) >= 4 * 1024 + 5000
    assert held_bytes(value) >= sys.getsizeof(value)


def test_the_oldest_values_go_first_while_over_bytes_and_the_newest_always_stays() -> None:
    cache = ParsedFiles(max_files=64, max_bytes=10_000)
    for k in range(5):
        cache.put((f"{k}.pt", 1, 0.0), np.zeros(400, dtype=np.float64))  # 3.2 kB each
    assert list(cache) == [("2.pt", 1, 0.0), ("3.pt", 1, 0.0), ("4.pt", 1, 0.0)]
    assert cache.nbytes <= 10_000
    assert cache.get(("2.pt", 1, 0.0)) is not None  # now the most recently used: 3 goes next
    cache.put(("big.pt", 1, 0.0), np.zeros(10_000, dtype=np.float64))
    assert list(cache) == [("big.pt", 1, 0.0)], "one value over the budget is kept alone (its caller uses it)"
    cache.put(("big.pt", 1, 0.0), np.zeros(10, dtype=np.float64))  # put again: weighed again
    assert cache.nbytes < 1000


def _shard_keys(run: Run) -> list[tuple[str, int, float]]:
    return list(run._shards)


def test_a_run_keeps_at_most_its_byte_budget_of_parsed_shards(demo_run: Path) -> None:
    unbounded = Run(demo_run, use_cache=False)
    for rid in range(4):
        unbounded.open(rid, False, EPOCH)
    shards = unbounded._shards
    assert len(shards) > 4, "the fixture has several shards per step"
    one_step = shards.nbytes // 4
    budget = 2 * one_step
    run = Run(demo_run, use_cache=False, shard_bytes=budget)
    for rid in range(4):
        run.open(rid, False, EPOCH)
    assert 0 < run._shards.nbytes <= budget
    assert len(run._shards) < len(shards)
    newest = {str(f.path) for f in run.dir.step_files(3, False).train}  # type: ignore[union-attr]
    assert newest <= {path for path, _size, _mtime in _shard_keys(run)}, "the newest step's shards stay"


def test_parsing_ahead_stops_at_the_budget(demo_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = Run(demo_run).dir.step_files(0, False)
    assert files is not None and len(files.train) >= 2
    loads: list[str] = []
    load = RunDir.load

    def counted(file: object, now: float) -> object:
        loads.append(file.path.name)  # type: ignore[attr-defined]
        return load(file, now)  # type: ignore[arg-type]

    monkeypatch.setattr(RunDir, "load", staticmethod(counted))
    first = files.train[0].size
    run = Run(demo_run, use_cache=False, shard_bytes=first)
    run.prepare(files, EPOCH, settled_for=0.0)
    shards = [name for name in loads if name != files.rollout.path.name]
    assert shards == [files.train[0].path.name], "shards that cannot be kept were parsed ahead"
    assert isinstance(files.train[0], TrainFile)
