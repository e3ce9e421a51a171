"""Numbers become text only in ``tui/formatting.py`` (ARCHITECTURE.md, "Cells").

A format spec that presents a number (a type such as ``f``, ``g``, ``%``, ``e``, ``d``, or a thousands
separator) anywhere else in ``tui/`` fails this test: the precision, the units and the missing-value dash of
every number on screen are decided in one module, where the no-cut rule (``number_within``) lives too.
Alignment alone (``{text:>6}``) lays out text already formatted and is allowed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TUI = Path(__file__).resolve().parents[2] / "tui"
HOME = TUI / "formatting.py"
NUMERIC = re.compile(r"[,_]|[bcdeEfFgGnoxX%]$")
"""A spec that presents a number: grouping, or a presentation type at its end."""


def _spec_text(spec: ast.JoinedStr) -> str:
    return "".join(part.value for part in spec.values if isinstance(part, ast.Constant) and isinstance(part.value, str))


def _formats_a_literal(node: ast.AST) -> bool:
    """``"...".format(...)`` or ``"..." % ...``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return isinstance(node.func.value, ast.Constant)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
        return isinstance(node.left.value, str)
    return False


def numeric_specs(source: str) -> list[tuple[int, str]]:
    """(line, expression) of each f-string field in ``source`` whose spec presents a number, and each
    ``str.format``/``%`` formatting of a literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FormattedValue) and isinstance(node.format_spec, ast.JoinedStr):
            nested = any(isinstance(p, ast.FormattedValue) for p in node.format_spec.values)
            text = _spec_text(node.format_spec)
            if NUMERIC.search(text) or (nested and not text.startswith(("<", ">", "^"))):
                found.append((node.lineno, ast.unparse(node)))
        elif _formats_a_literal(node):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_rule_sees_what_it_forbids() -> None:
    assert [e for _, e in numeric_specs('f"{x:.2f} {y:,} {z:.0%} {w:g} {v:.{d}f}"')] == [
        "{x:.2f}",
        "{y:,}",
        "{z:.0%}",
        "{w:g}",
        "{v:.{d}f}",
    ]
    assert numeric_specs('f"{name:>8} {label:<20} {text!r}"') == []
    assert len(numeric_specs('"%.2f" % x')) == 1
    assert len(numeric_specs('"{:.2f}".format(x)')) == 1


def test_numbers_become_text_only_in_formatting() -> None:
    offenders = [
        f"{path.relative_to(TUI.parent)}:{line}: {expression}"
        for path in sorted(TUI.rglob("*.py"))
        if path != HOME
        for line, expression in numeric_specs(path.read_text())
    ]
    assert offenders == []
    assert numeric_specs(HOME.read_text()), "formatting.py itself formats numbers"
