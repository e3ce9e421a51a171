"""Several files claim one step: ``rollout_data/5.pt`` beside ``00005.pt`` and ``000000005.pt``.

miles writes and reads only ``5.pt``. An attacker (or a copy gone wrong) adds
the others holding other samples; the directory may list them in any order.
The canonical file is read, whatever the order, by the one-shot listing
(export, report) and the incremental scanner (the monitor), and an advisory
names each other file.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest

from miles_tui.core.analysis.advisories import step_advisories
from miles_tui.core.dump import Run, RunDir, RunScanner
from miles_tui.core.dump import run_dir as run_dir_module
from tests.conftest import EPOCH, stamp, write_demo_run

ALIASES = ("00001.pt", "000000001.pt")


def _run_with_aliases(tmp_path: Path) -> tuple[Path, str]:
    """A run whose step 1 has ``1.pt`` plus ALIASES holding step 0's samples (another batch), and a train
    shard alias ``01_<rank>.pt`` holding step 0's shard; returns the run and that shard alias's name."""
    root = write_demo_run(tmp_path / "run", 2)
    rollout = root / "rollout_data"
    for alias in ALIASES:
        shutil.copy(rollout / "0.pt", rollout / alias)
    shard = sorted((root / "train_data").glob("0_*.pt"))[0]
    shard_alias = "01_" + shard.name.split("_")[1]
    shutil.copy(shard, root / "train_data" / shard_alias)
    stamp(root, EPOCH - 600)
    return root, shard_alias


def _summary(root: Path, *, use_cache: bool):  # type: ignore[no-untyped-def]
    return Run(root, use_cache=use_cache).summary(1, False, EPOCH)


@pytest.fixture(params=list(itertools.permutations(range(3))), ids=lambda p: "order" + "".join(map(str, p)))
def listing_order(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[int, ...]:
    """Make the directory list step 1's files in every order (os.scandir's order is the filesystem's)."""
    order: tuple[int, ...] = request.param
    real = run_dir_module._scan

    def reordered(directory: Path):  # type: ignore[no-untyped-def]
        entries = list(real(directory))
        claims = [e for e in entries if e.name in ("1.pt", *ALIASES)]
        others = [e for e in entries if e not in claims]
        claims.sort(key=lambda e: e.name)
        yield from others + [claims[i] for i in order if i < len(claims)]

    monkeypatch.setattr(run_dir_module, "_scan", reordered)
    import miles_tui.core.dump.run_scan as run_scan_module

    monkeypatch.setattr(run_scan_module, "_scan", reordered)
    return order


def test_the_canonical_file_wins_in_any_listing_order(tmp_path: Path, listing_order: tuple[int, ...]) -> None:
    root, shard_alias = _run_with_aliases(tmp_path)
    truth = write_demo_run(tmp_path / "truth", 2)
    expected = [r.sample_index for r in Run(truth, use_cache=False).summary(1, False, EPOCH).rows]
    other = [r.sample_index for r in Run(truth, use_cache=False).summary(0, False, EPOCH).rows]
    assert expected != other  # the aliases hold other samples: reading one of them would show
    files = RunDir(root).step_files(1, False)
    assert files is not None and files.rollout.name == "1.pt"
    assert sorted(f.name for f in files.ignored) == sorted([*ALIASES, shard_alias])
    assert [r.sample_index for r in _summary(root, use_cache=False).rows] == expected
    scanned = RunScanner(RunDir(root)).scan(EPOCH).steps[(1, False)]
    assert scanned.rollout.name == "1.pt" and scanned.ignored == files.ignored
    assert all(not f.name.startswith("01_") for f in scanned.train)


def test_an_advisory_names_each_other_file(tmp_path: Path) -> None:
    root, shard_alias = _run_with_aliases(tmp_path)
    summary = _summary(root, use_cache=False)
    advisories = [a for a in step_advisories(summary) if a.code == "duplicate_step_file"]
    named = sorted(a.path.name for a in advisories if a.path is not None)
    assert named == sorted([*ALIASES, shard_alias])
    assert all("1.pt" in a.message or "1_" in a.message for a in advisories)
    assert not any(r.alignment_failed for r in summary.rows)  # the ignored files cost the samples nothing


def test_report_names_the_other_files(tmp_path: Path) -> None:
    from tests.security.hostile_fs import cli

    root, _ = _run_with_aliases(tmp_path)
    done = cli("report", root, "--no-cache")
    assert done.returncode in (1, 2), done.stderr
    lines = [line for line in done.stdout.splitlines() if "duplicate_step_file" in line]
    assert {name for name in ALIASES if any(name in line for line in lines)} == set(ALIASES)


def test_a_new_alias_is_seen_by_the_incremental_scanner(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "run", 2)
    stamp(root, EPOCH - 600)
    scanner = RunScanner(RunDir(root))
    scanner.scan(EPOCH)
    shutil.copy(root / "rollout_data" / "0.pt", root / "rollout_data" / "0001.pt")
    os.utime(root / "rollout_data", None)
    result = scanner.scan(EPOCH + 5)
    assert (1, False) in result.changed
    step = result.steps[(1, False)]
    assert step.rollout.name == "1.pt" and [f.name for f in step.ignored] == ["0001.pt"]
