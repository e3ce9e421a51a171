"""The command palette knows the app: typing a command's name and enter opens what it names."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from miles_tui.tui.screens.compare_screen import CompareScreen
from miles_tui.tui.screens.compute_screen import ComputeScreen
from miles_tui.tui.screens.metrics_screen import MetricsScreen
from miles_tui.tui.screens.outlier_screen import OutlierScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.screens.scatter_screen import ScatterScreen
from miles_tui.tui.screens.step_screen import StepScreen
from miles_tui.tui.widgets.advisory_list import AdvisoryList
from tests.harness import frozen_app, settle


async def _run_command(pilot: Pilot[None], text: str) -> None:
    await pilot.press("ctrl+p")
    await settle(pilot)
    await pilot.press(*text)
    await pilot.pause(0.4)  # the palette searches in the background
    await settle(pilot)
    await pilot.press("enter")
    await settle(pilot)


@pytest.mark.parametrize(
    ("command", "screen"),
    [
        ("metrics", MetricsScreen),
        ("gpus", ComputeScreen),
        ("scatter", ScatterScreen),
        ("outliers", OutlierScreen),
        ("compare", CompareScreen),
    ],
)
async def test_each_view_opens_by_name(demo_run: Path, command: str, screen: type) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await _run_command(pilot, command)
        assert isinstance(app.screen, screen), app.screen


async def test_a_number_goes_to_that_step_and_advisories_return_to_the_overview(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await _run_command(pilot, "step 1")
        assert isinstance(app.screen, StepScreen) and app.screen.rollout_id == 1
        await _run_command(pilot, "advisories")
        assert isinstance(app.screen, OverviewScreen)
        assert isinstance(app.focused, AdvisoryList)


async def test_follow_and_poll_interval(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.follow_latest
        await _run_command(pilot, "follow off")
        assert not app.follow_latest
        await _run_command(pilot, "poll every 10")
        assert app.poll_seconds == 10.0
