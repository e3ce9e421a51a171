"""The partition cache (an hour's columns and its summaries, two entries) lives under the one cap: --cache-max
evicts least recently used hours like any other entry, and a trimmed hour is read again, the same."""

from __future__ import annotations

import json
import os
from pathlib import Path

from miles_tui.core.base import cache_dir
from miles_tui.core.telemetry.hours.store import HourStore

HOURS = 6


def _run(root: Path) -> Path:
    folder = root / "dashboard" / "gpu_util"
    folder.mkdir(parents=True)
    start = 1787223600.0
    for hour in range(HOURS):
        lines = [
            json.dumps(
                {
                    "ts": start + hour * 3600 + s,
                    "node": f"n{g // 8}",
                    "gpu": g % 8,
                    "util": (s * g) % 101,
                    "mem_mb": 1000 + g,
                    "power_w": 300.5,
                }
            )
            for s in range(0, 3600, 10)
            for g in range(16)
        ]
        (folder / f"20260820_{hour:02d}.jsonl").write_text("\n".join(lines) + "\n")
        os.utime(folder / f"20260820_{hour:02d}.jsonl", (start, start))  # settled: older than any grace
    return root / "dashboard"


def _cache_bytes() -> int:
    return sum(e.size for e in cache_dir.entries())


def _rows(store: HourStore) -> list[tuple[float, float]]:
    columns = store.columns()
    return list(zip(columns.numbers["ts"].tolist(), columns.numbers["util"].tolist(), strict=True))


def test_partition_entries_stay_under_the_cap_and_come_back_the_same(tmp_path: Path) -> None:
    dashboard = _run(tmp_path)
    uncapped = HourStore(dashboard, "gpu_util")
    uncapped.refresh()
    truth = _rows(uncapped)
    whole = _cache_bytes()
    assert whole > 0 and {e.path.parent.name for e in cache_dir.entries()} >= {"partitions", "partition-summaries"}

    cache_dir.trim(limit=0)  # start again, empty, under a cap of half the hours
    assert cache_dir.entries() == []
    cap = whole // 2
    with cache_dir.configured(cap=cap):
        cache_dir.forget_writes()
        capped = HourStore(dashboard, "gpu_util")
        capped.refresh()
        assert _rows(capped) == truth
        assert 0 < _cache_bytes() <= cap, (_cache_bytes(), cap)
        again = HourStore(dashboard, "gpu_util")  # some hours from the cache, the evicted ones parsed again
        again.refresh()
        assert _rows(again) == truth
        assert _cache_bytes() <= cap


def test_no_cache_leaves_the_cache_empty_and_reads_the_same(tmp_path: Path) -> None:
    dashboard = _run(tmp_path)
    with cache_dir.configured(off=True):
        store = HourStore(dashboard, "gpu_util")
        store.refresh()
        assert len(_rows(store)) == HOURS * 360 * 16
    assert cache_dir.entries() == []
