"""Pilot tests with the real app on golden copies: outlier finder, compare, CSV save, copy to the clipboard."""

from __future__ import annotations

import csv
import errno
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from textual.widgets import Input, Label, Static

from miles_tui.core.analysis import OutlierKind, compare_steps, peak_position, step_outliers
from miles_tui.core.dump import ROW_COLUMNS
from miles_tui.tui.screens import save_csv_screen
from miles_tui.tui.screens.compare_screen import CompareScreen
from miles_tui.tui.screens.outlier_screen import OutlierScreen
from miles_tui.tui.screens.sample_screen import SampleScreen
from miles_tui.tui.screens.save_csv_screen import SaveCsvScreen
from miles_tui.tui.views.clipboard import sample_row_tsv
from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.conftest import EPOCH
from tests.harness import frozen_app, screen_text, settle

GoldenCopy = Callable[[str], Path]


def _plain(widget: Label | Static) -> str:
    return str(widget.render())


async def test_enter_on_an_outlier_lands_the_sample_cursor_on_that_token(golden_copy: GoldenCopy) -> None:
    root = golden_copy("tp_dup")
    app = frozen_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(OutlierScreen(2))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, OutlierScreen)
        expected = step_outliers(app.reader.open(2, False, EPOCH)).tokens
        table = screen.query_one("#outliers", VirtualTable)
        top = expected[OutlierKind.LP_DIFF]
        assert [row.key for row in table.rows[:3]] == [("token", 2, o.sample_index, o.position) for o in top[:3]]
        assert "top 200 of" in _plain(screen.query_one("#title", Label))
        await pilot.press("t")  # the ratio ranking
        assert screen.kind is OutlierKind.IMP_RATIO
        await pilot.press("t")  # entropy: its own order
        await settle(pilot)
        entropy = expected[OutlierKind.ENTROPY]
        assert table.rows[0].key == ("token", 2, entropy[0].sample_index, entropy[0].position)
        await pilot.press("j")
        assert table.cursor_key == table.rows[1].key
        await pilot.press("k")  # up, as in every table (it was the kind key here)
        assert table.cursor_key == table.rows[0].key and screen.kind is OutlierKind.ENTROPY
        await pilot.press("down", "enter")
        await settle(pilot)
        sample = app.screen
        assert isinstance(sample, SampleScreen)
        assert sample.sample_index == entropy[1].sample_index
        assert sample.cursor == entropy[1].position
        assert f"response {entropy[1].position + 1}/" in _plain(sample.query_one("#cursor-line", Static))


async def test_last_steps_and_samples_and_a_sample_row_opens_at_its_peak(golden_copy: GoldenCopy) -> None:
    root = golden_copy("tp_dup")
    app = frozen_app(root)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.push_screen(OutlierScreen(2))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, OutlierScreen)
        await pilot.press("a")
        await settle(pilot)
        assert screen.steps() == (2, 1, 0) and set(screen.computed) == {0, 1, 2}
        table = screen.query_one("#outliers", VirtualTable)
        assert {key[1] for key in (row.key for row in table.rows)} == {0, 1, 2}  # type: ignore[index]
        assert "steps 0–2 ·" in _plain(screen.query_one("#title", Label))
        await pilot.press("s")
        await settle(pilot)
        first = table.rows[0].key
        assert isinstance(first, tuple) and first[0] == "sample"
        _, rid, sample_index = first
        await pilot.press("enter")
        await settle(pilot)
        sample = app.screen
        assert isinstance(sample, SampleScreen)
        assert sample.sample_index == sample_index
        assert sample.cursor == peak_position(app.reader.open(rid, False, EPOCH), sample_index, OutlierKind.LP_DIFF)


async def test_compare_shows_deltas_moves_steps_and_traces_a_group(golden_copy: GoldenCopy) -> None:
    root = golden_copy("tp_dup")
    app = frozen_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(CompareScreen(0, 1))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        deltas = _plain(screen.query_one("#deltas", Label))
        assert "reward 0.500→0.417 ↓0.083" in deltas
        assert "resp len 26.2→21.0 ↓5.2" in deltas
        table = screen.query_one("#groups", VirtualTable)
        assert [row.key for row in table.rows] == [("group", 0), ("group", 1), ("group", 2)]
        cells = {c.key: cell.plain for c, cell in zip(table.columns, table.rows[2].cells, strict=True)}
        assert (cells["reward_a"], cells["reward_b"], cells["reward_d"]) == ("1.000", "0.000", "↓1.000")
        assert cells["std_d"] == "=" and cells["zero_std"] == "zero-std/zero-std"
        await pilot.press("right_square_bracket")  # B: step 2
        await settle(pilot)
        assert (screen.a, screen.b) == (0, 2)
        expected = compare_steps(app.model.summaries[(0, False)], app.model.summaries[(2, False)])
        assert screen.comparison == expected
        await pilot.press("left_curly_bracket")  # A has no earlier step
        await pilot.press("right_curly_bracket")  # A: step 1
        await settle(pilot)
        assert (screen.a, screen.b) == (1, 2)
        await pilot.press("right_curly_bracket", "left_square_bracket")  # neither passes the other: said, not done
        await settle(pilot)
        assert (screen.a, screen.b) == (1, 2)
        assert any("A stays before B" in n.message for n in app._notifications)
        await pilot.press("down", "enter")  # group 1 across the steps
        await settle(pilot)
        keys = [row.key for row in table.rows]
        assert [k for k in keys if k[0] == "step"] == [("step", 0), ("step", 1), ("step", 2)]  # type: ignore[index]
        assert ("sample", 0, 5) in keys
        assert "group 1 across steps" in _plain(screen.query_one("#title", Label))
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is screen and table.cursor_key == ("group", 1)
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, CompareScreen)


