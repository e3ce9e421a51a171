"""What every screen of the monitor shares: the app it runs in (its RunHeader keeps itself current)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual.screen import Screen

if TYPE_CHECKING:
    from miles_tui.tui.app import MilesApp


class MonitorScreen(Screen[None]):
    """A screen of the miles-tui app (it yields a RunHeader in its compose)."""

    GLOBAL_VIEW: ClassVar[bool] = False
    """Opened by a key that works on every screen (see :meth:`MilesApp.open_global_view`): another global
    view replaces it instead of stacking on it."""

    @property
    def miles(self) -> MilesApp:
        """The app, typed: its watcher (reads), model (what is known) and follow state."""
        return cast("MilesApp", self.app)
