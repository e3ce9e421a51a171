"""Every cell on screen says what ``export`` says (issue 24, item 1): walk every column of every table (the
step's samples and groups, compare and its traced group, the outliers' tokens and samples, the advisory
log, the engines) at widths 40-200 on golden copies, and check each visible cell against ``export``'s value
at the precision the cell shows.

A cell cut at the pane's edge (``0.018`` drawn as ``0.01``) reads as another number and fails here; so does
a row that loses its identity (the pinned columns are checked on every line), a header whose name a sort
arrow cut, and anything drawn past the last whole column. ``export`` has no advisory log and no engine
figures: those two tables are checked against core's values, the ones ``report`` prints.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from miles_tui.core.analysis import OutlierKind
from miles_tui.core.commands.export import step_export, tokens_export
from miles_tui.core.dump import Run
from miles_tui.tui.app import make_app
from miles_tui.tui.formatting import LEVEL_TAG, date_time
from miles_tui.tui.screens.advisory_log_screen import AdvisoryLogScreen
from miles_tui.tui.screens.compare_screen import CompareScreen
from miles_tui.tui.screens.engines_screen import EnginesScreen
from miles_tui.tui.screens.outlier_screen import OutlierScreen
from miles_tui.tui.screens.step_screen import StepScreen
from miles_tui.tui.views.engine_rows import MORE, table_lines
from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.conftest import EPOCH
from tests.harness import frozen_app, settle
from tests.tui.cell_checks import close, delta, first_int, percent, text, walk_columns

WIDTHS = (40, 100, 200)
"""Every table is walked at these widths and at its own edges (the width its last column just fits, and one
less)."""
GoldenCopy = Callable[[str], Path]


def _version(cell: str, last: Any, where: str) -> None:
    assert cell == "–" if last is None else (str(last) or "''") in cell, f"{where}: {cell!r} for version {last!r}"


def _per_token(cell: str, row: dict[str, Any], where: str) -> None:
    expected = "UNREADABLE" if row["alignment_failed"] else "no train row" if row["dumped_rank"] is None else "ok"
    assert cell == expected, f"{where}: {cell!r}"


def _status(cell: str, row: dict[str, Any], where: str) -> None:
    text(cell, str(row["status"]) + (" ✗ removed" if row["remove_sample"] else ""), where)


def _sample_cell(key: str, cell: str, row: dict[str, Any], where: str) -> None:
    """A cell of the step's sample table: ROW's value of the same name."""
    if key in ("sample_index", "group_index"):
        first_int(cell, row[key], where)
    elif key == "status":
        _status(cell, row, where)
    elif key == "weight_version":
        _version(cell, row["weight_version"], where)
    elif key in ("spec_accept_rate", "prefix_cache_hit_rate"):
        percent(cell, row[key], where)
    elif key == "alignment_failed":
        _per_token(cell, row, where)
    else:
        close(cell, row[key], where)


def _group_cell(key: str, cell: str, group: dict[str, Any], where: str) -> None:
    """A cell of the step's group table: GROUP's value of the same name."""
    if key == "group_index":
        first_int(cell, group[key], where)
    elif key == "truncated_frac":
        percent(cell, group[key], where)
    elif key == "zero_std":
        first_int(cell, "zero-std" if group["zero_std"] else "no", where)
    elif key != "unreadable":  # a count of the group's unreadable samples, checked per sample above
        close(cell, group[key], where)


@pytest.mark.parametrize(("case", "step"), [("staleness", 10), ("tp_dup", 2), ("degenerate", 1)])
async def test_the_step_tables_cells_are_exports_values(golden_copy: GoldenCopy, case: str, step: int) -> None:
    root = golden_copy(case)
    truth = step_export(Run(root), step, False, EPOCH)
    samples = {row["sample_index"]: row for row in truth["samples"]}
    groups = {group["group_index"]: group for group in truth["groups"]}

    def sample_check(key: str, cell: str, row_key: Hashable, where: str) -> None:
        row = samples[row_key]
        _sample_cell(key, cell, row, where)

    def group_check(key: str, cell: str, row_key: Hashable, where: str) -> None:
        _group_cell(key, cell, groups[row_key[1] if isinstance(row_key, tuple) else row_key], where)

    app = make_app(root, poll_seconds=3600, clock=lambda: EPOCH, start=(step, False, None))
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        table = app.screen.query_one("#samples", VirtualTable)
        assert {row.key for row in table.rows} == set(samples)
        await walk_columns(pilot, table, sample_check, f"{case} step {step} samples", WIDTHS)
        await pilot.press("s")  # sorted by the column under the cursor: its header keeps its name beside ▲
        await walk_columns(pilot, table, sample_check, f"{case} step {step} samples sorted", (40,))
        await pilot.press("o", "g")
        await settle(pilot)
        await walk_columns(pilot, table, group_check, f"{case} step {step} groups", WIDTHS)


def _group_staleness(samples: list[dict[str, Any]], group: int) -> float | None:
    ages = [row["staleness"] for row in samples if row["group_index"] == group and row["staleness"] is not None]
    return sum(ages) / len(ages) if ages else None


def _compare_check(a: dict[str, Any], b: dict[str, Any]) -> Callable[[str, str, Hashable, str], None]:
    """The per-group table of compare A → B, from the two steps' exports."""
    groups = [{g["group_index"]: g for g in doc["groups"]} for doc in (a, b)]
    figures = {"reward": "reward_mean", "std": "reward_std", "len": "response_length_mean", "trunc": "truncated_frac"}

    def value(side: int, name: str, slot: int) -> Any:
        group = groups[side].get(slot)
        if group is None:
            return None
        if name == "stale":
            return _group_staleness((a, b)[side]["samples"], slot)
        return group[figures[name]]

    def check(key: str, cell: str, row_key: Hashable, where: str) -> None:
        slot = row_key[1]  # type: ignore[index]
        if key == "group":
            first_int(cell, slot, where)
        elif key == "n":
            n = [g[slot]["n"] if slot in g else "–" for g in groups]
            assert cell == f"{n[0]}/{n[1]}", f"{where}: {cell!r} for {n}"
        elif key == "zero_std":
            marks = ["–" if slot not in g else "zero-std" if g[slot]["zero_std"] else "·" for g in groups]
            assert cell == "/".join(marks), f"{where}: {cell!r} for {marks}"
        else:
            name, side = key.rsplit("_", 1)
            points = name == "trunc"
            if side == "d":
                delta(cell, value(0, name, slot), value(1, name, slot), where, points)
            elif points:
                percent(cell, value("ab".index(side), name, slot), where)
            else:
                close(cell, value("ab".index(side), name, slot), where)

    return check