async def test_save_csv_writes_the_shown_rows_and_refuses_the_run_directory(
    golden_copy: GoldenCopy, tmp_path: Path
) -> None:
    root = golden_copy("tp_dup")
    app = frozen_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        rows = sorted(app.model.summaries[(1, False)].rows, key=lambda r: -r.response_length)[:7]
        saved: list[Path | None] = []
        app.push_screen(SaveCsvScreen(rows, root / "step_1.csv", root), saved.append)
        await settle(pilot)
        modal = app.screen
        assert isinstance(modal, SaveCsvScreen)
        await pilot.press("enter")  # the default path here is inside RUN_DIR: refused
        await settle(pilot)
        assert "inside the run directory" in _plain(modal.query_one("#message", Static))
        assert not (root / "step_1.csv").exists() and app.screen is modal
        target = tmp_path / "shown.csv"
        target.write_text("old")
        modal.query_one("#path", Input).value = str(target)
        await pilot.press("enter")  # exists: asks first
        await settle(pilot)
        assert "enter again to overwrite" in _plain(modal.query_one("#message", Static))
        assert target.read_text() == "old"
        await pilot.press("enter")
        await settle(pilot)
        assert saved == [target.resolve()] and app.screen is not modal
        parsed = list(csv.DictReader(target.open()))
        assert list(parsed[0]) == list(ROW_COLUMNS)
        assert [int(r["sample_index"]) for r in parsed] == [r.sample_index for r in rows]


async def test_save_csv_shows_a_write_error_in_place(
    golden_copy: GoldenCopy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = golden_copy("tp_dup")

    def full_disk(path: Path, rows: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(save_csv_screen, "_write_csv", full_disk)
    app = frozen_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(SaveCsvScreen(app.model.summaries[(0, False)].rows, tmp_path / "x.csv", root))
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SaveCsvScreen)
        message = _plain(app.screen.query_one("#message", Static))
        assert "could not write" in message and "No space left on device" in message


async def test_y_copies_the_token_window_and_shift_y_the_row(golden_copy: GoldenCopy) -> None:
    root = golden_copy("tp_dup")
    app = frozen_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(OutlierScreen(0))
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        sample = app.screen
        assert isinstance(sample, SampleScreen)
        await pilot.press("y")
        lines = app.clipboard.rstrip("\n").split("\n")
        start, stop = sample.window
        assert lines[0].startswith("position\tresponse_position\ttoken_id\ttext\tloss_mask\t")
        assert len(lines) == 1 + stop - start
        assert lines[1].split("\t")[0] == str(start)
        await pilot.press("Y")
        assert app.clipboard == sample_row_tsv(sample.sample.row)


async def test_compare_can_open_on_a_samples_group_across_steps(golden_copy: GoldenCopy) -> None:
    root = golden_copy("tp_dup")
    app = frozen_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(CompareScreen(0, 2, sample_index=5))  # sample 5 of step 0 is in group 1
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen) and screen.tracing and screen.group == 1
        table = screen.query_one("#groups", VirtualTable)
        assert table.cursor_key == ("step", 2)
        steps = [row.cells[0].plain for row in table.rows if row.key[0] == "step"]  # type: ignore[index]
        assert steps == ["0 A", "1", "2 B"]
        await pilot.press("down", "enter")  # the first sample of group 1 in step 2
        await settle(pilot)
        sample = app.screen
        assert isinstance(sample, SampleScreen) and sample.step.summary.rollout_id == 2
        assert sample.sample.row.group_index == 1


async def test_an_outlier_token_is_at_the_position_the_sample_screen_shows(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("O")
        await settle(pilot)
        text = screen_text(app)
        assert "resp pos" in text
        first = next(line for line in text.splitlines() if line.startswith("│  1 "))
        step, sample, position = first.split()[2:5]
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert f"step {step} · sample {sample}" in text
        assert f"response {position} " in text, (position, text)


async def test_compare_from_a_step_screen_traces_the_sample_under_the_cursor(golden_copy: GoldenCopy) -> None:
    """Trial finding: 'c' on a step's sample said 'step 1 has no sample 25' (the sample is step 2's, B)."""
    root = golden_copy("tp_dup")
    app = frozen_app(root)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        app.navigation.open_step(2)
        await settle(pilot)
        step = app.screen
        table = step.query_one("#samples", VirtualTable)
        sample = cast("int", table.cursor_key)
        group = next(row.group_index for row in app.model.summaries[(2, False)].rows if row.sample_index == sample)
        await pilot.press("c")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen) and screen.tracing and screen.group == group
        assert "has no sample" not in screen_text(app)


async def test_compare_labels_its_per_group_deltas_as_slots_on_the_table(demo_run: Path) -> None:
    """Issue 24.6: c on the demo showed group 6 'reward Δ ↓1.000' between unrelated prompts, and only the traced
    view said slots are not prompts."""
    from miles_tui.tui.screens.compare_screen import CompareScreen
    from tests.harness import frozen_app, screen_text, settle

    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        text = screen_text(app)
        table_top = next(line for line in text.splitlines() if line.startswith("╭"))
        assert "slots, not prompts" in table_top, table_top
        header = next(line for line in text.splitlines() if "reward A" in line)
        assert header.split()[1] == "slot", header
