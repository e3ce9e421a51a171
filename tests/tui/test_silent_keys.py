"""A key that can do nothing says why, in a short notification, instead of doing nothing silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.screens.sample_screen import SampleScreen
from miles_tui.tui.screens.step_screen import StepScreen
from tests.harness import frozen_app, screen_text, settle


async def test_w_on_a_sample_that_fits_the_window_says_so(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("enter", "enter")
        await settle(pilot)
        assert isinstance(app.screen, SampleScreen) and "window all" in screen_text(app)
        await pilot.press("w")
        await settle(pilot)
        text = screen_text(app)
        assert "window all" in text and "tokens already fit in the window" in text, text


async def test_o_on_a_table_in_rollout_order_says_so(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        await pilot.press("o")
        await settle(pilot)
        assert "already in rollout order" in screen_text(app)


async def _overview_key_says(root: Path, key: str, says: str) -> None:
    """``key`` on the overview of ``root`` leaves the overview up and says ``says``."""
    app = frozen_app(root)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        assert says in screen_text(app)


@pytest.mark.parametrize("folder", ["empty run", "not a run"])
@pytest.mark.parametrize(("key", "says"), [("O", "no step yet"), ("c", "no step yet")])
async def test_outliers_and_compare_without_a_step_say_so(tmp_path: Path, folder: str, key: str, says: str) -> None:
    root = tmp_path / "run"
    (root / ("rollout_data" if folder == "empty run" else "notes")).mkdir(parents=True)
    await _overview_key_says(root, key, says)


async def test_a_step_view_key_on_the_overview_says_where_it_works(demo_run: Path) -> None:
    """`g` or `/` on the overview did nothing at all: a new user thought the app had hung."""
    await _overview_key_says(demo_run, "g", "that key works in a step: press enter first")
