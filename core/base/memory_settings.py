"""Process-wide memory settings of the miles-tui command (set once, at its start).

Contract:

- :func:`no_huge_pages`: numpy stops asking the kernel for transparent huge
  pages for its big arrays, unless the user chose with ``NUMPY_MADVISE_HUGEPAGE``
  (numpy's documented switch, read when numpy is first imported; this sets it
  for this process and the processes it starts). Why: the columns are written
  once, in order, so huge pages save little; where the kernel backs memory
  lazily (a VM whose host takes freed memory back), a fresh huge page costs far
  more to fault in than its small pages. 2-core VM: a cold 2M-line export
  8.9-9.2 s against 9.8-10.2 s; re-opening its cache right after, 0.57-0.74 s
  against 3.6 s.
- Imports nothing heavy: numpy only when it is already imported.
"""

from __future__ import annotations

import os
from typing import Final

from miles_tui.core.base.numpy_private import madvise_hugepage_setter

HUGE_PAGES_ENV: Final = "NUMPY_MADVISE_HUGEPAGE"


def no_huge_pages() -> None:
    """See the module docstring."""
    if HUGE_PAGES_ENV in os.environ:  # the user's choice
        return
    os.environ[HUGE_PAGES_ENV] = "0"
    setter = madvise_hugepage_setter()  # None while numpy is not imported: then the variable is enough
    if setter is not None:
        setter(False)