def _trace_check(docs: dict[int, dict[str, Any]], slot: int) -> Callable[[str, str, Hashable, str], None]:
    """The traced group slot: a line per step (its GROUP) and one per sample (its ROW)."""

    def check(key: str, cell: str, row_key: Hashable, where: str) -> None:
        kind, step = row_key[0], row_key[1]  # type: ignore[index]
        doc = docs[step]
        if kind == "step":
            group = next(g for g in doc["groups"] if g["group_index"] == slot)
            expected = {
                "step": None, "sample": None, "n": group["n"], "reward": group["reward_mean"],
                "std": group["reward_std"], "len": group["response_length_mean"],
                "stale": _group_staleness(doc["samples"], slot),
            }  # fmt: skip
            if key == "step":
                first_int(cell, step, where)
            elif key == "sample":
                assert cell == "group", where
            elif key == "zero_std":
                assert cell == ("zero-std" if group["zero_std"] else "·"), where
            elif key == "trunc":
                percent(cell, group["truncated_frac"], where)
            elif key == "status":
                assert cell == "", where
            else:
                close(cell, expected[key], where)
            return
        row = next(r for r in doc["samples"] if r["sample_index"] == row_key[2])  # type: ignore[index]
        names = {"sample": "sample_index", "len": "response_length", "stale": "staleness", "reward": "raw_reward"}
        if key in ("step", "n", "std", "zero_std"):
            assert cell == "", f"{where}: {cell!r}"
        elif key == "sample":
            first_int(cell, row["sample_index"], where)
        elif key == "trunc":
            assert cell == ("yes" if row["truncated"] else "no"), where
        elif key == "status":
            _status(cell, row, where)
        else:
            close(cell, row[names[key]], where)

    return check


