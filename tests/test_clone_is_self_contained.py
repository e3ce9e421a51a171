"""A clone runs everything: nothing in the repository reads the folder beside it that the golden runs were first
copied from (a contributor's clone has no ``../shared``; the scenes once read their golden runs there, so the
snapshot tests passed only on the machine that had it)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(
    r"""\.\./shared|parents?\[\d\]\s*\.parent\s*/\s*["']shared["']|/\s*["']shared["']\s*/\s*["']golden"""
)
"""A path to ``../shared``: written out, or built with pathlib."""


def test_no_file_of_the_repository_reaches_outside_it() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    offenders = []
    for name in tracked.split():
        path = ROOT / name
        if name.startswith("tests/golden/") or path.suffix not in {".py", ".md", ".toml", ".sh", ".cfg", ""}:
            continue
        if not path.is_file() or path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line) and 'startswith("../shared' not in line:  # the README-link test's own rule
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert offenders == []


def test_the_rule_sees_both_spellings() -> None:
    assert OUTSIDE.search('GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden"')
    assert OUTSIDE.search("see ../shared/spec/cli.md")
    assert not OUTSIDE.search('GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"')
