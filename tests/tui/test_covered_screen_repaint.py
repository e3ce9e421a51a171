"""A screen under an opaque one repaints nothing: Textual counts the screen just under the top as visible, and
once it had a change it re-marked itself for a repaint after each message it took, repainting the whole top
screen every poll (the GPU view's idle CPU: 2.1 % -> 1.1 % on a week-long run). These tests pin the private
Textual behaviour MonitorScreen._on_idle relies on, and the effect."""

from __future__ import annotations

import inspect
from pathlib import Path

from textual.screen import Screen

from miles_tui.tui.screens.compute_screen import ComputeScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen
from tests.harness import frozen_app, settle


def test_textual_still_has_what_the_override_relies_on() -> None:
    """An upgrade that renames these makes the override a no-op (or an error): fail here, loudly."""
    assert inspect.iscoroutinefunction(Screen._on_idle)
    source = inspect.getsource(Screen._on_idle)
    assert "_repaint_required" in source and "_update_timer.resume()" in source
    assert "self._repaint_required = True" in inspect.getsource(Screen._compositor_refresh)


async def test_messages_to_a_covered_screen_do_not_repaint_the_screen_on_top(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot, linger=0.3)
        top, covered = app.screen, app.screen_stack[-2]
        assert isinstance(top, ComputeScreen) and isinstance(covered, OverviewScreen)
        covered.query_one("#steps").refresh()  # a change under the top screen, as a poll makes
        await settle(pilot)
        full = 0
        render = top._compositor.render_full_update

        def counted(*args: object, **kwargs: object) -> object:
            nonlocal full
            full += 1
            return render(*args, **kwargs)

        top._compositor.render_full_update = counted  # type: ignore[method-assign]
        for _ in range(5):
            covered.call_later(lambda: None)  # a message, as each poll's run_changed is
            await settle(pilot)
        assert full == 0, f"{full} full repaints of the top screen for 5 messages to the one under it"
