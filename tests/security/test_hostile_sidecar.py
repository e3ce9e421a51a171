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


# --- 8: lines of empty objects: an allocation budget per line -------------------------------------


def _append_lines(path: Path, lines: list[bytes]) -> None:
    with open(path, "ab") as handle:
        handle.write(b"".join(line + b"\n" for line in lines))


def _hostile_then_real(root: Path, rid: int, hostile: list[bytes]) -> int:
    """Put ``hostile`` lines before the step's real ones; returns a sample whose real line comes last."""
    path = root / "trajectory" / f"{rid}.jsonl"
    real = path.read_bytes()
    path.write_bytes(b"")
    _append_lines(path, hostile)
    path.write_bytes(path.read_bytes() + real)
    return _sample_of_last(path)


def _sample_of_last(path: Path) -> int:
    return int(json.loads(path.read_bytes().splitlines()[-1])["sample_index"])


EMPTY_MESSAGES = 200_000
"""Empty message objects per hostile line (600 KB a line; ~48 bytes of memory per byte, unbudgeted)."""


def test_lines_of_empty_messages_are_refused_within_a_memory_budget(tmp_path: Path) -> None:
    root = _run(tmp_path)
    line = b'{"sample_index": 1, "messages": [' + b",".join([b"{}"] * EMPTY_MESSAGES) + b"]}"
    hostile = [line.replace(b'"sample_index": 1', f'"sample_index": {900_000 + i}'.encode()) for i in range(34)]
    sample = _hostile_then_real(root, 2, hostile)
    assert (root / "trajectory" / "2.jsonl").stat().st_size > 20_000_000
    started = time.monotonic()
    done = _export(root, "--step", "2", "--sample", str(sample), "--conversation", mem_mb=700, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 30
    document = json.loads(done.stdout)
    assert document["sample_index"] == sample and len(document["malformed_lines"]) == len(hostile)


def test_a_line_of_empty_objects_is_malformed_and_named(tmp_path: Path) -> None:
    (tmp_path / "trajectory").mkdir()
    path = tmp_path / "trajectory" / "1.jsonl"
    good = {"sample_index": 7, "messages": [{"role": "user", "content": "hi {[x]}"}]}
    line = b'{"sample_index": 5, "messages": [' + b",".join([b"{}"] * 5_000) + b"]}"
    _append_lines(path, [line, json.dumps(good).encode()])
    sidecar = read_sidecar(tmp_path, 1, False)
    assert sidecar is not None and sorted(sidecar.conversations) == [7]
    assert sidecar.bad_lines == (0,)


def test_real_conversations_fit_the_budget(tmp_path: Path) -> None:
    """Tool calls, nested arguments, braces in content: a demo run's sidecars read whole."""
    root = _run(tmp_path)
    for rid in range(3):
        sidecar = read_sidecar(root, rid, False)
        assert sidecar is not None and sidecar.bad_lines == () and sidecar.conversations


# --- 9: sample indices that hash alike ------------------------------------------------------------


COLLIDING = 75_760
"""Lines whose sample_index is k·(2**61 − 1): all hash to 0, so a dict of them is quadratic (~30 s)."""


def test_sample_indices_that_hash_alike_do_not_stall_a_conversation(tmp_path: Path) -> None:
    root = _run(tmp_path)
    assert len({hash(k * MERSENNE) for k in range(1, 100)}) == 1
    hostile = [f'{{"sample_index": {k * MERSENNE}, "messages": []}}'.encode() for k in range(1, COLLIDING + 1)]
    sample = _hostile_then_real(root, 2, hostile)
    started = time.monotonic()
    done = _export(root, "--step", "2", "--sample", str(sample), "--conversation", timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    assert elapsed < 10, elapsed
    document = json.loads(done.stdout)
    assert document["sample_index"] == sample
    # at most the few multiples that fit 64 bits are kept; the rest are malformed, not keys
    assert len(document["malformed_lines"]) >= COLLIDING - 8
