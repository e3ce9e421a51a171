"""Unbounded reads (issue 9.5): files that should be small are read under a cap, devices never.

The commands run in a child limited to 1 GiB of address space: a reader that slurps
``/dev/zero`` or a multi-GB sparse file dies there with MemoryError (an ``internal error``).
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import EPOCH
from hostile_fs import age, cli, python, symlink

from miles_tui.core.base.run_files import META_MAX_BYTES, TOKENIZER_MAX_BYTES
from miles_tui.core.base.tail import MAX_LINE_BYTES
from miles_tui.core.dump.trajectory import TRAJECTORY_MAX_BYTES


def _sparse(path: Path, size: int, tail: bytes = b"") -> Path:
    """A file of ``size`` NUL bytes that costs no disk (a hole), then ``tail``."""
    path.unlink(missing_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size)
        handle.seek(size)
        handle.write(tail)
    return path


def test_meta_json_linked_to_dev_zero_is_refused_not_read(demo_run: Path) -> None:
    meta = symlink(demo_run / "dashboard" / "meta.json", "/dev/zero")
    report = cli("report", demo_run)
    assert "internal error" not in report.stderr, report.stderr
    lines = [line for line in report.stdout.splitlines() if str(meta) in line]
    assert len(lines) == 1 and "a character device where a file should be" in lines[0]
    assert "step 3: 16 samples" in report.stdout


def test_a_huge_meta_json_is_refused_by_its_size(demo_run: Path) -> None:
    meta = _sparse(demo_run / "dashboard" / "meta.json", 3 << 30)
    report = cli("report", demo_run)
    assert "internal error" not in report.stderr, report.stderr
    lines = [line for line in report.stdout.splitlines() if str(meta) in line]
    assert len(lines) == 1, report.stdout
    assert f"larger than a meta.json can be (3072 MiB, the cap is {META_MAX_BYTES >> 20} MiB)" in lines[0]


def test_a_dump_file_linked_to_dev_zero_is_named(demo_run: Path) -> None:
    bad = symlink(demo_run / "rollout_data" / "4.pt", "/dev/zero")
    age(bad, EPOCH - 600)
    export = cli("export", demo_run, "--step", "4")
    assert export.returncode == 1 and export.stderr.count("\n") == 1
    assert export.stderr.startswith(f"miles-tui: {bad}: a character device where a file should be")


def _sidecar_and_tokenizer(run: Path) -> list[str]:
    code = (
        "from pathlib import Path\n"
        "from miles_tui.core.dump.trajectory import read_sidecar\n"
        "from miles_tui.core.dump.tokenizer import Detokenizer\n"
        f"run = Path({str(run)!r})\n"
        "car = read_sidecar(run, 3, False)\n"
        "print(car.problem)\n"
        "print(sorted(car.conversations), car.bad_lines)\n"
        "print(Detokenizer(run / 'tokenizer').status.reason)\n"
    )
    out = python(code)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


def test_sidecar_and_tokenizer_linked_to_dev_zero_are_refused(demo_run: Path) -> None:
    sidecar = symlink(demo_run / "trajectory" / "3.jsonl", "/dev/zero")
    (demo_run / "tokenizer").mkdir()
    tokenizer = symlink(demo_run / "tokenizer" / "tokenizer.json", "/dev/zero")
    problem, conversations, reason = _sidecar_and_tokenizer(demo_run)
    assert problem.startswith(f"{sidecar}: a character device") and conversations == "[] ()"
    assert reason.startswith(f"{tokenizer}: a character device") and reason.endswith(": showing token ids")


def test_huge_sidecar_and_tokenizer_files_are_refused_by_their_size(demo_run: Path) -> None:
    sidecar = _sparse(demo_run / "trajectory" / "3.jsonl", TRAJECTORY_MAX_BYTES + 1, b"\n")
    (demo_run / "tokenizer").mkdir()
    tokenizer = _sparse(demo_run / "tokenizer" / "tokenizer.json", TOKENIZER_MAX_BYTES + (1 << 30))
    problem, conversations, reason = _sidecar_and_tokenizer(demo_run)
    assert problem.startswith(f"{sidecar}: 1024 MiB, larger than a sidecar can be") and conversations == "[] ()"
    assert reason.startswith(f"{tokenizer}: larger than a tokenizer file can be (1152 MiB")


def test_a_sidecar_line_over_the_cap_is_skipped_without_holding_it(demo_run: Path) -> None:
    """900 MB of one line, then a good one: the long line is malformed, the next is read."""
    path = demo_run / "trajectory" / "3.jsonl"
    good = path.read_bytes().splitlines(keepends=True)[0]
    _sparse(path, 900 << 20, b"\n" + good)
    assert MAX_LINE_BYTES < 900 << 20
    problem, conversations, _reason = _sidecar_and_tokenizer(demo_run)
    assert problem == "None"
    assert conversations.endswith("(0,)")  # the long line, at byte 0, skipped
    assert conversations.startswith("[") and conversations != "[] (0,)"  # the good line after it was read
    os.unlink(path)
