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
