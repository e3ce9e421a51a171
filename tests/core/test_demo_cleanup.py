"""The demo's temp folder is deleted, and nothing else ever is."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from miles_tui.core.synth import make_temp_demo, remove_temp_demo
from miles_tui.core.synth.demo_cleanup import MARKER, TEMP_DEMO_PREFIX, delete_when_orphaned


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_temp_demo_is_made_marked_and_removed(private_tmp: Path) -> None:
    folder = make_temp_demo()
    assert folder.parent == private_tmp and folder.name.startswith(TEMP_DEMO_PREFIX)
    (folder / "run" / "rollout_data").mkdir(parents=True)
    (folder / "run" / "rollout_data" / "0.pt").write_bytes(b"x" * 1000)
    remove_temp_demo(folder)
    assert list(private_tmp.iterdir()) == []
    remove_temp_demo(folder)  # already gone: nothing to do


def test_a_folder_it_did_not_make_is_never_deleted(private_tmp: Path) -> None:
    user = private_tmp / "my-demo"  # what `--demo DIR` writes into
    (user / "rollout_data").mkdir(parents=True)
    lookalike = private_tmp / f"{TEMP_DEMO_PREFIX}mine"  # the right name, but not made by make_temp_demo
    lookalike.mkdir()
    for folder in (user, lookalike):
        with pytest.raises(ValueError, match="refusing to delete"):
            remove_temp_demo(folder)
        assert folder.is_dir()
    (user / MARKER).write_text("")  # a marker in a folder with another name is not enough either
    with pytest.raises(ValueError):
        remove_temp_demo(user)


def test_the_writer_deletes_the_folder_once_its_monitor_is_gone(private_tmp: Path) -> None:
    folder = make_temp_demo()
    answers = iter([True, True, False])
    naps: list[float] = []
    delete_when_orphaned(folder, lambda: next(answers), naps.append)
    assert naps == [1.0, 1.0] and not folder.exists()


def test_demo_dir_refuses_a_folder_it_did_not_write(tmp_path: Path) -> None:
    """`--demo DIR` on a copy of a real run added synthetic steps to it and appended to its metrics.jsonl."""
    from miles_tui.core.base.errors import RunDirError
    from miles_tui.core.synth import claim_demo_dir

    real = tmp_path / "real"
    (real / "rollout_data").mkdir(parents=True)
    (real / "rollout_data" / "0.pt").write_bytes(b"a real step")
    with pytest.raises(RunDirError, match="already holds files the demo did not write"):
        claim_demo_dir(real)
    assert sorted(p.name for p in real.iterdir()) == ["rollout_data"]  # nothing written
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirError, match="not a folder"):
        claim_demo_dir(tmp_path / "file")
    fresh, empty = tmp_path / "new" / "demo", tmp_path / "empty"
    empty.mkdir()
    for folder in (fresh, empty):
        claim_demo_dir(folder)
        (folder / "rollout_data").mkdir()
        claim_demo_dir(folder)  # its own demo folder: a later --demo adds steps


def test_the_cli_refuses_demo_into_a_real_run(tmp_path: Path) -> None:
    import subprocess
    import sys

    real = tmp_path / "real"
    (real / "dashboard").mkdir(parents=True)
    (real / "dashboard" / "metrics.jsonl").write_text('{"step": 1}\n')
    result = subprocess.run(
        [sys.executable, "-m", "miles_tui.tui.cli", "--demo", str(real)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1 and "already holds files the demo did not write" in result.stderr
    assert "Traceback" not in result.stderr
    assert (real / "dashboard" / "metrics.jsonl").read_text() == '{"step": 1}\n'
    assert sorted(p.name for p in real.iterdir()) == ["dashboard"]
