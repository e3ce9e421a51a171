"""The app's shape, as ARCHITECTURE.md states it: no module below the app imports it (screens, the header and
the palette's commands type against the MonitorApp protocol), and every screen is pushed by navigation."""

from __future__ import annotations

import ast
from pathlib import Path

TUI = Path(__file__).resolve().parents[2] / "tui"
PUSHERS = {"navigation.py", "app.py"}


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(TUI.rglob("*.py"))]


def test_nothing_below_the_app_imports_it_not_even_for_typing() -> None:
    wrong = []
    for path, tree in _modules():
        if path.name in {"app.py", "cli.py", "monitor.py"}:  # the app, and the two entry points that start it
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "miles_tui.tui.app":
                wrong.append(f"{path.relative_to(TUI)}:{node.lineno}")
    assert not wrong, wrong


def test_every_screen_is_pushed_by_navigation() -> None:
    wrong = []
    for path, tree in _modules():
        if path.name in PUSHERS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"push_screen", "switch_screen"}:
                wrong.append(f"{path.relative_to(TUI)}:{node.lineno}: {node.attr}")
    assert not wrong, wrong
