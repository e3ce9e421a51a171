"""Every use of numpy's private API, in one place; ``tests/core/test_numpy_private.py`` pins each.

- ``numpy._core.multiarray._set_madvise_hugepage`` (numpy 2; ``numpy.core.multiarray``
  in numpy 1): turns numpy's transparent-huge-page advice off in a process that
  has already imported numpy (``NUMPY_MADVISE_HUGEPAGE``, the documented switch,
  is read only at numpy's import). Used by :mod:`miles_tui.core.base.memory_settings`.

Imports nothing: numpy's modules are looked up only if numpy is already imported.
A numpy release that renames or moves the setter fails the pinning test (not the
command, silently).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Final

MULTIARRAY_MODULES: Final = ("numpy._core.multiarray", "numpy.core.multiarray")
"""Where the setter lives: numpy 2, numpy 1 (both imported with numpy)."""


def madvise_hugepage_setter() -> Callable[[bool], object] | None:
    """numpy's ``_set_madvise_hugepage`` if numpy is imported and has it, else None."""
    for name in MULTIARRAY_MODULES:
        setter = getattr(sys.modules.get(name), "_set_madvise_hugepage", None)
        if callable(setter):
            return setter  # type: ignore[no-any-return]
    return None
