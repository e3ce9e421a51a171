"""No silent key, no hidden view (issue 24, item 8): compare's O and p, n on an engines view with no engine,
a dashboard-only run's overview and footer, and the demo's engine telemetry."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from miles_tui.tui.screens.compare_screen import CompareScreen
from miles_tui.tui.screens.engines_screen import EnginesScreen
from miles_tui.tui.screens.outlier_screen import OutlierScreen
from miles_tui.tui.screens.scatter_screen import ScatterScreen
from tests.conftest import EPOCH, GOLDEN
from tests.harness import frozen_app, screen_text, settle


@pytest.mark.parametrize(("key", "screen"), [("O", OutlierScreen), ("p", ScatterScreen)])
async def test_a_step_view_key_in_compare_opens_it_for_step_b(demo_run: Path, key: str, screen: type) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        b = app.screen.b
        await pilot.press(key)
        await settle(pilot)
        assert isinstance(app.screen, screen) and app.screen.rollout_id == b


async def test_n_on_an_engines_view_without_engines_says_why(tmp_path: Path) -> None:
    from tests.conftest import stamp, write_demo_run

    root = write_demo_run(tmp_path / "run", 2)
    shutil.rmtree(root / "dashboard" / "engine_series")
    stamp(root, EPOCH - 600)
    app = frozen_app(root)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("E")
        await settle(pilot)
        assert isinstance(app.screen, EnginesScreen)
        await pilot.press("n")
        await settle(pilot)
        assert "no engine to step through" in screen_text(app)


async def test_the_demo_writes_engine_telemetry(demo_run: Path) -> None:
    assert list((demo_run / "dashboard" / "engine_series").glob("*.jsonl"))
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("E")
        await settle(pilot, linger=0.3)
        assert isinstance(app.screen, EnginesScreen)
        text = screen_text(app)
        assert "10.0.0.200" in text, text


async def test_a_dashboard_only_run_shows_what_it_has_and_the_keys_to_reach_it(tmp_path: Path) -> None:
    root = tmp_path / "live_streams"
    shutil.copytree(GOLDEN / "live_streams", root)
    app = frozen_app(root, 1787226017.5 + 60)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, linger=0.3)
        text = screen_text(app)
        assert "no steps yet" not in text
        assert "metrics up to step 179 (m)" in text and "phases (u)" in text, text
        footer = text.splitlines()[-1]
        assert "m Metrics" in footer and "u GPUs" in footer, footer
