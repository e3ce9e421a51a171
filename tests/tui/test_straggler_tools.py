"""Pilot tests of the GPU view's straggler tools: miles' lane grammar at /, the slowest-phase pick W, the
point-in-time inspector at [ ], power rows p."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Label, Static

from miles_tui.tui.app import MilesApp
from miles_tui.tui.screens.compute_screen import ComputeScreen
from miles_tui.tui.widgets.heat_rows import HeatRows
from tests.conftest import GOLDEN
from tests.core.fleet_writer import Fleet, write_fleet
from tests.harness import frozen_app, settle

GOLDEN_END = json.loads((GOLDEN / "live_streams.truth.json").read_text())["dashboard"]["time_range"][1]


async def _open(app: MilesApp, pilot: Pilot[None]) -> ComputeScreen:
    await settle(pilot)
    await pilot.press("u")
    await settle(pilot)
    assert isinstance(app.screen, ComputeScreen) and app.screen.view is not None
    return app.screen


def _lanes(screen: ComputeScreen) -> list[object]:
    rows = screen.query_one("#lanes", HeatRows).rows
    per = getattr(rows, "lines", 3)
    return [rows[i].key for i in range(0, len(rows), per)]


def _text(screen: ComputeScreen, selector: str) -> str:
    return str(screen.query_one(selector, Label).render())


def _lines(screen: ComputeScreen, selector: str) -> list[str]:
    widget = screen.query_one(selector, HeatRows)
    return [widget.render_line(y).text for y in range(widget.size.height)]


async def _type(pilot: Pilot[None], text: str) -> None:
    await pilot.press("slash", *text, "enter")
    await settle(pilot)


async def test_the_lane_grammar_selects_says_its_errors_and_esc_clears(golden_copy: Callable[[str], Path]) -> None:
    app = frozen_app(golden_copy("live_streams"), GOLDEN_END + 10)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        both = [("10.0.0.7", 0), ("10.0.0.7", 1)]
        assert _lanes(screen) == both
        await _type(pilot, "rank:1")
        assert _lanes(screen) == [("10.0.0.7", 1)]
        assert "lanes rank:1: 1 of 2" in _text(screen, "#compute-title")
        await _type(pilot, "rank:0, host:x")
        status = _text(screen, "#lane-status")
        assert "unknown lane selector 'host'" in status and "column 9" in status
        assert screen.query_one("#lane-filter", Input).display, "the prompt stays open to fix the expression"
        assert _lanes(screen) == [("10.0.0.7", 1)], "a bad expression changes nothing"
        await pilot.press("escape")
        await settle(pilot)
        assert not screen.query_one("#lane-filter", Input).display and isinstance(app.screen, ComputeScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert _lanes(screen) == both and "all 2" in _text(screen, "#compute-title")
        await _type(pilot, "role:rollout")
        assert _lanes(screen) == [] and "0 of 2" in _text(screen, "#compute-title")
        await _type(pilot, "all")
        assert _lanes(screen) == both and "all 2" in _text(screen, "#compute-title")


async def test_keys_typed_in_a_burst_after_slash_go_into_the_prompt(fleet: Fleet) -> None:
    app = frozen_app(fleet.root, fleet.end + 10)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("slash", *f"node:{fleet.dead_node}", "enter")  # n, o, d, e, a would all be commands
        await settle(pilot)
        assert _lanes(screen) == [(fleet.dead_node, gpu) for gpu in range(8)]
        assert all("DEAD" in line for line in screen.lane_texts())
        await _type(pilot, "g:0-3,every:256")
        assert len(_lanes(screen)) == 5
        await pilot.press("w")
        await settle(pilot)
        assert "worst 16 of 512" in _text(screen, "#compute-title"), "w leaves the expression for the worst lanes"


async def test_w_picks_the_slowest_lanes_of_a_phase_and_again_the_next_phase(
    golden_copy: Callable[[str], Path],
) -> None:
    app = frozen_app(golden_copy("live_streams"), GOLDEN_END + 10)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("W")
        await settle(pilot)
        status = _text(screen, "#lane-status")
        assert "slowest update_weights (mean span, miles' pick): 10.0.0.7:1 2.2s, 10.0.0.7:0 2.0s" in status
        assert _lanes(screen) == [("10.0.0.7", 1), ("10.0.0.7", 0)], "slowest first"
        assert "slowest update_weights: 2 of 2" in _text(screen, "#compute-title")
        await pilot.press("W")
        await settle(pilot)
        status = _text(screen, "#lane-status")
        assert "slowest train_wait" in status, "the next phase; the rollout manager's has no lane to rank"
        await pilot.press("escape")
        await settle(pilot)
        assert "all 2" in _text(screen, "#compute-title") and not screen.query_one("#lane-status").display


async def test_p_adds_a_power_row_under_each_lane(golden_copy: Callable[[str], Path]) -> None:
    app = frozen_app(golden_copy("live_streams"), GOLDEN_END + 10)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        assert not any(line.split()[:1] == ["power"] for line in _lines(screen, "#lanes"))
        await pilot.press("p")
        await settle(pilot)
        lines = _lines(screen, "#lanes")
        assert [line.split()[0] for line in lines[:8]] == [
            *("10.0.0.7:0", "phases", "memory", "power"),
            *("10.0.0.7:1", "phases", "memory", "power"),
        ]
        assert "peak 600W █=600W" in lines[3]
        assert _lanes(screen) == [("10.0.0.7", 0), ("10.0.0.7", 1)]
        await pilot.press("p")
        await settle(pilot)
        assert len(screen.query_one("#lanes", HeatRows).rows) == 6


async def test_the_inspector_shows_each_lane_and_its_processes_at_the_cursor(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.cursor is not None
        first = screen.cursor
        text = str(screen.query_one("#inspector", Static).render())
        assert "lane                  util     mem  power  phase" in text
        assert text.count("10.0.0.") == len(screen.shown)
        assert "processes at" in text and "ray::MegatronTrainRayActor" in text and "pid 3100" in text
        assert "▼" in _lines(screen, "#axis")[0]
        lanes = screen.query_one("#lanes", HeatRows)
        assert lanes.marker is not None, "the cursor's column is marked on every strip too"
        reversed_cells = [seg.text for seg in lanes.render_line(0) if seg.style is not None and seg.style.reverse]
        assert len("".join(reversed_cells)) == 1
        width = screen.view.grid.bins.width if screen.view else 0
        await pilot.press("left_square_bracket", "left_square_bracket")
        await settle(pilot)
        assert screen.cursor == pytest.approx(first - 2 * width)
        await pilot.press("escape")
        await settle(pilot)
        assert screen.cursor is None and not screen.query_one("#inspector-pane").display
        assert "▼" not in _lines(screen, "#axis")[0]
        assert screen.query_one("#lanes", HeatRows).marker is None


async def test_the_inspector_says_a_run_without_gpu_processes(golden_copy: Callable[[str], Path]) -> None:
    app = frozen_app(golden_copy("live_streams"), GOLDEN_END + 10)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("right_square_bracket")
        await settle(pilot)
        text = str(screen.query_one("#inspector", Static).render())
        assert "this run wrote no gpu_processes/" in text
        # the newest bin with samples holds the last line of each lane (ts 1787226010: util 90 / 87)
        assert "at 11:40:12 UTC  bin 11:40:07 UTC +10.0s" in text
        assert "10.0.0.7:0             90%   58.6G   600W  actor_train" in text
        assert "10.0.0.7:1             87%   58.8G   600W  actor_train" in text


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return write_fleet(tmp_path_factory.mktemp("fleet") / "run")


async def test_w_without_phases_says_so_and_keeps_the_lanes(tmp_path: Path) -> None:
    dashboard = tmp_path / "run" / "dashboard"
    (dashboard / "gpu_util").mkdir(parents=True)
    end = 1787224800.0
    lines = [{"ts": end - 600 + 10 * i, "node": "n", "gpu": g, "util": 50, "mem_mb": 1000} for i in range(60)
             for g in range(2)]  # fmt: skip
    (dashboard / "gpu_util" / "20260820_11.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    app = frozen_app(tmp_path / "run", end + 5)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("W")
        await settle(pilot)
        assert "W · no closed phase on a GPU in this window" in _text(screen, "#lane-status")
        assert _lanes(screen) == [("n", 0), ("n", 1)]
        await pilot.press("right_square_bracket")
        await settle(pilot)
        text = str(screen.query_one("#inspector", Static).render())
        assert "n:0                    50%   1000M      –  –" in text, "no power_w and no phase: en dashes, never 0"
