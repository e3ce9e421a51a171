"""Cache housekeeping for every miles-tui cache: the root, the size cap with least-recently-used eviction, and
--no-cache / --cache-max on export, report and the monitor."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from miles_tui.core.base import cache_dir
from miles_tui.core.dump import Run
from miles_tui.tui.cli import main
from tests.conftest import EPOCH


def _entry(kind: str, name: str, size: int, used: float) -> Path:
    folder = cache_dir.cache_root() / kind
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if name.endswith("/"):
        path.mkdir()
        (path / "a.npy").write_bytes(b"x" * size)
    else:
        path.write_bytes(b"x" * size)
    os.utime(path, (used, used))
    return path


def test_sizes_parse_in_decimal_units() -> None:
    assert cache_dir.parse_size("2G") == 2_000_000_000 and cache_dir.parse_size("500MB") == 500_000_000
    assert cache_dir.parse_size("64k") == 64_000 and cache_dir.parse_size("1234") == 1234
    for bad in ("", "G", "-1G", "2X", "nanG", "infG"):
        with pytest.raises(ValueError, match="not a size"):
            cache_dir.parse_size(bad)


def test_trim_evicts_least_recently_used_entries_of_every_cache_until_under_the_cap() -> None:
    old = _entry("summaries", "old.json", 400, 1000.0)
    folder = _entry("metrics", "run-a/", 300, 2000.0)
    new = _entry("summaries", "new.json", 400, 3000.0)
    assert [e.path for e in cache_dir.entries()] == [old, folder, new]
    cache_dir.touch(old)  # used just now: the most recent
    assert cache_dir.trim(limit=800) == 300  # the folder entry went, old (touched) and new stay
    assert old.exists() and new.exists() and not folder.exists()
    assert cache_dir.trim(limit=500, keep=new) == 400 and new.exists() and not old.exists()


def test_the_cap_comes_from_the_environment_and_the_first_write_trims(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_dir.max_bytes() == cache_dir.DEFAULT_MAX_BYTES
    monkeypatch.setenv(cache_dir.ENV_MAX, "1K")
    assert cache_dir.max_bytes() == 1000
    monkeypatch.setenv(cache_dir.ENV_MAX, "bogus")
    assert cache_dir.max_bytes() == cache_dir.DEFAULT_MAX_BYTES
    monkeypatch.setenv(cache_dir.ENV_MAX, "1000")
    a = _entry("summaries", "a.json", 600, 1000.0)
    b = _entry("summaries", "b.json", 600, 2000.0)
    cache_dir.forget_writes()
    cache_dir.note_write(600, b)
    assert b.exists() and not a.exists()


def test_configured_switches_off_and_restores() -> None:
    assert cache_dir.enabled()
    with cache_dir.configured(off=True, cap=5):
        assert not cache_dir.enabled() and cache_dir.max_bytes() == 5
    assert cache_dir.enabled() and cache_dir.max_bytes() == cache_dir.DEFAULT_MAX_BYTES


def test_the_summary_cache_obeys_the_switch_and_is_counted(demo_run: Path) -> None:
    run = Run(demo_run)
    with cache_dir.configured(off=True):
        run.summary(0, False, EPOCH)
    assert not (cache_dir.cache_root() / "summaries").exists()
    cache_dir.forget_writes()
    run.summary(1, False, EPOCH)
    (written,) = (cache_dir.cache_root() / "summaries").rglob("*.sum")
    assert [e.path for e in cache_dir.entries()] == [written]


def test_export_and_report_take_no_cache_and_cache_max(demo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(demo_run), "--step", "0", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out)["rollout_id"] == 0
    assert not (cache_dir.cache_root() / "summaries").exists() and cache_dir.enabled()
    assert main(["report", str(demo_run), "--no-cache", "--json"]) in (0, 1, 2)
    capsys.readouterr()
    assert not (cache_dir.cache_root() / "summaries").exists()
    assert main(["export", str(demo_run), "--step", "0", "--cache-max", "1G"]) == 0
    capsys.readouterr()
    assert list((cache_dir.cache_root() / "summaries").rglob("*.sum"))
    assert main(["export", str(demo_run), "--step", "0", "--cache-max", "lots"]) == 2
    assert "--cache-max: not a size" in capsys.readouterr().err


def test_the_monitor_takes_the_flags() -> None:
    from miles_tui.tui.cli import _monitor_parser

    args = _monitor_parser().parse_args(["RUN", "--no-cache", "--cache-max", "300M"])
    assert args.no_cache and args.cache_max == "300M"
