"""The scatter view: p on a step draws its samples, the cursor walks them, enter opens one."""

from __future__ import annotations

from pathlib import Path

from miles_tui.tui.screens.sample_screen import SampleScreen
from miles_tui.tui.screens.scatter_screen import ScatterPlot, ScatterScreen
from miles_tui.tui.screens.step_screen import StepScreen
from tests.harness import frozen_app, settle


async def test_p_on_a_step_plots_its_samples_and_enter_opens_the_one_under_the_cursor(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        rid = app.screen.rollout_id
        await pilot.press("p")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ScatterScreen) and screen.rollout_id == rid
        summary = app.model.summaries[(rid, False)]
        assert screen.scatter is not None
        assert len(screen.scatter.points) == sum(r.reward is not None for r in summary.rows)
        title = str(screen.query_one("#title").render())
        assert f"step {rid} · reward vs response length" in title
        plot = str(screen.query_one(ScatterPlot).render())
        assert "◆" in plot  # the cursor, readable without colour
        assert ("×" in plot) == any(p.truncated for p in screen.scatter.points)
        first = screen.scatter.points[screen.cursor]
        assert f"sample {first.sample_index}" in str(screen.query_one("#point").render())
        await pilot.press("right")
        moved = screen.scatter.points[screen.cursor]
        assert moved != first and moved.length >= first.length
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SampleScreen)
        assert app.screen.sample_index == moved.sample_index
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, ScatterScreen)
