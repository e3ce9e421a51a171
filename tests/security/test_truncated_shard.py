"""Issue 9.8: a shard truncated in place after it was read never kills the reader with SIGBUS.

A resumed run re-dumping a step does ``torch.save`` over the old file, and
``open(..., "wb")`` truncates it first. Values that were views of a memory map
of that file then point at pages past its end: the next read is SIGBUS, which
no Python code can catch. What a load returns must not depend on the file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.hostile import REPO, torch

_CHILD = """
import sys
import numpy as np
from miles_tui.core.dump.pt.pt_archive import load_pt
path, how = sys.argv[1], sys.argv[2]
shard = load_pt(path)
expected = [float(i) * (1 << 16) for i in range(16)]
if how == "empty":
    open(path, "wb").close()
else:
    with open(path, "r+b") as handle:
        handle.truncate(4096)
got = [float(a.sum(dtype=np.float64)) for a in shard["rollout_data"]["log_probs"]]
got_t = float(shard["rollout_data"]["tokens"][0][::7].sum())
assert got == expected, (got, expected)
print("ok", got_t)
"""


@pytest.mark.skipif(torch is None, reason="torch writes the shard")
@pytest.mark.parametrize("how", ["empty", "shrunk"])
def test_values_survive_their_file_being_truncated(tmp_path: Path, how: str) -> None:
    path = tmp_path / "1_0.pt"
    assert torch is not None
    torch.save(
        {
            "rollout_id": 1,
            "rank": 0,
            "rollout_data": {
                "log_probs": [torch.full((1 << 16,), float(i)) for i in range(16)],
                "tokens": [torch.arange(1 << 16, dtype=torch.int64)[::3]],
            },
        },
        path,
    )
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), how], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert result.returncode == 0, f"rc={result.returncode} (-7 is SIGBUS): {result.stderr[-2000:]}"
    assert result.stdout.startswith("ok")
