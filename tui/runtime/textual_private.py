"""Every use of Textual's private API, in one place; ``tests/tui/test_textual_private.py`` pins each.

What the app relies on, and why no public API serves:

- ``textual._compositor``: the update types the compositor hands to
  ``App._display`` (``LayoutUpdate``: a region's lines, ``ChopsUpdate``: changed
  line pieces, both ``CompositorUpdate``). :mod:`miles_tui.tui.runtime.terminal_diff`
  reads them to write only the cells that change.
- ``App._display(screen, renderable)``: the one place where Textual turns an
  update into terminal bytes. :class:`FilteredDisplayApp` overrides it to pass
  each update through :meth:`FilteredDisplayApp.filter_update` first.
- ``App._running``, ``_closed``, ``_batch_count``, ``_driver``: the tests
  ``App._display`` makes before it writes; the filter runs only when they pass,
  so the copy of the screen changes only with what really reaches the terminal.

A Textual release that renames or moves any of these fails the pinning test
(not the app, silently).
"""

from __future__ import annotations

from typing import cast

from rich.console import RenderableType
from textual import _compositor
from textual.app import App
from textual.screen import Screen

CompositorUpdate = _compositor.CompositorUpdate
"""What the compositor hands to ``App._display``: an update with ``render_segments(console)``."""
LayoutUpdate = _compositor.LayoutUpdate
"""A whole region's lines (``region``, ``strips``): a new layout or screen."""
ChopsUpdate = _compositor.ChopsUpdate
"""Changed pieces of lines (``chops``, ``spans``, ``chop_ends``)."""


class FilteredDisplayApp(App[None]):
    """An App whose compositor updates pass through :meth:`filter_update` before Textual writes them."""

    def filter_update(self, screen: Screen[object], update: CompositorUpdate) -> CompositorUpdate | None:
        """What to write instead of ``update`` (None: nothing). Called only for updates Textual will write."""
        return update

    def writes_updates(self) -> bool:
        """Textual's own tests in ``App._display`` pass (running, not closed, no batch, a driver), on a full
        screen terminal: the update given to ``_display`` now reaches the terminal."""
        textual_writes = self._running and not self._closed and not self._batch_count and self._driver is not None
        return textual_writes and not self.is_headless and not self.is_inline

    def _display(self, screen: Screen[object], renderable: RenderableType | None) -> None:
        update: object = renderable  # Textual passes a CompositorUpdate where it types a RenderableType
        if isinstance(update, CompositorUpdate) and self.writes_updates():
            renderable = cast("RenderableType | None", self.filter_update(screen, update))
        super()._display(screen, renderable)
