"""Pilot tests: what a user sees and can do on the overview and step screens."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from miles_tui.tui.app import MilesApp
from miles_tui.tui.screens.advisory_log_screen import AdvisoryLogScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.screens.step_screen import StepScreen
from miles_tui.tui.views.step_rows import SAMPLE_COLUMNS
from miles_tui.tui.widgets.advisory_list import AdvisoryList
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.conftest import EPOCH, stamp, write_demo_run
from tests.harness import frozen_app, screen_text, settle


def _keys(app: MilesApp, selector: str) -> list[object]:
    return [row.key for row in app.screen.query_one(selector, VirtualTable).rows]


async def test_drill_down_and_back(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        assert _keys(app, "#steps")[:2] == [(3, False), (2, False)]
        assert app.screen.query_one(RunHeader).latest == 3
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.rollout_id == 3
        table = app.screen.query_one("#samples", VirtualTable)
        assert len(table.rows) == 16
        await pilot.press("down", "down", "enter")
        await settle(pilot)
        from miles_tui.tui.screens.sample_screen import SampleScreen

        assert isinstance(app.screen, SampleScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        assert app.screen.query_one("#samples", VirtualTable).cursor_row == 2
        await pilot.press("backspace")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)


async def test_new_steps_appear_without_moving_the_cursor(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#steps", VirtualTable)
        await pilot.press("down")  # look away from the newest step
        watched = table.cursor_key
        write_demo_run(demo_run, 2, start=4)
        stamp(demo_run, EPOCH - 600)
        app.poll_now()
        await settle(pilot)
        keys = _keys(app, "#steps")
        assert keys[:2] == [(5, False), (5, True)] or keys[0] == (5, False)
        assert len(keys) == len(set(keys)), "a step is listed twice"
        assert table.cursor_key == watched, "the cursor moved"
        header = app.screen.query_one(RunHeader)
        new_keys = len(keys) - 4 - 1  # 4 train steps and eval 0 were there before
        assert new_keys >= 2 and header.new_steps == new_keys
        assert f"{new_keys} new steps" in str(header.render())
        # Going back to the top clears the badge.
        await pilot.press("home")
        await settle(pilot)
        assert app.screen.query_one(RunHeader).new_steps == 0


async def test_f_on_the_new_steps_badge_goes_to_the_newest_and_keeps_tracking(demo_run: Path) -> None:
    """The badge says "N new steps (f: track)": f turned tracking off (PAUSED) and took a second f to track."""
    app = frozen_app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#steps", VirtualTable)
        await pilot.press("down")
        write_demo_run(demo_run, 2, start=4)
        stamp(demo_run, EPOCH - 600)
        app.poll_now()
        await settle(pilot)
        header = app.screen.query_one(RunHeader)
        assert "(f: track)" in str(header.render())
        await pilot.press("f")
        await settle(pilot)
        assert app.follow_latest and header.new_steps == 0
        assert table.cursor_key == _keys(app, "#steps")[0]
        assert "PAUSED" not in str(header.render())


async def test_follow_latest_moves_to_new_steps_when_on_the_newest(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#steps", VirtualTable)
        assert table.cursor_key == (3, False)
        write_demo_run(demo_run, 1, start=4)
        stamp(demo_run, EPOCH - 600)
        app.poll_now()
        await settle(pilot)
        assert table.cursor_key == (4, False)


async def test_advisory_enter_jumps_to_the_step(golden_copy: Callable[[str], Path]) -> None:
    root = golden_copy("degenerate")
    app = frozen_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        advisories = app.screen.query_one(AdvisoryList)
        codes = [e.advisory.code for e in advisories.entries if e.active]
        assert codes == ["all_rewards_zero", "truncated_samples"]
        # an earlier step's advisory that no longer holds follows, dimmed, with the step it cleared at
        assert [(e.advisory.code, e.cleared_at) for e in advisories.entries if not e.active] == [("zero_std_groups", 1)]
        await pilot.press("a")
        await pilot.press("down")  # the truncation advisory
        await pilot.press("enter")
        await settle(pilot)
        assert type(app.screen).__name__ in ("StepScreen", "SampleScreen")


async def test_filter_and_sort_the_rollout_table(golden_copy: Callable[[str], Path]) -> None:
    root = golden_copy("degenerate")
    app = frozen_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, StepScreen)
        await pilot.press("slash")
        await pilot.press(*"truncated", "enter")
        await settle(pilot)
        summary = screen.summary
        assert summary is not None
        expected = [r.sample_index for r in summary.rows if r.truncated]
        assert _keys(app, "#samples") == expected
        await pilot.press("slash", "ctrl+u", "enter")  # empty filter clears it
        await settle(pilot)
        assert len(_keys(app, "#samples")) == len(summary.rows)
        table = screen.query_one("#samples", VirtualTable)
        for _ in range(12):  # to the |lpΔ| column
            await pilot.press("right")
        column = table.cursor_column_key
        await pilot.press("s")
        await settle(pilot)
        values = [getattr(next(r for r in summary.rows if r.sample_index == k), column) for k in _keys(app, "#samples")]
        present = [v for v in values if v is not None]
        assert present == sorted(present)
        await pilot.press("s")
        await settle(pilot)
        values = [getattr(next(r for r in summary.rows if r.sample_index == k), column) for k in _keys(app, "#samples")]
        present = [v for v in values if v is not None]
        assert present == sorted(present, reverse=True)


async def test_a_bad_filter_says_why(golden_copy: Callable[[str], Path]) -> None:
    app = frozen_app(golden_copy("tp_dup"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("slash", *"bogus>1", "enter")
        await pilot.pause()
        status = str(app.screen.query_one("#filter-status").render())
        assert "unknown column 'bogus' (? lists the columns)" in status
        await pilot.press("slash", "ctrl+u", *"rewrd>0.5", "enter")
        await pilot.pause()
        status = str(app.screen.query_one("#filter-status").render())
        assert "unknown column 'rewrd' (did you mean reward" in status


async def test_prev_next_step_and_eval_toggle(golden_copy: Callable[[str], Path]) -> None:
    app = frozen_app(golden_copy("tp_dup"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert _keys(app, "#steps") == [(3, True), (2, False), (1, False), (0, False), (0, True)]
        await pilot.press("down", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, StepScreen)
        assert screen.key == (2, False)
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert screen.key == (1, False)
        await pilot.press("e")
        await settle(pilot)
        assert screen.key[1] is True and screen.summary is not None and screen.summary.evaluation
        assert screen.key == (0, True)  # the nearest eval step
        assert "no eval step 1: showing eval step 0, the nearest" in [str(n.message) for n in app._notifications]
        await pilot.press("e")
        await settle(pilot)
        assert screen.key == (1, False), "e twice must come back to the step it started from (not train 0)"
        await pilot.press("e", "right_square_bracket")  # eval 0 -> eval 3: the way back is forgotten
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        assert screen.key == (2, False)  # from eval 3, the nearest train step


async def test_unreadable_per_token_data_is_said(golden_copy: Callable[[str], Path]) -> None:
    app = frozen_app(golden_copy("cp_legacy_ambiguous"))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        advisory = app.screen.query_one(AdvisoryList).advisories[0]
        assert advisory.code == "per_token_unreadable" and "unreadable, not undumped" in advisory.message
        await pilot.press("enter")
        await settle(pilot)
        rendered = [str(cell) for row in app.screen.query_one("#samples", VirtualTable).rows for cell in row.cells]
        assert rendered.count("UNREADABLE") == 2


async def test_every_screen_at_200x60_without_colour(demo_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = frozen_app(demo_run)
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot)
        for keys, screen_name in (
            (("enter",), "StepScreen"),
            (("enter",), "SampleScreen"),
            (("escape", "escape", "m"), "MetricsScreen"),
            (("escape", "u"), "ComputeScreen"),
            (("escape", "O"), "OutlierScreen"),
            (("escape", "c"), "CompareScreen"),
            (("escape", "question_mark"), "HelpScreen"),
        ):
            await pilot.press(*keys)
            await settle(pilot)
            assert type(app.screen).__name__ == screen_name
            assert app.screen.size.width == 200
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)


async def test_a_folder_that_is_not_a_run_says_so(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    app = frozen_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert "is it the folder miles was started with --dump-details" in app.screen.query_one("#steps").placeholder
        (tmp_path / "rollout_data").mkdir()
        app.poll_now()
        await settle(pilot)
        assert "waiting for rollout_data" in app.screen.query_one("#steps", VirtualTable).placeholder


async def test_a_highlights_the_first_advisory_and_esc_returns_to_the_steps(golden_copy: Callable[[str], Path]) -> None:
    app = frozen_app(golden_copy("degenerate"))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        first = app.screen.query_one(AdvisoryList).advisories[0]
        await pilot.press("a", "enter")  # no down first: the first advisory is highlighted
        await settle(pilot)
        assert f"sample {first.sample_index}" in screen_text(app)
        while not isinstance(app.screen, OverviewScreen):
            await pilot.press("escape")
            await settle(pilot)
        # back from a jump the advisories still have the focus: a again would open the advisory log
        await pilot.press("escape", "a", "escape", "enter")  # esc leaves the advisories: enter opens the step
        await settle(pilot)
        assert isinstance(app.screen, StepScreen), screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("a", "a")  # a on the advisories: the log, every advisory with its history
        await settle(pilot)
        assert isinstance(app.screen, AdvisoryLogScreen), screen_text(app)
        await pilot.press("escape", "escape", "a", "escape", "enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen), screen_text(app)
        while not isinstance(app.screen, OverviewScreen):
            await pilot.press("escape")
            await settle(pilot)
        advisories = app.screen.query_one(AdvisoryList)
        assert len(advisories.advisories) > 1
        await pilot.press("a", "j")  # the tables' j/k move in the advisories too (they did nothing)
        await settle(pilot)
        assert advisories.highlighted == 1
        await pilot.press("k")
        await settle(pilot)
        assert advisories.highlighted == 0


async def test_a_without_advisories_says_so(tmp_path: Path) -> None:
    app = frozen_app(tmp_path)  # an empty folder: nothing to advise on
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        assert not app.screen.query_one(AdvisoryList).advisories
        await pilot.press("a")
        await settle(pilot)
        assert "no advisories: nothing needs attention" in screen_text(app)
        assert not isinstance(app.focused, AdvisoryList)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_a_removed_sample_reads_removed_without_colour(
    golden_copy: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = frozen_app(golden_copy("tp_dup"))  # step 2 removes samples 27 (completed) and 35 (aborted)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        rows = {line.split()[1]: line for line in screen_text(app).splitlines() if line.startswith("│     ")}
        assert "completed ✗ removed" in rows["27"] and "aborted ✗ removed" in rows["35"], rows
        assert "removed" not in rows["26"]


async def test_the_sample_screen_and_the_group_trace_say_removed(golden_copy: Callable[[str], Path]) -> None:
    app = frozen_app(golden_copy("tp_dup"))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        await pilot.press("c", "enter")  # compare 1 with 2, trace group 0
        await settle(pilot)
        trace = [line for line in screen_text(app).splitlines() if " 27 " in line]
        assert len(trace) == 1 and "completed ✗ removed" in trace[0], trace
        await pilot.press("escape", "escape")
        await settle(pilot)
        await pilot.press("down", "down", "down", "enter")  # sample 27
        await settle(pilot)
        header = screen_text(app).splitlines()[0]
        assert "sample 27" in header and "✗ removed from training" in header, header


def test_the_sort_arrow_keeps_growing_columns_growing() -> None:
    """The arrow's columns were new Columns without ``grow``: sorted, eval sample ids showed as '100001…'."""
    screen = StepScreen(0)
    screen.sort_key = "reward"
    decorated = screen._decorate(SAMPLE_COLUMNS)
    assert [c.grow for c in decorated] == [c.grow for c in SAMPLE_COLUMNS]
    assert [c.label for c in decorated if c.key == "reward"] == ["▲reward"]
    assert [c.label for c in decorated if c.key != "reward"] == [c.label for c in SAMPLE_COLUMNS if c.key != "reward"]
