"""NpyWriter: what np.save writes, read back by np.load, whether the filesystem takes O_DIRECT or refuses it."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from miles_tui.core import npy_file
from miles_tui.core.npy_file import BLOCK, DIRECT_MIN_BYTES, STAGING_BYTES, NpyWriter

needs_direct = pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT on this platform")


def _arrays() -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(7)
    return [
        rng.standard_normal(DIRECT_MIN_BYTES // 8 + 3),  # just past the threshold, a ragged last block
        rng.integers(0, 2**32, STAGING_BYTES // 4 * 2 + 1021, dtype=np.uint64).astype(np.uint32),  # 3 staging fills
        rng.standard_normal(STAGING_BYTES // 8 * 3),  # exactly 3 fills of data, the header spilling into a 4th
        rng.integers(0, 2, DIRECT_MIN_BYTES + BLOCK, dtype=np.uint8).astype(np.bool_),
        np.arange(100, dtype=np.float64),  # small: np.save
        np.zeros(0, np.uint32),
        rng.standard_normal((3, DIRECT_MIN_BYTES // 8))[:, ::2],  # not contiguous, 2-D
    ]


@needs_direct
def test_every_array_reads_back_as_np_save_wrote_it(tmp_path: Path) -> None:
    writer = NpyWriter()
    for i, array in enumerate(_arrays()):
        writer.save(tmp_path / f"a{i}.npy", array)
        np.save(tmp_path / f"b{i}.npy", array, allow_pickle=False)
        back = np.load(tmp_path / f"a{i}.npy", allow_pickle=False)
        assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array)
        assert (tmp_path / f"a{i}.npy").read_bytes() == (tmp_path / f"b{i}.npy").read_bytes()
    if writer.direct:  # this machine's tmp filesystem took it: the big ones went past the page cache
        assert writer.direct_files == 5


@needs_direct
def test_a_filesystem_that_refuses_o_direct_gets_the_ordinary_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some filesystems (FUSE mounts, older tmpfs) refuse O_DIRECT with EINVAL: that is not an error."""
    real_open = os.open
    tried: list[int] = []

    def refusing_open(path: Any, flags: int, mode: int = 0o777) -> int:
        if flags & os.O_DIRECT:
            tried.append(flags)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, mode)

    monkeypatch.setattr(npy_file.os, "open", refusing_open)
    writer = NpyWriter()
    arrays = _arrays()
    for i, array in enumerate(arrays):
        writer.save(tmp_path / f"a{i}.npy", array)
        assert np.array_equal(np.load(tmp_path / f"a{i}.npy", allow_pickle=False), array)
    assert len(tried) == 1 and not writer.direct and writer.direct_files == 0  # asked once, then never again


def test_other_errors_are_raised(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        NpyWriter().save(tmp_path / "no such folder" / "a.npy", np.zeros(DIRECT_MIN_BYTES, np.uint8))
