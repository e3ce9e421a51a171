"""A file whose read blocks: ``meta.json`` linked to ``/proc/kmsg`` (a regular file of size 0 whose read
waits for the kernel). Never waited on: a read that would block is refused, naming the file; every read of
a small run file has a deadline.

The commands run in a child with a timeout, so a regression shows as a hang, not a stuck suite.
/proc/kmsg needs CAP_SYSLOG (root here); elsewhere that case is skipped and the unit cases stand.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hostile_fs import cli, symlink

from miles_tui.core.base import run_files
from miles_tui.core.base.errors import UnreadableFileError
from miles_tui.core.base.run_files import read_capped


def _kmsg_readable() -> bool:
    try:
        fd = os.open("/proc/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    os.close(fd)
    return True


@pytest.mark.skipif(not _kmsg_readable(), reason="/proc/kmsg cannot be opened here (needs CAP_SYSLOG)")
def test_meta_json_linked_to_proc_kmsg_is_refused_not_waited_on(demo_run: Path) -> None:
    meta = symlink(demo_run / "dashboard" / "meta.json", "/proc/kmsg")
    assert meta.stat().st_size == 0 and meta.is_file()  # it passes for an empty regular file
    report = cli("report", demo_run, "--no-cache", timeout=60)
    assert not report.hung, "report waited on /proc/kmsg"
    assert report.returncode in (1, 2) and "internal error" not in report.stderr
    lines = [line for line in report.stdout.splitlines() if str(meta) in line]
    assert len(lines) == 1 and "would block" in lines[0]
    metrics = cli("export", demo_run, "--metrics", "--no-cache", timeout=60)
    assert not metrics.hung, "export --metrics waited on /proc/kmsg"
    assert metrics.returncode == 0 and metrics.stdout.startswith('{"metrics"')


def test_a_read_that_would_block_is_refused_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a pseudo-file with no data does on a non-blocking descriptor: EAGAIN, never a wait."""
    path = tmp_path / "meta.json"
    path.write_bytes(b"")
    real_read = os.read

    def would_block(fd: int, n: int) -> bytes:
        assert not os.get_blocking(fd), "the descriptor must stay non-blocking"
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(run_files.os, "read", would_block)
    with pytest.raises(UnreadableFileError, match="would block") as caught:
        read_capped(path, 1 << 20, "meta.json")
    assert str(path) in str(caught.value)
    monkeypatch.setattr(run_files.os, "read", real_read)
    assert read_capped(path, 1 << 20, "meta.json") == b""


def test_a_read_has_a_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that keeps producing data (a pseudo-file, a slow network mount) is refused when the clock passes."""
    path = tmp_path / "meta.json"
    path.write_bytes(b"{}" * 100)
    assert read_capped(path, 1 << 20, "meta.json") == b"{}" * 100
    monkeypatch.setattr(run_files, "READ_SECONDS", -1.0)
    with pytest.raises(UnreadableFileError, match="still returning data after"):
        read_capped(path, 1 << 20, "meta.json")
