"""``trajectory/{rid}.jsonl`` written by an attacker: unreadable, memory-hungry, or hash-colliding.

Each sidecar is written as an attacker would (raw JSON lines on disk); each
is read where a user reads it: ``export --sample I --conversation`` (in a
child under an address-space limit and a timeout where it could blow up) and
``read_sidecar``, which the monitor's conversation view uses.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from miles_tui.core.dump import read_sidecar
from tests.conftest import EPOCH, stamp, write_demo_run

ROOT = Path(__file__).resolve().parents[2]
MERSENNE = 2**61 - 1
"""CPython's int hash is ``n mod (2**61 - 1)`` (not randomised): every multiple of it hashes to 0."""


def _run(tmp_path: Path) -> Path:
    root = write_demo_run(tmp_path / "run", 3)
    stamp(root, EPOCH - 600)
    return root


def _export(
    root: Path, *argv: str, mem_mb: int | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MILES_TUI_CACHE_DIR": str(root.parent / "cache")}
    command = [sys.executable, "-m", "miles_tui.tui.cli", "export", str(root), *argv]

    def limit() -> None:  # an address-space limit: a blow-up fails the test instead of the machine
        if mem_mb is not None:
            resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))

    return subprocess.run(
        command, check=False, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout, preexec_fn=limit
    )


def _sample_of(root: Path, rid: int) -> int:
    lines = (root / "trajectory" / f"{rid}.jsonl").read_text().splitlines()
    return int(json.loads(lines[0])["sample_index"])


# --- 11: a sidecar that cannot be read is not "no conversation recorded" --------------------------


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file: the directory case below covers it")
def test_a_sidecar_of_mode_000_says_permission_denied(tmp_path: Path) -> None:
    root = _run(tmp_path)
    sample = _sample_of(root, 2)
    (root / "trajectory" / "2.jsonl").chmod(0)
    done = _export(root, "--step", "2", "--sample", str(sample), "--conversation")
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "2.jsonl" in line and "permission denied" in line.lower()
    assert "no conversation recorded" not in line


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_an_unreadable_sidecar_says_why_not_none_recorded(tmp_path: Path, kind: str) -> None:
    """What root cannot be denied: a directory (or a FIFO) where the sidecar should be."""
    root = _run(tmp_path)
    sample = _sample_of(root, 2)
    path = root / "trajectory" / "2.jsonl"
    path.unlink()
    if kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    done = _export(root, "--step", "2", "--sample", str(sample), "--conversation", timeout=30)
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert str(path) in line and "cannot be read" in line and kind.replace("fifo", "FIFO") in line
    assert "no conversation recorded" not in line
