"""The incremental step listing: same answer as a full listing, a fraction of the work on a quiet run."""

from __future__ import annotations

import os
import time
from pathlib import Path

from miles_tui.core.dump import RunDir, RunScanner
from miles_tui.core.dump.run_scan import SWEEP_MAX
from tests.conftest import EPOCH, stamp, write_demo_run


def _bytes(path: Path, data: bytes, mtime: float) -> None:
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


def test_it_answers_as_a_full_listing_does(demo_run: Path) -> None:
    scanner = RunScanner(RunDir(demo_run))
    first = scanner.scan(EPOCH)
    assert first.steps == RunDir(demo_run).scan()
    assert first.changed == frozenset(first.steps) and first.listed
    again = scanner.scan(EPOCH + 2)
    assert again.steps == first.steps and not again.changed and not again.removed
    assert all(again.steps[k] is first.steps[k] for k in first.steps), "an unchanged step is a new object"
    folders = {id(f.folder) for step in first.steps.values() for f in (step.rollout, *step.train)}
    assert len(folders) == 2, "each file holds its own folder Path (kept for every file of a run)"


def test_a_quiet_run_is_not_listed_again(tmp_path: Path) -> None:
    run = tmp_path / "run"
    folder = run / "rollout_data"
    folder.mkdir(parents=True)
    for rid in range(600):
        _bytes(folder / f"{rid}.pt", b"x", EPOCH - 7200)
    later = time.time() + 10  # the folder did not change around the listing (see RACY_SECONDS)
    scanner = RunScanner(RunDir(run))
    scanner.scan(later)
    listings, stats = scanner.listings, scanner.stats
    for _ in range(5):
        result = scanner.scan(later)
        assert not result.listed and not result.changed
    assert scanner.listings == listings
    assert scanner.stats - stats <= 5 * SWEEP_MAX, "a quiet poll stat'ed every file"


def test_added_removed_and_rewritten_files_are_seen(demo_run: Path) -> None:
    scanner = RunScanner(RunDir(demo_run))
    scanner.scan(EPOCH)
    write_demo_run(demo_run, 1, start=4)
    stamp(demo_run, EPOCH - 600)  # resets the folders' mtimes too: their ctime still moves
    added = scanner.scan(EPOCH)
    assert (4, False) in added.changed and (4, False) in added.steps

    (demo_run / "rollout_data" / "2.pt").unlink()
    removed = scanner.scan(EPOCH)
    assert removed.removed == {(2, False)} and (2, False) not in removed.steps

    next((demo_run / "train_data").glob("3_*.pt")).unlink()  # one shard: the step stays, with the others
    fewer = scanner.scan(EPOCH)
    assert fewer.changed == {(3, False)} and not fewer.removed
    assert fewer.steps == RunDir(demo_run).scan()

    shard = next((demo_run / "train_data").glob("1_*.pt"))
    _bytes(shard, shard.read_bytes() + b"\0", EPOCH - 30)  # in place: the folder does not change
    rewritten = scanner.scan(EPOCH)
    assert rewritten.changed == {(1, False)}
    assert rewritten.steps == RunDir(demo_run).scan()


def test_an_old_file_rewritten_in_place_is_seen_within_a_sweep(tmp_path: Path) -> None:
    run = tmp_path / "run"
    folder = run / "rollout_data"
    folder.mkdir(parents=True)
    for rid in range(3 * SWEEP_MAX):
        _bytes(folder / f"{rid}.pt", b"x", EPOCH - 7200)
    later = time.time() + 10
    scanner = RunScanner(RunDir(run))
    scanner.scan(later)
    scanner.scan(later)
    _bytes(folder / "5.pt", b"xy", EPOCH - 7000)  # old, so not re-stat'ed on every scan
    scans = [scanner.scan(later) for _ in range(4)]
    assert not any(scan.listed for scan in scans), "the folder did not change: no listing needed"
    assert any(scan.changed == {(5, False)} for scan in scans), "an old file's change was never noticed"