async def test_compare_and_its_traced_group_are_exports_values(golden_copy: GoldenCopy) -> None:
    root = golden_copy("tp_dup")
    run = Run(root)
    docs = {step: step_export(run, step, False, EPOCH) for step in (0, 1, 2)}
    app = frozen_app(root)
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        await settle(pilot)
        app.push_screen(CompareScreen(0, 2))
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        table = app.screen.query_one("#groups", VirtualTable)
        await walk_columns(pilot, table, _compare_check(docs[0], docs[2]), "tp_dup compare 0→2", WIDTHS)
        table.cursor_column = 0
        await pilot.press("down", "enter")  # group slot 1 across the steps
        await settle(pilot)
        assert any(row.key[0] == "sample" for row in table.rows)  # type: ignore[index]
        await walk_columns(pilot, table, _trace_check(docs, 1), "tp_dup group 1 traced", WIDTHS, height=40)


def _outlier_check(run: Run, docs: dict[int, dict[str, Any]]) -> Callable[[str, str, Hashable, str], None]:
    """The outlier tables: a token line from ``export --tokens`` of its sample, a sample line from its ROW."""
    tokens: dict[tuple[int, int], dict[str, Any]] = {}
    ranks: dict[tuple[OutlierKind, Hashable], int] = {}
    state: dict[str, OutlierKind] = {}

    def payload(step: int, sample: int) -> dict[str, Any]:
        if (step, sample) not in tokens:
            tokens[(step, sample)] = tokens_export(run, step, False, sample, EPOCH)
        return tokens[(step, sample)]

    def check(key: str, cell: str, row_key: Hashable, where: str) -> None:
        kind = state["kind"]
        step, sample = row_key[1], row_key[2]  # type: ignore[index]
        row = next(r for r in docs[step]["samples"] if r["sample_index"] == sample)
        stat = {OutlierKind.LP_DIFF: "max_abs_lp_diff", OutlierKind.IMP_RATIO: "mean_imp_ratio"}.get(
            kind, "max_entropy"
        )
        common = {"step": step, "sample": sample, "reward": row["reward"], "stale": row["staleness"]}
        common |= {"resp": row["response_length"], "sample_stat": row[stat], "group": row["group_index"]}
        common |= {"mean_abs_lp_diff": row["mean_abs_lp_diff"], "mean_entropy": row["mean_entropy"]}
        if key == "rank":
            assert cell == str(ranks.setdefault((kind, row_key), int(cell))), where  # a row keeps its rank
        elif key == "status":
            _status(cell, row, where)
        elif key in ("step", "sample", "group", "resp"):
            first_int(cell, common[key], where)
        elif key == "value" and row_key[0] == "sample":  # type: ignore[index]
            close(cell, row[stat], where)  # the figure the sample is ranked on (by |mean ratio − 1| for ratio)
        elif key in common:
            close(cell, common[key], where)
        else:
            position = row_key[3]  # type: ignore[index]
            found = payload(step, sample)
            series = {OutlierKind.LP_DIFF: "lp_diff", OutlierKind.IMP_RATIO: "imp_ratio"}.get(kind, "entropy")
            if key == "pos":
                assert cell == f"{position + 1}/{row['response_length']}", f"{where}: {cell!r}"
            elif key == "token":
                at = found["response_offset"] + position
                shown = f"id {found['token_ids'][at]}" if found["token_text"] is None else repr(found["token_text"][at])
                text(cell, shown, where)
            elif key == "value":
                close(cell, found[series][position], where)
            else:  # the entropy above the sample's median trained entropy
                trained = [v for v in found["entropy"] if v is not None]
                close(cell.lstrip("+"), found["entropy"][position] - statistics.median(trained), where)

    check.state = state  # type: ignore[attr-defined]
    return check


async def test_the_outlier_tables_cells_are_exports_values(golden_copy: GoldenCopy) -> None:
    root = golden_copy("tp_dup")
    run = Run(root)
    docs = {2: step_export(run, 2, False, EPOCH)}
    check = _outlier_check(run, docs)
    app = frozen_app(root)
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        await settle(pilot)
        app.push_screen(OutlierScreen(2))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, OutlierScreen)
        table = screen.query_one("#outliers", VirtualTable)
        for level in ("tokens", "samples"):
            for kind in (OutlierKind.LP_DIFF, OutlierKind.IMP_RATIO, OutlierKind.ENTROPY):
                await pilot.press({OutlierKind.LP_DIFF: "1", OutlierKind.IMP_RATIO: "2"}.get(kind, "3"))
                await settle(pilot)
                assert screen.kind is kind and table.rows
                check.state["kind"] = kind  # type: ignore[attr-defined]
                widths = WIDTHS if kind is OutlierKind.LP_DIFF else (40, 200)
                await walk_columns(pilot, table, check, f"tp_dup outliers {level} {kind.value}", widths)
            await pilot.press("s")
            await settle(pilot)


