"""The project's own checks run with the tests, so CI enforces them: ruff, ruff format, mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, check=False, cwd=ROOT)


def test_ruff_check() -> None:
    result = _run(sys.executable, "-m", "ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format() -> None:
    result = _run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def mypy_strict(stage: Path) -> subprocess.CompletedProcess[str]:
    """mypy --strict over the installed package names, from a stage of links (see pyproject)."""
    package = stage / "miles_tui"
    package.mkdir(parents=True, exist_ok=True)
    for name in ("core", "tui"):
        link = package / name
        if not link.exists():
            link.symlink_to(ROOT / name, target_is_directory=True)
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    command += ["-p", "miles_tui.core", "-p", "miles_tui.tui"]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=stage)


def test_mypy_strict(tmp_path: Path) -> None:
    result = mypy_strict(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_install_claims_only_its_own_name(tmp_path: Path) -> None:
    """The bare names core and tui are left to whoever else wants them."""
    code = "import importlib.util as u; print(u.find_spec('core'), u.find_spec('tui'), u.find_spec('miles_tui.core'))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert result.stdout.split()[:2] == ["None", "None"], result.stdout + result.stderr
    assert "miles_tui.core" in result.stdout


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as stage:
        outcome = mypy_strict(Path(stage))
    print(outcome.stdout + outcome.stderr, end="")
    raise SystemExit(outcome.returncode)


def test_no_module_over_500_lines() -> None:
    """Issue 10: a module past 500 lines is a package or a split waiting to happen."""
    long = [
        f"{path.relative_to(ROOT)}: {count} lines"
        for folder in ("core", "tui")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (count := len(path.read_text().splitlines())) > 500
    ]
    assert not long, "\n".join(long)
