"""A folder is listed again only when it changed (its time moved, it is fresh, or enough calls passed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from miles_tui.core.base import dir_listing
from miles_tui.core.base.dir_listing import RELIST_EVERY, FolderListing


def _age(folder: Path, seconds: float = 3600.0) -> None:
    st = folder.stat()
    os.utime(folder, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def _names(listing: FolderListing, folder: Path) -> set[str]:
    return {entry.name for entry in listing.entries(folder)}


def test_a_settled_folder_is_not_listed_again_until_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "20260820_10.jsonl").write_text("")
    _age(tmp_path)
    listing = FolderListing()
    calls = []
    real = os.scandir
    monkeypatch.setattr(dir_listing.os, "scandir", lambda path: calls.append(path) or real(path))
    assert _names(listing, tmp_path) == {"20260820_10.jsonl"}
    for _ in range(5):
        assert _names(listing, tmp_path) == {"20260820_10.jsonl"}
    assert len(calls) == 1, "an unchanged folder is listed once"
    (tmp_path / "20260820_11.jsonl").write_text("")  # the folder's time moves: listed again at once
    assert _names(listing, tmp_path) == {"20260820_10.jsonl", "20260820_11.jsonl"}
    (tmp_path / "20260820_10.jsonl").unlink()
    assert _names(listing, tmp_path) == {"20260820_11.jsonl"}


def test_a_folder_whose_time_lags_is_caught_up_within_a_bounded_number_of_calls(tmp_path: Path) -> None:
    _age(tmp_path)
    listing = FolderListing()
    assert _names(listing, tmp_path) == set()
    stamp = tmp_path.stat().st_mtime_ns
    (tmp_path / "20260820_10.jsonl").write_text("")
    os.utime(tmp_path, ns=(stamp, stamp))  # a file system that did not move the folder's time
    seen = [_names(listing, tmp_path) for _ in range(RELIST_EVERY)]
    assert seen[-1] == {"20260820_10.jsonl"}


def test_a_folder_changed_just_now_is_listed_on_every_call(tmp_path: Path) -> None:
    listing = FolderListing()  # tmp_path was just made: its time is within the racy window
    assert _names(listing, tmp_path) == set()
    stamp = tmp_path.stat().st_mtime_ns
    (tmp_path / "20260820_10.jsonl").write_text("")
    os.utime(tmp_path, ns=(stamp, stamp))  # the same clock tick as the listing
    assert _names(listing, tmp_path) == {"20260820_10.jsonl"}


def test_a_missing_folder_raises_as_scandir_does(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        FolderListing().entries(tmp_path / "gone")
