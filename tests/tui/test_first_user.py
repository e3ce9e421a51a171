"""What a first-time user hit on the demo and on golden copies (issue 8): each test failed before its fix."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from miles_tui.tui.app import MilesApp, make_app
from miles_tui.tui.screens.compare_screen import CompareScreen
from miles_tui.tui.screens.outlier_screen import OutlierScreen
from miles_tui.tui.screens.step_screen import StepScreen
from miles_tui.tui.widgets.step_trends import StepTrends
from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.conftest import EPOCH, stamp, write_demo_run
from tests.harness import screen_text


def _app(root: Path, now: float = EPOCH) -> MilesApp:
    return make_app(root, poll_seconds=3600, clock=lambda: now)


async def _settle(app: MilesApp, pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


async def _open_step(app: MilesApp, pilot: Pilot[None], *keys: str) -> StepScreen:
    await _settle(app, pilot)
    await pilot.press(*keys, "enter")
    await _settle(app, pilot)
    assert isinstance(app.screen, StepScreen)
    return app.screen


def _status(app: MilesApp) -> str:
    return str(app.screen.query_one("#filter-status").render())


# -- 1, 4, 9: the filter -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "said"),
    [("status>3", "status is text"), ("reward>abc", "reward is a number"), ("version>abc", "version number")],
)
async def test_a_filter_that_cannot_hold_is_reported_inline(demo_run: Path, typed: str, said: str) -> None:
    app = _app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_step(app, pilot)
        await pilot.press("slash", *typed, "enter")
        await _settle(app, pilot)
        assert app.is_running and app.screen is screen
        assert "filter error" in _status(app) and said in _status(app)
        assert screen.row_filter is None  # the rows stay as they were
        assert len(screen.query_one("#samples", VirtualTable).rows) == 16


async def test_leaving_a_bad_filter_shows_the_filter_still_in_force(demo_run: Path) -> None:
    """A fresh-clone trial: after a bad filter and escape, the status kept the error while the rows were
    those of the previous filter."""
    app = _app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_step(app, pilot)
        await pilot.press("slash", *"reward>0.5", "enter")
        await _settle(app, pilot)
        shown = len(screen.query_one("#samples", VirtualTable).rows)
        assert f"{shown}/16 samples · filter: reward>0.5" in _status(app)
        await pilot.press("slash", *" ((", "enter")
        await _settle(app, pilot)
        assert "filter error" in _status(app)
        await pilot.press("escape")
        await _settle(app, pilot)
        assert app.screen is screen and f"{shown}/16 samples · filter: reward>0.5" in _status(app)


async def test_version_filters_match_what_the_table_shows(demo_run: Path) -> None:
    app = _app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_step(app, pilot)
        assert screen.summary is not None
        shown = {r.sample_index: r for r in screen.summary.rows}
        await pilot.press("slash", *"version>8", "enter")  # used to end the app with a traceback
        await _settle(app, pilot)
        assert app.is_running and "filter error" not in _status(app)
        assert not screen.query_one("#samples", VirtualTable).rows  # the demo's versions are all below 8
        await pilot.press("slash", "ctrl+u", *"version~v2", "enter")
        await _settle(app, pilot)
        keys = list(screen.query_one("#samples", VirtualTable).keys)
        from miles_tui.tui.formatting import version_span

        assert keys == [i for i, r in shown.items() if "v2" in version_span(r)] and keys
        await pilot.press("slash", "ctrl+u", *"version>=3", "enter")
        await _settle(app, pilot)
        keys = list(screen.query_one("#samples", VirtualTable).keys)
        assert keys == [i for i, r in shown.items() if r.weight_version and int(r.weight_version) >= 3] and keys


async def test_the_readme_version_example_can_match(demo_run: Path) -> None:
    app = _app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_step(app, pilot, "down", "down")  # step 1 or 2: generated with v1 weights
        await pilot.press("slash", *"version~v1", "enter")
        await _settle(app, pilot)
        assert screen.query_one("#samples", VirtualTable).rows


async def test_an_empty_filter_result_says_so(demo_run: Path) -> None:
    app = _app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_step(app, pilot)
        await pilot.press("slash", *"reward>1000", "enter")
        await _settle(app, pilot)
        table = screen.query_one("#samples", VirtualTable)
        assert not table.rows
        text = screen_text(app)
        assert "no sample matches reward>1000" in text and "loading" not in text


# -- 2: g ---------------------------------------------------------------------------------------------------


async def test_g_shows_the_groups(demo_run: Path) -> None:
    app = _app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_step(app, pilot)
        assert screen.summary is not None
        await pilot.press("g")
        await _settle(app, pilot)
        table = screen.query_one("#samples", VirtualTable)
        assert screen.show_groups
        assert [c.key for c in table.columns][:4] == ["group_index", "n", "reward_mean", "reward_std"]
        assert len(table.rows) == len(screen.summary.groups)
        assert "zero-std" in screen_text(app)
        await pilot.press("g")
        await _settle(app, pilot)
        assert not screen.show_groups and len(table.rows) == 16


# -- 3: unreadable reads as unreadable -------------------------------------------------------------------------


UNREADABLE_SAMPLES = (11, 12, 13, 15)
"""truncated_shard step 1: the samples whose train slice is in the truncated 1_1.pt."""


async def test_unreadable_values_read_unread_in_the_step_table_and_groups(
    golden_copy: Callable[[str], Path],
) -> None:
    app = _app(golden_copy("truncated_shard"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_step(app, pilot)
        assert screen.key == (1, False)
        table = screen.query_one("#samples", VirtualTable)
        by_key = {row.key: row for row in table.rows}
        columns = [c.key for c in table.columns]
        for index in UNREADABLE_SAMPLES:
            cells = dict(zip(columns, (c.plain for c in by_key[index].cells), strict=True))
            for column in ("raw_reward", "normalized_reward", "mean_abs_lp_diff", "mean_entropy", "adv_mean"):
                assert cells[column] == "UNREAD", (index, column)
            assert cells["reward"] != "UNREAD"  # the rollout side was read
        readable = dict(zip(columns, (c.plain for c in by_key[8].cells), strict=True))
        assert "UNREAD" not in readable.values()
        assert "UNREAD" in screen_text(app)  # legible without colour: the word itself
        await pilot.press("g")
        await _settle(app, pilot)
        groups = {row.key: [c.plain for c in row.cells] for row in table.rows}
        assert groups[("group", 2)][2:4] == ["UNREAD", "UNREAD"]  # both rewards of group 2 are unreadable
        assert groups[("group", 2)][-1] == "2 UNREAD"
        assert "UNREAD" not in groups[("group", 0)][:-1] and groups[("group", 0)][-1] == "ok"


async def test_unreadable_values_read_unread_in_compare_and_outliers(golden_copy: Callable[[str], Path]) -> None:
    app = _app(golden_copy("truncated_shard"))
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        await pilot.press("c")
        await _settle(app, pilot)
        assert isinstance(app.screen, CompareScreen)
        rows = {row.key: [c.plain for c in row.cells] for row in app.screen.query_one("#groups", VirtualTable).rows}
        assert rows[("group", 2)][3:5] == ["UNREAD", "UNREAD"]  # B's reward and its delta
        assert rows[("group", 0)][3] != "UNREAD"
        await pilot.press("escape", "O")
        await _settle(app, pilot)
        assert isinstance(app.screen, OutlierScreen)
        assert "4 UNREADABLE samples not ranked" in screen_text(app)


async def test_both_csv_outputs_carry_alignment_failed(golden_copy: Callable[[str], Path], tmp_path: Path) -> None:
    from miles_tui.core.commands.export import rows_csv, step_export
    from miles_tui.core.dump import Run
    from miles_tui.tui.views.clipboard import rows_csv_text

    root = golden_copy("truncated_shard")
    document = step_export(Run(root, use_cache=False), 1, False, EPOCH)
    exported = list(csv.DictReader(io.StringIO(rows_csv(document))))
    app = _app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open_step(app, pilot)
        saved = list(csv.DictReader(io.StringIO(rows_csv_text(screen._shown_rows()))))
    for table in (exported, saved):
        flags = {int(r["sample_index"]): r["alignment_failed"] for r in table}
        assert flags == {i: "true" if i in UNREADABLE_SAMPLES else "false" for i in range(8, 16)}
        assert all(r["mean_abs_lp_diff"] == "" for r in table if r["alignment_failed"] == "true")


# -- 11: small things ---------------------------------------------------------------------------------------


async def test_ctrl_c_quits_with_exit_0_even_in_the_filter_box(demo_run: Path) -> None:
    app = _app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_step(app, pilot)
        await pilot.press("slash", "r")
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running
    assert (app.return_code or 0) == 0


async def test_global_views_replace_each_other(golden_copy: Callable[[str], Path]) -> None:
    app = _app(golden_copy("live_streams"))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(app, pilot)
        depth = len(app.screen_stack)
        for key in "mumumu":
            await pilot.press(key)
            await _settle(app, pilot)
        assert len(app.screen_stack) == depth + 1
        assert type(app.screen).__name__ == "ComputeScreen"
        await pilot.press("question_mark", "m", "escape", "m")  # the help box takes no global key
        await _settle(app, pilot)
        assert len(app.screen_stack) == depth + 1 and type(app.screen).__name__ == "MetricsScreen"
        await pilot.press("escape")
        await _settle(app, pilot)
        assert len(app.screen_stack) == depth and type(app.screen).__name__ == "OverviewScreen"


async def test_eval_sample_ids_are_shown_whole(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "demo", 1)  # step 0 has an eval batch: ids from 10,000,000
    stamp(root, EPOCH - 600)
    app = _app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        keys = list(app.screen.query_one("#steps", VirtualTable).keys)
        screen = await _open_step(app, pilot, *["down"] * keys.index((0, True)))
        assert screen.evaluation and screen.summary is not None
        text = screen_text(app)
        assert "100000…" not in text
        for row in screen.summary.rows[:5]:
            assert f"│{row.sample_index} " in text


async def test_the_overview_state_and_the_not_a_run_hint_are_not_cut(
    golden_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    app = _app(golden_copy("truncated_shard"))
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        assert "4 unreadable 1 bad file" in screen_text(app)
    (tmp_path / "notes").mkdir()
    app = _app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        text = " ".join(line.strip("│ ") for line in screen_text(app).splitlines())
        assert "--dump-details? (watching it anyway)" in text
        # the sidebar does not call a folder with nothing to judge healthy
        assert "nothing needs attention" not in text and "nothing here to judge" in text


async def test_the_gpu_age_column_fits_long_ages(golden_copy: Callable[[str], Path]) -> None:
    from miles_tui.tui.screens.compute_screen import ComputeScreen

    app = _app(golden_copy("live_streams"), now=EPOCH + 200 * 86400)
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        await pilot.press("u")
        await _settle(app, pilot)
        assert isinstance(app.screen, ComputeScreen)
        text = screen_text(app)
        lines = app.screen.lane_texts()
        assert lines
        for line in lines:
            assert line.endswith(" stale"), line
            assert line.split()[-2] in text  # the whole age is drawn, e.g. 231d02h
        assert "sta…" not in text


class _Trends(App[None]):
    def compose(self) -> ComposeResult:
        yield StepTrends()


async def test_a_step_without_data_is_a_gap_in_the_trend_not_a_low_bar() -> None:
    from miles_tui.core.dump import StepAggregate
    from miles_tui.tui.widgets.step_trends import TrendLine

    def aggregate(rid: int, reward: float | None) -> StepAggregate:
        return StepAggregate(rid, False, 4, reward, None, 10.0, 0.0, 0.0, None, None, 0.0, None, 0)

    app = _Trends()
    async with app.run_test(size=(40, 8)) as pilot:
        trends = app.query_one(StepTrends)
        trends.show([aggregate(0, 0.2), None, aggregate(2, None), aggregate(3, 0.8)])
        await pilot.pause()
        line = app.query_one("#trend-reward_mean", TrendLine)
        drawn = "".join(segment.text for segment in line.render_line(0))
        width = len(drawn) // 4
        assert drawn[:width].strip() == "▃" * width  # 0.2 on a scale from 0 to 0.8: a quarter of the cell
        assert drawn[width : 3 * width].strip() == ""  # no summary yet, no reward: blank
        assert set(drawn[3 * width : 4 * width]) == {"█"}
        empty = app.query_one("#trend-avg_staleness", TrendLine)
        assert "".join(s.text for s in empty.render_line(0)).strip() == ""  # no value anywhere: nothing drawn
        assert math.isnan(float(np.asarray(line.values)[1]))


async def test_a_trend_carries_its_scale_and_a_constant_reads_its_value() -> None:
    """Issue 24.3: reward 0.500 -> 0.417 -> 0.417 was drawn full height dropping to the floor; a constant 0 %
    and a constant 19 % drew the same half-height glyph; no line said its scale."""
    from miles_tui.core.dump import StepAggregate
    from miles_tui.tui.widgets.step_trends import TrendLine

    def aggregate(rid: int, reward: float, truncated: float, stale: float) -> StepAggregate:
        return StepAggregate(rid, False, 4, reward, None, 10.0, truncated, 0.0, None, None, 0.0, stale, 0)

    def glyphs(app: App[None], key: str) -> set[str]:
        return set("".join(s.text for s in app.query_one(f"#trend-{key}", TrendLine).render_line(0)).strip())

    app = _Trends()
    async with app.run_test(size=(60, 8)) as pilot:
        trends = app.query_one(StepTrends)
        trends.show([aggregate(0, 0.5, 0.0, 0.19), aggregate(1, 0.417, 0.0, 0.19), aggregate(2, 0.417, 0.0, 0.19)])
        await pilot.pause()
        text = screen_text(app)
        assert "0.417–0.500" in text and "= 0%" in text and "= 0.190" in text, text
        reward = "".join(s.text for s in app.query_one("#trend-reward_mean", TrendLine).render_line(0)).strip()
        assert "▁" not in reward and reward[0] == "█"  # 0.417 of 0.5 is most of a cell, not the floor
        assert glyphs(app, "truncated_frac") == {"▁"}  # a constant 0 %: flat at the floor
        assert glyphs(app, "avg_staleness") == {"█"} and glyphs(app, "avg_staleness") != glyphs(app, "truncated_frac")
