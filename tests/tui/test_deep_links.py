"""miles-tui RUN --step N [--eval] [--sample I]: open there, with the normal back stack behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_tui.core.dump import Run
from miles_tui.tui.cli import main
from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.screens.sample_screen import SampleScreen
from miles_tui.tui.screens.step_screen import StepScreen
from tests.conftest import EPOCH
from tests.harness import frozen_app, settle


async def test_a_sample_link_opens_the_sample_with_step_and_overview_behind(demo_run: Path) -> None:
    sample = Run(demo_run).summary(1, False, EPOCH).rows[3].sample_index
    app = frozen_app(demo_run, start=(1, False, sample))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SampleScreen) and app.screen.sample_index == sample
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and (app.screen.rollout_id, app.screen.evaluation) == (1, False)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)


async def test_a_step_link_opens_the_step(demo_run: Path) -> None:
    app = frozen_app(demo_run, start=(2, False, None))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.rollout_id == 2
        assert [type(s) for s in app.screen_stack[1:]] == [OverviewScreen, StepScreen]


def test_a_bad_step_or_sample_is_one_clear_error(demo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(demo_run), "--step", "999"]) == 1
    assert "the run has no step 999 (visible: 0, 1, 2, 3)" in capsys.readouterr().err
    assert main([str(demo_run), "--step", "1", "--sample", "999999"]) == 1
    err = capsys.readouterr().err
    assert "step 1 has no sample 999999" in err and "Traceback" not in err
    assert main([str(demo_run), "--sample", "3"]) == 2
    assert "--sample and --eval go with --step N" in capsys.readouterr().err


async def test_the_step_title_has_the_web_headline_figures(demo_run: Path) -> None:
    """Mixed-version fraction and mean entropy beside reward and staleness; an eval step's staleness is core's
    value too, as in the overview and the rows (it read — here and 0.00 there)."""
    from miles_tui.tui.formatting import number, percent

    ids = Run(demo_run).step_ids(EPOCH)
    for rid, evaluation in [(ids.train[-1], False), *[(e, True) for e in ids.evaluation[:1]]]:
        app = frozen_app(demo_run, start=(rid, evaluation, None))
        async with app.run_test(size=(200, 48)) as pilot:
            await settle(pilot)
            assert isinstance(app.screen, StepScreen)
            title = str(app.screen.query_one("#step-title").render())
            a = app.model.summaries[(rid, evaluation)].aggregate
            assert f"mixed {percent(a.mixed_version_frac)}" in title
            assert f"entropy {number(a.mean_entropy)}" in title
            assert "stale —" not in title and f"stale {number(a.avg_staleness, 2)}" in title
