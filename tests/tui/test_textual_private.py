"""What miles-tui takes from Textual's private API still exists where tui/runtime/textual_private.py expects it.

A Textual upgrade that renames or moves any of it fails here, not silently in the app (whose terminal
output would then stop going through the diff, or break at the first frame).
"""

from __future__ import annotations

import inspect

from rich.console import Console
from textual import _compositor
from textual.app import App
from textual.geometry import Region
from textual.strip import Strip

from miles_tui.tui.runtime.textual_private import ChopsUpdate, CompositorUpdate, FilteredDisplayApp, LayoutUpdate


def test_compositor_update_types_are_where_terminal_diff_reads_them() -> None:
    assert CompositorUpdate is _compositor.CompositorUpdate
    assert issubclass(LayoutUpdate, CompositorUpdate) and issubclass(ChopsUpdate, CompositorUpdate)
    assert list(inspect.signature(LayoutUpdate).parameters) == ["strips", "region"]
    assert list(inspect.signature(ChopsUpdate).parameters) == ["chops", "spans", "chop_ends"]


def test_the_attributes_terminal_diff_reads_are_set() -> None:
    line = Strip.blank(4)
    layout = LayoutUpdate([line], Region(0, 0, 4, 1))
    assert layout.region == Region(0, 0, 4, 1) and list(layout.strips) == [line]
    chops = ChopsUpdate([{0: line}], [(0, 0, 4)], [[4]])
    assert chops.chops == [{0: line}] and chops.spans == [(0, 0, 4)] and chops.chop_ends == [[4]]
    assert isinstance(chops.render_segments(Console(force_terminal=True, width=4)), str)


def test_app_display_is_the_hook_textual_writes_through() -> None:
    """``App._display(screen, renderable)`` exists, and makes the tests FilteredDisplayApp.writes_updates mirrors."""
    assert list(inspect.signature(App._display).parameters) == ["self", "screen", "renderable"]
    source = inspect.getsource(App._display)
    for name in ("_batch_count", "_running", "_closed", "_driver", "is_headless", "render_segments"):
        assert name in source, f"App._display no longer reads {name}"
    assert FilteredDisplayApp._display is not App._display


def test_the_app_state_writes_updates_reads_exists() -> None:
    app = FilteredDisplayApp()
    assert (app._running, app._closed, app._batch_count, app._driver) == (False, False, 0, None)
    assert app.writes_updates() is False


async def test_a_headless_app_never_filters() -> None:
    """Under run_test (headless) Textual writes nothing, so the filter is not asked."""
    asked: list[object] = []

    class Probe(FilteredDisplayApp):
        def filter_update(self, screen: object, update: CompositorUpdate) -> CompositorUpdate | None:
            asked.append(update)
            return update

    async with Probe().run_test() as pilot:
        await pilot.pause()
        assert pilot.app._running and not pilot.app.writes_updates()
    assert asked == []
