"""The summary cache never lives inside the run (issue 9.10): with RUN_DIR=$HOME, or any ancestor
of the cache dir, nothing is written under RUN_DIR and nothing found there is served."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile_fs import cli

from miles_tui.core.dump import Run
from miles_tui.core.dump.summary_cache import _key, cache_dir


def _files_under(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def test_export_with_run_dir_as_home_writes_nothing_into_the_run(demo_run: Path) -> None:
    before = _files_under(demo_run)
    env = {"HOME": str(demo_run), "MILES_TUI_CACHE_DIR": None, "XDG_CACHE_HOME": None}
    for args in (("export", demo_run, "--step", "3"), ("report", demo_run)):
        out = cli(*args, env=env)
        assert out.returncode in (0, 1, 2), out.stderr
        notes = [line for line in out.stderr.splitlines() if "summary cache" in line]
        assert notes == [
            f"miles-tui: note: the summary cache {demo_run}/.cache/miles-tui is inside the run directory, which"
            " miles-tui never writes to: summaries are not cached (set MILES_TUI_CACHE_DIR to a folder outside"
            " the run)"
        ]
    assert _files_under(demo_run) == before and not (demo_run / ".cache").exists()


def test_a_cache_dir_that_resolves_into_the_run_is_refused(demo_run: Path, tmp_path: Path) -> None:
    inside = demo_run / "some" / "where"
    inside.mkdir(parents=True)
    link = tmp_path / "cache-link"
    link.symlink_to(inside)
    for cache in (inside / "cache", link):  # a sub-folder, and an outside name that points inside
        out = cli("export", demo_run, "--step", "2", env={"MILES_TUI_CACHE_DIR": str(cache)})
        assert out.returncode == 0 and out.stderr.count("summary cache") == 1, out.stderr
        assert not any(inside.iterdir())


def test_a_summary_planted_in_a_cache_inside_the_run_is_not_served(
    demo_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MILES_TUI_CACHE_DIR", str(demo_run / ".cache" / "miles-tui"))
    run = Run(demo_run)
    assert run.cache_notice is not None and not run.use_cache
    files = run.files(3, False, now=2e9)
    real = run.summary(3, False, now=2e9)
    forged = {
        "rollout_id": 3, "evaluation": False, "rows": [], "groups": [],
        "aggregate": {**real.aggregate.to_dict(), "reward_mean": 999.0},
        "problems": [], "signature": [list(s) for s in files.signature], "alignment_reasons": [],
    }  # fmt: skip
    folder = cache_dir() / "summaries"
    folder.mkdir(parents=True)
    (folder / f"{_key(run.path, files)}.json").write_text(json.dumps(forged))
    served = Run(demo_run).summary(3, False, now=2e9)
    assert served.aggregate.reward_mean == real.aggregate.reward_mean != 999.0
    assert len(served.rows) == 16
