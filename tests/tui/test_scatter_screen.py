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
        # a truncated sample reads × alone in its cell, or as part of a cell's count (the legend counts them)
        truncated = sum(p.truncated for p in screen.scatter.points)
        body = "".join(line.split("│", 1)[1] for line in plot.splitlines() if "│" in line)
        assert ("×" in body or any(ch.isdigit() for ch in body)) == bool(truncated)
        assert f"{truncated} truncated" in str(screen.query_one("#legend").render())
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


def test_every_point_is_counted_where_several_share_a_cell(golden_copy: object) -> None:
    """Issue 24.9: degenerate step 1 has 6 truncated samples of 16, and one × was visible."""
    from miles_tui.core.analysis import step_scatter
    from miles_tui.core.dump import Run
    from miles_tui.tui.renderers.scatter import legend, scatter_lines
    from tests.conftest import EPOCH

    root = golden_copy("degenerate")  # type: ignore[operator]
    summary = Run(root).summary_of(Run(root).dir.visible_steps(EPOCH)[(1, False)], EPOCH)
    scatter = step_scatter(summary)
    truncated = sum(p.truncated for p in scatter.points)
    assert truncated == 6
    for width, height in ((60, 16), (100, 24), (30, 8)):
        lines = scatter_lines(scatter, width, height, cursor=None)
        shown = total = 0
        for line in lines[:-2]:
            plot = line.plain.split("│", 1)[1]
            for span in line.spans:  # the styled marks of the plot
                mark = line.plain[span.start : span.end]
                if "yellow" in str(span.style):
                    shown += int(mark) if mark.isdigit() else 10 if mark == "+" else 1
            total += sum(int(ch) if ch.isdigit() else 0 for ch in plot)
            total += sum(1 for ch in plot if ch == "×" or 0x2800 < ord(ch) <= 0x28FF)
        assert shown >= truncated, (width, height, [line.plain for line in lines])  # every truncated one counted
        assert total >= len(scatter.points) - sum(ch == "+" for line in lines for ch in line.plain) * 9
    assert legend(scatter).startswith("16 samples, 6 truncated")


async def test_zoom_keeps_the_lengths_around_the_cursor_and_counts_the_rest(demo_run: Path) -> None:
    """+ halves the response lengths shown around the cursor's sample (the web scatter's zoom), the reward axis
    fits what is kept, the points left out are counted; - and 0 go back."""
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ScatterScreen) and screen.full is not None and screen.scatter is not None
        everything = screen.full.points
        sample = screen.scatter.points[screen.cursor].sample_index
        await pilot.press("plus")
        await settle(pilot)
        assert screen.lengths is not None
        low, high = screen.lengths
        kept = [p for p in everything if low <= p.length <= high]
        assert list(screen.scatter.points) == kept and screen.scatter.outside == len(everything) - len(kept)
        assert screen.scatter.points[screen.cursor].sample_index == sample, "the cursor stays on its sample"
        assert screen.scatter.reward_range == (min(p.reward for p in kept), max(p.reward for p in kept))
        title = str(screen.query_one("#title").render())
        assert f"{len(kept)} samples · lengths" in title and f", {screen.scatter.outside} outside" in title
        await pilot.press("right")  # the walk stays among the points shown
        assert low <= screen.scatter.points[screen.cursor].length <= high
        await pilot.press("0")
        await settle(pilot)
        assert screen.lengths is None and screen.scatter.points == everything
        await pilot.press("minus")
        assert screen.lengths is None
