"""Every key a screen (or the app) declares reaches it: no focused widget's own binding shadows it.

The step screen's ``g`` (groups) once did nothing because the focused table bound
``home,g``; its footer and help still said "g Groups". This walks every screen
with its default focus and checks, for each declared key, that the binding
Textual would run for it is the declared one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.binding import ActiveBinding, Binding
from textual.pilot import Pilot
from textual.widget import Widget

from miles_tui.tui.app import MilesApp, make_app
from screenshots.scenes import EPOCH, build_demo

WALK = (
    ((), "OverviewScreen"),
    (("enter",), "StepScreen"),
    (("enter",), "SampleScreen"),
    (("escape", "O"), "OutlierScreen"),
    (("escape", "c"), "CompareScreen"),
    (("escape", "escape", "m"), "MetricsScreen"),
    (("u",), "ComputeScreen"),
    (("escape", "question_mark"), "HelpScreen"),
    (("escape", "E"), "EnginesScreen"),
)
"""Keys from the previous screen, and the screen they lead to."""


def _declared(node: object) -> list[Binding]:
    return [b for b in getattr(node, "BINDINGS", []) if isinstance(b, Binding)]


def _skips(found: ActiveBinding) -> bool:
    """Whether the shadowing binding steps aside (SkipAction): scrolling a way the widget cannot scroll."""
    node, action = found.node, found.binding.action
    if action in ("scroll_left", "scroll_right"):
        return isinstance(node, Widget) and not node.allow_horizontal_scroll
    if action in ("scroll_up", "scroll_down"):
        return isinstance(node, Widget) and not node.allow_vertical_scroll
    return False


def _shadowed(app: MilesApp) -> list[str]:
    """Declared keys of the screen (and, off modal screens, of the app) that run something else."""
    screen = app.screen
    active = app.active_bindings
    owners: list[object] = [screen] if screen.is_modal else [screen, app]
    wrong = []
    for owner in owners:
        for binding in _declared(owner):
            for key in (k.strip() for k in binding.key.split(",")):
                found = active.get(key)
                if found is None or (found.binding.action != binding.action and not _skips(found)):
                    runs = "nothing" if found is None else f"{found.binding.action!r} of {type(found.node).__name__}"
                    wrong.append(f"{type(screen).__name__}: {key} should run {binding.action!r}, runs {runs}")
    return wrong


async def _settle(app: MilesApp, pilot: Pilot[None]) -> None:
    for _ in range(3):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


async def test_every_declared_key_reaches_its_screen(tmp_path: Path) -> None:
    app = make_app(build_demo(tmp_path / "demo"), poll_seconds=3600, clock=lambda: EPOCH)
    problems: list[str] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(app, pilot)
        for keys, name in WALK:
            await pilot.press(*keys)
            await _settle(app, pilot)
            assert type(app.screen).__name__ == name
            problems += _shadowed(app)
    assert not problems, "\n".join(problems)


async def test_the_filter_box_takes_letters_the_screen_binds(golden_copy: Callable[[str], Path]) -> None:
    """The converse: while the filter box has the focus, g / e / s are text, not actions."""
    app = make_app(golden_copy("tp_dup"), poll_seconds=3600, clock=lambda: EPOCH)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(app, pilot)
        await pilot.press("enter")
        await _settle(app, pilot)
        screen = app.screen
        await pilot.press("slash", *"gse")
        await _settle(app, pilot)
        assert app.screen is screen and not getattr(screen, "show_groups", True)
        from textual.widgets import Input

        assert screen.query_one("#filter", Input).value == "gse"


@pytest.mark.parametrize("key", ["g"])
def test_the_table_leaves_screen_keys_alone(key: str) -> None:
    from miles_tui.tui.widgets.virtual_table import VirtualTable

    keys = {k.strip() for b in _declared(VirtualTable) for k in b.key.split(",")}
    assert key not in keys
