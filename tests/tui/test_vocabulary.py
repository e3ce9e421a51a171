"""One vocabulary (issue 24, item 7): the same concept never spelled two ways in the UI's strings, every
column header and marker explained in ``?``, percentages (not fractions) wherever a person reads them, and
each of "follow" (poll the run) and "track" (move to the newest step) meaning one thing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from miles_tui.core.commands.report import build_report, render_report
from miles_tui.tui.screens.overview_screen import STEP_COLUMNS
from miles_tui.tui.views.advisory_rows import LOG_COLUMNS
from miles_tui.tui.views.compare_rows import GROUP_COLUMNS as COMPARE_COLUMNS
from miles_tui.tui.views.compare_rows import TRACE_COLUMNS
from miles_tui.tui.views.glossary import GLOSSARY
from miles_tui.tui.views.outlier_rows import SAMPLE_COLUMNS as OUTLIER_SAMPLE_COLUMNS
from miles_tui.tui.views.outlier_rows import TOKEN_COLUMNS
from miles_tui.tui.views.step_rows import GROUP_COLUMNS, SAMPLE_COLUMNS
from tests.conftest import EPOCH
from tests.harness import frozen_app, screen_text, settle

REPO = Path(__file__).resolve().parents[2]

VARIANTS = {
    "zero-std": ("0-std", "0σ", "ZERO STD", "zero std", "degenerate group"),
    "|lpΔ|": ("|lp Δ|", "lp diff", "|lp diff|", "lp Δ"),
    "ratio": ("imp ratio",),
    "track (f)": ("following the newest", "Follow on", "Follow off", "f: follow", "follow paused"),
}
"""The canonical spelling -> the spellings it replaced (never to be seen in a UI string again)."""


def _ui_strings() -> list[tuple[str, int, str]]:
    """Every string constant of the UI's modules and report's text (docstrings left out: not on screen)."""
    files = [
        *sorted((REPO / "tui").rglob("*.py")),
        REPO / "core" / "commands" / "report.py",
        REPO / "core" / "analysis" / "token_heat.py",
    ]
    found = []
    for path in files:
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found.append((str(path.relative_to(REPO)), node.lineno, node.value))
    return found


def test_no_concept_is_spelled_two_ways_in_the_ui() -> None:
    wrong = [
        f"{where}:{line}: {old!r} (say {canonical!r})"
        for where, line, text in _ui_strings()
        for canonical, olds in VARIANTS.items()
        for old in olds
        if old in text
    ]
    assert not wrong, "\n".join(wrong)


PLAIN = {
    "sample", "group", "status", "reward", "step", "kind", "n", "state", "#", "token", "resp pos", "level",
    "advisory", "first step", "last step", "seen", "first seen", "last seen", "message", "turns", "tools",
    "std", "resp len", "n A/B", "+median", "score", "value", "mean", "A", "B",
}  # fmt: skip
"""Headers that are plain words (the rest must be in the glossary)."""


def _terms() -> set[str]:
    return {part for term, _meaning in GLOSSARY for part in (term, *term.split())}


@pytest.mark.parametrize(
    "columns",
    [SAMPLE_COLUMNS, GROUP_COLUMNS, STEP_COLUMNS, COMPARE_COLUMNS, TRACE_COLUMNS, LOG_COLUMNS, OUTLIER_SAMPLE_COLUMNS,
     *TOKEN_COLUMNS.values()],
)  # fmt: skip
def test_every_abbreviated_header_is_in_the_glossary(columns: tuple[object, ...]) -> None:
    terms = _terms()
    missing = []
    for column in columns:
        label = column.label  # type: ignore[attr-defined]
        words = [label, *label.replace("A/B", "").split()]
        if label in PLAIN or any(w in terms for w in words) or all(w in PLAIN or w in terms for w in label.split()):
            continue
        missing.append(label)
    assert not missing, f"headers with no glossary entry: {missing}"


def test_report_prints_percentages_as_the_monitor_does(demo_run: Path) -> None:
    text = render_report(build_report(demo_run, EPOCH))
    line = next(line for line in text.splitlines() if "zero-std groups" in line)
    assert "%" in line.split("zero-std groups")[1].split(",")[0], line
    assert "|lpΔ|" in line and "lp diff" not in line


async def test_help_explains_every_abbreviation(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(120, 200)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "question_mark")
        await settle(pilot)
        text = screen_text(app)
        for term in ("|lpΔ|", "zero-std", "maxH", "adv σ", "spec", "ngen s", "mixed", "''*", "track (f)"):
            assert term in text, term


async def test_no_follow_never_toasts_about_following(demo_run: Path) -> None:
    """--no-follow (read once) and f (track the newest step) are two words now."""
    app = frozen_app(demo_run, follow=False)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("f", "f")
        await settle(pilot)
        text = screen_text(app)
        assert "■ STATIC" in text and "tracking" in text and "following" not in text


def _strings_of(path: Path) -> list[str]:
    """A module's string constants that can reach a user (advisory messages, labels): bare string statements
    (docstrings of modules, functions and attributes) left out."""
    tree = ast.parse(path.read_text())
    bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in bare
    ]


def test_advisory_messages_docs_and_csv_headers_use_the_same_words(golden_copy: object) -> None:
    """The words a user reads outside the screens: advisory messages (core's rules), the README, the
    command-line contract, and the CSV header ``export --format csv`` writes (the contract's ROW names)."""
    from miles_tui.core.commands.export import rows_csv, step_export
    from miles_tui.core.dump import Run

    texts = {
        str(p.relative_to(REPO)): "\n".join(_strings_of(p)) for p in sorted((REPO / "core" / "analysis").glob("*.py"))
    }
    texts |= {name: (REPO / name).read_text() for name in ("README.md", "docs/cli.md")}
    root = golden_copy("tp_dup")  # type: ignore[operator]
    header = rows_csv(step_export(Run(root), 2, False, EPOCH)).splitlines()[0]
    texts["export --format csv header"] = header
    wrong = [
        f"{where}: {old!r} (say {canonical!r})"
        for where, body in texts.items()
        for canonical, olds in VARIANTS.items()
        for old in olds
        if old in body
    ]
    assert not wrong, "\n".join(wrong)
    contract = (REPO / "docs" / "cli.md").read_text()
    undocumented = [name for name in header.split(",") if not re.search(rf"\b{name}\b", contract)]
    assert not undocumented, f"CSV columns the contract does not name: {undocumented}"
