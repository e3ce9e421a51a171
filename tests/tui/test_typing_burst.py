"""Keys typed in one burst after '/' land in the filter box, as a fast typist (or a paste over SSH) sends them."""

from __future__ import annotations

from pathlib import Path

from textual import events

from miles_tui.tui.app import MilesApp
from miles_tui.tui.screens.metrics_screen import MetricsScreen
from miles_tui.tui.screens.step_screen import StepScreen
from tests.harness import frozen_app, screen_text, settle


def _burst(app: MilesApp, text: str) -> None:
    """Queue every key before the app handles the first, as the terminal driver does when a fast typist (or a
    paste over SSH) sends them (Pilot.press waits for the app to go idle between keys; a terminal does not)."""
    driver = app._driver
    assert driver is not None
    for char in text:
        key = {"/": "slash", "\r": "enter", ">": "greater_than_sign", ".": "full_stop"}.get(char, char)
        event = events.Key(key, "\r" if char == "\r" else char)
        event.set_sender(app)
        driver.send_message(event)


async def test_a_filter_typed_in_one_burst_filters(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.navigation.open_step(3)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, StepScreen) and not screen.evaluation
        _burst(app, "/reward>0.5\r")  # 'e' would switch to eval, 's' sort, 'm' open the metrics
        await settle(pilot)
        assert app.screen is screen and not screen.evaluation
        assert screen.row_filter is not None and screen.row_filter.text == "reward>0.5"
        assert "filter: reward>0.5" in screen_text(app)


async def test_a_metrics_filter_typed_in_one_burst_filters(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MetricsScreen)
        log_before = screen.view.log_y
        _burst(app, "/loss\r")  # 'l' would toggle log-y
        await settle(pilot)
        assert screen.pattern == "loss" and screen.view.log_y == log_before


async def test_a_slash_inside_the_filter_box_is_typed(demo_run: Path) -> None:
    """'/' opens the box from anywhere on the screen, but in the box it is a character ('perf/*')."""
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MetricsScreen)
        await pilot.press("slash", "r", "o", "l", "l", "o", "u", "t", "slash", "asterisk", "enter")
        await settle(pilot)
        assert screen.pattern == "rollout/*"
