"""The command palette knows the app: typing a command's name and enter opens what it names."""

from __future__ import annotations

from collections.abc import Callable
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
from tests.harness import frozen_app, screen_text, settle


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
        await _run_command(pilot, "track newest off")
        assert not app.follow_latest
        await _run_command(pilot, "poll every 10")
        assert app.poll_seconds == 10.0


async def _palette_for(pilot: Pilot[None], text: str) -> str:
    """The palette's list after typing ``text`` (the palette stays open)."""
    await pilot.press("ctrl+p")
    await settle(pilot)
    await pilot.press(*text)
    await pilot.pause(0.4)  # the palette searches in the background
    await settle(pilot)
    return screen_text(pilot.app)


def _listed(text: str, *names: str) -> list[int]:
    """The screen row of each name (-1 when it is not shown)."""
    rows = text.splitlines()
    return [next((i for i, row in enumerate(rows) if name in row), -1) for name in names]


@pytest.mark.parametrize("number", ["0", "1", "3"])
async def test_a_number_offers_its_step_first_not_a_poll_interval(demo_run: Path, number: str) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        text = await _palette_for(pilot, number)
        assert f"Go to step {number}" in text, text
        assert "Poll every" not in text, text
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.rollout_id == int(number)
        assert app.poll_seconds == 3600


async def test_a_number_offers_the_eval_step_and_says_when_there_is_none(golden_copy: Callable[[str], Path]) -> None:
    app = frozen_app(golden_copy("tp_dup"))  # train steps 0-2; eval steps 0 and 3
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        text = await _palette_for(pilot, "0")
        train, evaluation = _listed(text, "Go to step 0 ", "Go to step 0 eval")
        assert 0 <= train < evaluation, text
        await pilot.press("escape")
        text = await _palette_for(pilot, "3")
        assert "Go to step 3 eval" in text and "No matches found" not in text, text
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and (app.screen.rollout_id, app.screen.evaluation) == (3, True)
        text = await _palette_for(pilot, "12")
        assert "no step 12" in text and "No matches found" not in text, text


async def test_poll_intervals_only_when_asked_for(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert "Poll every" in await _palette_for(pilot, "poll")
        await pilot.press("escape")
        assert "Poll every" not in await _palette_for(pilot, "every")
