"""What miles-tui takes from numpy's private API still exists and behaves as relied on (core/base/numpy_private.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from miles_tui.core.base.numpy_private import MULTIARRAY_MODULES, madvise_hugepage_setter


def test_the_hugepage_setter_is_found_once_numpy_is_imported() -> None:
    """numpy 2 keeps ``_set_madvise_hugepage`` in ``numpy._core.multiarray``; a numpy that moves it fails here."""
    setter = madvise_hugepage_setter()
    assert setter is not None
    expected = MULTIARRAY_MODULES[0] if int(np.__version__.split(".")[0]) >= 2 else MULTIARRAY_MODULES[1]
    assert getattr(sys.modules[expected], "_set_madvise_hugepage") is setter  # noqa: B009


def test_the_setter_switches_the_advice_and_returns_the_old_one() -> None:
    setter = madvise_hugepage_setter()
    assert setter is not None
    before = setter(False)
    try:
        assert isinstance(before, bool)
        assert setter(True) is False
        assert setter(False) is True
    finally:
        setter(before)


def test_without_numpy_nothing_is_imported() -> None:
    code = (
        "import sys; from miles_tui.core.base.numpy_private import madvise_hugepage_setter as s; "
        "print(s() is None, 'numpy' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "False"]