async def test_the_advisory_log_cells_are_the_logged_advisories(golden_copy: GoldenCopy) -> None:
    root = golden_copy("degenerate")
    app = frozen_app(root)
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        await settle(pilot)
        app.push_screen(AdvisoryLogScreen())
        await settle(pilot)
        table = app.screen.query_one("#log", VirtualTable)
        entries = {(e.advisory.code, e.advisory.rollout_id): e for e in app.model.advisory_log.entries}
        by_key = dict(zip([row.key for row in table.rows], app.model.advisory_log.entries, strict=True))
        assert len(entries) >= 2

        def check(key: str, cell: str, row_key: Hashable, where: str) -> None:
            entry = by_key[row_key]
            steps = {"first_step": entry.first_step, "last_step": entry.last_step, "count": entry.count}
            if key in steps:
                first_int(cell, steps[key], where)
            elif key in ("first_seen", "last_seen"):
                text(cell, date_time(getattr(entry, key)), where)
            else:
                state = "active" if entry.active else f"cleared at step {entry.cleared_at}"
                full = {"level": f"[{LEVEL_TAG[entry.advisory.level]}]", "code": entry.advisory.code}
                text(cell, {**full, "state": state, "message": entry.advisory.message}[key], where)

        await walk_columns(pilot, table, check, "degenerate advisory log", WIDTHS)


async def test_the_engines_table_never_cuts_a_value(golden_copy: GoldenCopy) -> None:
    root = golden_copy("live_engines")
    app = make_app(root, poll_seconds=3600, clock=lambda: 1787243020.0)
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        await pilot.press("E")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, EnginesScreen) and screen.view is not None and screen.view.engines
        full = [line.plain for line in table_lines(screen.view, screen.selected, 1000)]
        columns = full[0][2:].split()
        for width in range(40, 201, 8):
            await pilot.resize_terminal(width, 30)
            await settle(pilot, rounds=2)
            lines = str(screen.query_one("#engines-table", Static).render()).splitlines()
            heading = lines[0][2:].split()
            assert max(len(line) for line in lines) <= width, f"{width}: a line wider than the pane"
            more = heading[-1] == MORE
            shown = heading[:-1] if more else heading
            assert shown == columns[: len(shown)] and more == (len(shown) < len(columns)), f"{width}: {heading}"
            for line, whole in zip(lines[1:], full[1:], strict=True):
                cells, truth = line[2:].split(), whole[2:].split()
                name = cells[0]
                assert name == truth[0] or (name.endswith("…") and truth[0].startswith(name[:-1])), f"{width}"
                assert cells[1:] == truth[1 : len(cells)], f"{width}: {line!r} but {whole!r}"


async def test_the_overview_step_list_cells_are_the_steps_figures(golden_copy: GoldenCopy) -> None:
    root = golden_copy("tp_dup")
    run = Run(root)
    figures = {}  # each step's figures as ``report --json`` prints the newest one (``latest_step``)
    app = frozen_app(root)
    async with app.run_test(size=(WIDTHS[0], 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#steps", VirtualTable)
        for row in table.rows:
            rid, evaluation = row.key  # type: ignore[misc]
            figures[row.key] = run.open(rid, evaluation, EPOCH).summary.aggregate.to_dict()
        assert len(figures) == 5

        def check(key: str, cell: str, row_key: Hashable, where: str) -> None:
            step = figures[row_key]
            if key == "step":
                first_int(cell, row_key[0], where)  # type: ignore[index]
            elif key == "kind":
                assert cell == ("eval" if row_key[1] else "train"), where  # type: ignore[index]
            elif key == "n":
                first_int(cell, step["n_samples"], where)
            elif key in ("zero_std_group_frac", "truncated_frac"):
                percent(cell, step[key], where)
            elif key == "state":
                assert cell in ("ok", "writing…") or "unreadable" in cell or "bad file" in cell, f"{where}: {cell!r}"
            else:
                close(cell, step[key], where)

        await walk_columns(pilot, table, check, "tp_dup step list", WIDTHS)
