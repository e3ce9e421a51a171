"""core is headless: importing every core module pulls in neither textual, rich nor torch."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

from miles_tui import core

ROOT = Path(__file__).resolve().parents[1]


def test_core_never_imports_the_ui_or_torch() -> None:
    modules = [m.name for m in pkgutil.walk_packages(core.__path__, prefix="miles_tui.core.")]
    assert "miles_tui.core.dump.resolve" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in ('textual', 'rich', 'torch', 'plotext', 'miles_tui.tui') if m in sys.modules)\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_headless_cli_does_not_import_textual() -> None:
    code = (
        "import sys\nfrom miles_tui.tui import cli\n"
        "assert 'textual' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_import_contract() -> None:
    """import-linter runs from this interpreter (as the test extra installs it), never skipped."""
    command = [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"]
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_pt_reader_contract_names_every_other_module_of_dump() -> None:
    """The contract forbids dump's modules by name: a module added to dump is added to it too."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c.get("source_modules") == ["miles_tui.core.dump.pt"])
    dump = ROOT / "core" / "dump"
    others = {f"miles_tui.core.dump.{p.stem}" for p in dump.glob("*.py") if p.stem != "__init__"}
    others |= {f"miles_tui.core.dump.{p.name}" for p in dump.iterdir() if (p / "__init__.py").is_file()}
    assert set(contract["forbidden_modules"]) == others - {"miles_tui.core.dump.pt"}


def test_core_shows_its_layers_at_a_glance() -> None:
    """core's top level holds its packages and follow, at most 8 entries (ARCHITECTURE.md, "The layers of core")."""
    entries = [p.name for p in (ROOT / "core").iterdir() if p.name != "__pycache__" and not p.name.startswith(".")]
    assert len(entries) <= 8, sorted(entries)


def test_every_top_level_entry_of_tui_is_in_a_layer() -> None:
    """tui's layers contract names each of its top-level modules and packages: a module added at the top
    is placed in a layer, never left outside the contract (ARCHITECTURE.md, "The layers of tui")."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c.get("containers") == ["miles_tui.tui"])
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    tui = ROOT / "tui"
    entries = {p.stem for p in tui.glob("*.py") if p.stem != "__init__"}
    entries |= {p.name for p in tui.iterdir() if (p / "__init__.py").is_file()}
    assert entries == layered, (sorted(entries - layered), sorted(layered - entries))
    assert len(entries) <= 13, sorted(entries)
