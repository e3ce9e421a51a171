"""The command asks numpy for no transparent huge pages, whether numpy is imported before or after it starts,
unless the user chose with NUMPY_MADVISE_HUGEPAGE."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_CODE = """
import os, sys
if sys.argv[1] == "numpy first":
    import numpy
from miles_tui.tui.cli import main
main(["--version"])
import numpy
try:
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:  # numpy 1
    from numpy.core.multiarray import _set_madvise_hugepage
print(_set_madvise_hugepage(True), os.environ.get("NUMPY_MADVISE_HUGEPAGE"))
"""


@pytest.mark.parametrize(
    ("order", "env", "want"),
    [
        ("numpy after", None, "False 0"),
        ("numpy first", None, "False 0"),
        ("numpy after", "1", "True 1"),  # the user's choice stands
        ("numpy first", "1", "True 1"),
    ],
)
def test_numpy_asks_for_no_huge_pages(order: str, env: str | None, want: str) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    if env is not None:
        environ["NUMPY_MADVISE_HUGEPAGE"] = env
    done = subprocess.run([sys.executable, "-c", _CODE, order], env=environ, capture_output=True, text=True,
                          check=True, timeout=60)  # fmt: skip
    assert done.stdout.splitlines()[-1] == want
