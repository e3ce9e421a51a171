"""Every cell on screen says what ``export`` says (issue 24, item 1): walk every column of the rollout table
(samples and groups) at widths 40-200 on golden copies, and check each visible cell against ``export``'s
value at the precision the cell shows.

A cell cut at the pane's edge (``0.018`` drawn as ``0.01``) reads as another number and fails here; so does
a row that loses its identity (the pinned sample and group columns are read from the same line), and a
header whose name a sort arrow cut.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from miles_tui.core.commands.export import step_export
from miles_tui.core.dump import Run
from miles_tui.tui.app import make_app
from miles_tui.tui.screens.step_screen import StepScreen
from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.conftest import EPOCH
from tests.harness import settle

CASES = [("staleness", 10), ("tp_dup", 2), ("degenerate", 1)]
WIDTHS = (40, 57, 100, 133, 200)
_NUMBER = re.compile(r"^-?\d+(\.(\d+))?(e(-?\d+))?$")


def _close(cell: str, value: Any, where: str) -> None:
    """``cell`` is ``value`` at the precision the cell shows (``–``: no value; ``…``: did not fit)."""
    if cell == "…":
        return  # a visible overflow mark is honest; a prefix is not
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        assert cell in ("–", "UNREAD"), f"{where}: {cell!r} for no value"
        return
    if isinstance(value, bool):
        assert cell == ("yes" if value else "no"), f"{where}: {cell!r} for {value}"
        return
    match = _NUMBER.match(cell.replace("−", "-"))
    assert match is not None, f"{where}: {cell!r} is not a number (export says {value})"
    decimals = len(match.group(2) or "")
    exponent = int(match.group(4) or 0)
    tolerance = 0.5 * 10.0 ** (exponent - decimals)
    assert abs(float(cell) - float(value)) <= tolerance * (1 + 1e-9) + 1e-12, f"{where}: {cell!r} but export {value}"


def _percent(cell: str, value: Any, where: str) -> None:
    if value is None:
        assert cell == "–", f"{where}: {cell!r} for no value"
        return
    assert cell.endswith("%"), f"{where}: {cell!r}"
    _close(cell[:-1], float(value) * 100, where)


def _first_int(cell: str, value: Any, where: str) -> None:
    head = cell.split(maxsplit=1)[0] if cell.split() else ""
    assert head == ("–" if value is None else str(value)), f"{where}: {cell!r} for {value}"


def _status(cell: str, row: dict[str, Any], where: str) -> None:
    full = str(row["status"]) + (" ✗ removed" if row["remove_sample"] else "")
    assert cell == full or (cell.endswith("…") and full.startswith(cell[:-1])), f"{where}: {cell!r} for {full!r}"


def _version(cell: str, row: dict[str, Any], where: str) -> None:
    last = row["weight_version"]
    if last is None:
        assert cell == "–", where
    else:
        assert (str(last) or "''") in cell, f"{where}: {cell!r} for weight version {last!r}"


def _per_token(cell: str, row: dict[str, Any], where: str) -> None:
    if row["alignment_failed"]:
        assert cell == "UNREADABLE", f"{where}: {cell!r}"
    elif row["dumped_rank"] is None:
        assert cell == "no train row", f"{where}: {cell!r}"
    else:
        assert cell == "ok", f"{where}: {cell!r}"


Check = Callable[[str, dict[str, Any], str], None]


def _value(key: str, check: Callable[[str, Any, str], None] = _close) -> Check:
    return lambda cell, row, where: check(cell, row[key], where)


SAMPLE_CHECKS: dict[str, Check] = {
    "sample_index": _value("sample_index", _first_int),
    "group_index": _value("group_index", _first_int),
    "status": _status,
    "weight_version": _version,
    "spec_accept_rate": _value("spec_accept_rate", _percent),
    "prefix_cache_hit_rate": _value("prefix_cache_hit_rate", _percent),
    "alignment_failed": _per_token,
}
GROUP_CHECKS: dict[str, Check] = {
    "group_index": _value("group_index", _first_int),
    "truncated_frac": _value("truncated_frac", _percent),
    "zero_std": lambda cell, g, where: _first_int(cell, "zero-std" if g["zero_std"] else "–", where),
    "unreadable": lambda cell, g, where: None,  # a count of the group's samples, checked per sample above
}


def _walk(table: VirtualTable, rows_by_id: dict[Any, dict[str, Any]], checks: dict[str, Check], where: str) -> set[str]:
    """Check every cell drawn now; return the keys of the columns drawn."""
    drawn = table.drawn_columns()
    keys = [column.key for column, _x in drawn]
    header = table.render_line(0).text
    width = table.scrollable_content_region.width
    end = max((x + column.width for column, x in drawn), default=0)
    for column, x in drawn:
        label = header[x : x + column.width].strip()
        assert label.lstrip("▲▼") == column.label.lstrip("▲▼"), f"{where}: header {label!r} for {column.label!r}"
    assert header[end:width].strip() in ("", "›"), f"{where}: past the last whole column: {header[end:]!r}"
    assert drawn and drawn[0][0].pinned, f"{where}: the identity column scrolled away"
    for y in range(1, min(len(table.rows), table.scrollable_content_region.height - 1) + 1):
        line = table.render_line(y).text
        assert not line[end:width].strip(), f"{where}: a cut cell past the last whole column: {line[end:]!r}"
        ident = line[drawn[0][1] : drawn[0][1] + drawn[0][0].width].split()[0]
        row = rows_by_id[None if ident == "–" else int(ident)]
        for column, x in drawn:
            cell = line[x : x + column.width].strip()
            check = checks.get(column.key) or _value(column.key)
            check(cell, row, f"{where} row {ident} column {column.label!r}")
    return set(keys)


@pytest.mark.parametrize(("case", "step"), CASES)
async def test_every_visible_cell_is_exports_value_at_every_width(
    golden_copy: Callable[[str], Path], case: str, step: int
) -> None:
    root = golden_copy(case)
    truth = step_export(Run(root), step, False, EPOCH)
    samples = {row["sample_index"]: row for row in truth["samples"]}
    groups = {group["group_index"]: group for group in truth["groups"]}
    app = make_app(root, poll_seconds=3600, clock=lambda: EPOCH, start=(step, False, None))
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        table = app.screen.query_one("#samples", VirtualTable)
        for view, rows_by_id, checks in (("samples", samples, SAMPLE_CHECKS), ("groups", groups, GROUP_CHECKS)):
            if view == "groups":
                await pilot.press("g")
                await settle(pilot)
            for width in WIDTHS:
                await pilot.resize_terminal(width, 24)
                await settle(pilot)
                seen: set[str] = set()
                for sort in (False, True):
                    if sort:  # sorted by the last column: its header keeps its name beside the arrow
                        await pilot.press("s")
                        await settle(pilot)
                    for index in [*range(len(table.columns)), *range(len(table.columns) - 1, -1, -1)]:
                        table.cursor_column = index
                        await pilot.pause()
                        where = f"{case} step {step} {view} at {width}x24, sorted {sort}, cursor on column {index}"
                        seen |= _walk(table, rows_by_id, checks, where)
                        assert table.columns[index].key in {c.key for c, _x in table.drawn_columns()}, where
                await pilot.press("o")
                await settle(pilot)
                assert seen == {column.key for column in table.columns}, f"{view} at {width}: columns never shown"
