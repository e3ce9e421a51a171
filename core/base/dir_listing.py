"""A folder listed again only when it changed: a month of hourly files is not listed on every poll.

Contract: :meth:`FolderListing.entries` returns the folder's entries as
``os.scandir`` gives them, listing it again when the folder's inode or
modification time (nanoseconds) changed since the last listing, when that
time is within :data:`RACY_SECONDS` of now (a file added in the same clock tick
as the listing leaves the time as it was), or when :data:`RELIST_EVERY` calls
passed (a file system whose folder times lag behind what it lists is caught up
within that many calls). It raises what
``os.scandir`` or ``os.stat`` raise. An entry's cached ``is_dir`` and the like
are as of its listing. Not thread-safe: one caller at a time.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final

RELIST_EVERY: Final = 16
"""Calls after which a folder whose times did not change is listed anyway."""
RACY_SECONDS: Final = 2.0
"""A folder modified this recently is listed on every call."""


class FolderListing:
    """See the module docstring."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[tuple[int, int], int, list[os.DirEntry[str]]]] = {}
        """folder -> ((inode, mtime ns) at its listing, calls since, its entries)."""

    def entries(self, folder: Path | str) -> list[os.DirEntry[str]]:
        """See the module docstring."""
        key = os.fspath(folder)
        st = os.stat(key)
        mark = (st.st_ino, st.st_mtime_ns)
        known = self._known.get(key)
        settled = time.time_ns() - st.st_mtime_ns > RACY_SECONDS * 1e9
        if known is not None and known[0] == mark and known[1] < RELIST_EVERY and settled:
            self._known[key] = (mark, known[1] + 1, known[2])
            return known[2]
        with os.scandir(key) as listed:
            entries = list(listed)
        self._known[key] = (mark, 1, entries)
        return entries

    def forget(self, folder: Path | str) -> None:
        """List ``folder`` afresh on the next call."""
        self._known.pop(os.fspath(folder), None)
