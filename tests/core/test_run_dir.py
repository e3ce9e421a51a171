"""Step discovery and the visibility rule, with the clock passed in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from miles_tui.core.base.errors import CorruptFileError, RunDirError, StillWritingError
from miles_tui.core.dump import RunDir
from miles_tui.core.dump.run_dir import MIN_AGE_SECONDS, STILL_WRITING_SECONDS


def _touch(path: Path, mtime: float, content: bytes = b"x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    os.utime(path, (mtime, mtime))


def test_visibility_rule(tmp_path: Path) -> None:
    now = 1_000_000.0
    _touch(tmp_path / "rollout_data" / "1.pt", now - 1)  # fresh, no train file: hidden
    _touch(tmp_path / "rollout_data" / "2.pt", now - 1)  # fresh, a non-zero rank wrote: visible
    _touch(tmp_path / "train_data" / "2_8.pt", now - 1)
    _touch(tmp_path / "rollout_data" / "3.pt", now - MIN_AGE_SECONDS)  # old enough
    _touch(tmp_path / "rollout_data" / "eval_3.pt", now - 1)  # eval waits for the age
    _touch(tmp_path / "rollout_data" / "eval_0.pt", now - 100)
    _touch(tmp_path / "rollout_data" / "notes.txt", now - 100)
    _touch(tmp_path / "train_data" / "9_0.pt", now - 100)  # train file without rollout file
    ids = RunDir(tmp_path).step_ids(now)
    assert ids.train == (2, 3)
    assert ids.evaluation == (0,)
    later = RunDir(tmp_path).step_ids(now + MIN_AGE_SECONDS)
    assert later.train == (1, 2, 3) and later.evaluation == (0, 3)


def test_only_ascii_step_names_are_steps(tmp_path: Path) -> None:
    """int() reads other scripts' digits: a stray "٣.pt" (or "3_٠.pt") read as step 3 (rank 0) beside the real
    one, and which of the two was shown depended on listing order."""
    from miles_tui.core.dump import RunScanner
    from miles_tui.core.dump.run_dir import rollout_key, train_key

    assert rollout_key("eval_12.pt") == (12, True) and rollout_key("7.pt") == (7, False)
    assert train_key("7_15.pt") == (7, 15)
    for name in ("\u0663.pt", "eval_\u0663.pt", "\uff13.pt", "3.pt.tmp", "-3.pt", "3_0.pt"):
        assert rollout_key(name) is None, name
    for name in ("3_\u0660.pt", "\u0663_0.pt", "3.pt", "3__0.pt"):
        assert train_key(name) is None, name
    now = 1_000_000.0
    _touch(tmp_path / "rollout_data" / "3.pt", now - 100, b"real")
    _touch(tmp_path / "rollout_data" / "\u0663.pt", now - 100, b"stray, longer")
    _touch(tmp_path / "train_data" / "3_0.pt", now - 100)
    _touch(tmp_path / "train_data" / "3_\u0660.pt", now - 100, b"stray")
    [step] = RunDir(tmp_path).scan().values()
    assert step.rollout.name == "3.pt" and [f.name for f in step.train] == ["3_0.pt"]
    [scanned] = RunScanner(RunDir(tmp_path)).scan(now).steps.values()
    assert scanned.rollout.name == "3.pt" and [f.name for f in scanned.train] == ["3_0.pt"]


def test_load_failures_are_classified_by_age(tmp_path: Path) -> None:
    now = 1_000_000.0
    young, old = tmp_path / "train_data" / "1_0.pt", tmp_path / "train_data" / "1_1.pt"
    _touch(tmp_path / "rollout_data" / "1.pt", now - 100)
    _touch(young, now - 5, b"PK\x03\x04partial")
    _touch(old, now - STILL_WRITING_SECONDS - 1, b"PK\x03\x04partial")
    run = RunDir(tmp_path)
    files = run.step_files(1)
    assert files is not None
    by_name = {f.path.name: f for f in files.train}
    with pytest.raises(StillWritingError, match="still being written"):
        RunDir.load(by_name["1_0.pt"], now)
    with pytest.raises(CorruptFileError) as info:
        RunDir.load(by_name["1_1.pt"], now)
    assert "1_1.pt" in str(info.value)


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_bad_run_dir_is_one_clear_error(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "run"
    if kind == "file":
        target.write_text("not a dir")
    with pytest.raises(RunDirError) as info:
        RunDir(target)
    assert str(target) in str(info.value)
