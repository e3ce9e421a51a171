"""What every screen of the monitor shares: the app it runs in (its RunHeader keeps itself current)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual import events
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input

from miles_tui.tui.widgets.run_header import RunHeader

if TYPE_CHECKING:
    from miles_tui.tui.model.monitor_app import MonitorApp


class MonitorScreen(Screen[None]):
    """A screen of the miles-tui app (it yields a RunHeader in its compose)."""

    GLOBAL_VIEW: ClassVar[bool] = False
    """Opened by a key that works on every screen (see :meth:`MilesApp.open_global_view`): another global
    view replaces it instead of stacking on it."""

    @property
    def miles(self) -> MonitorApp:
        """The app, typed: its watcher (reads), model (what is known) and follow state."""
        return cast("MonitorApp", self.app)

    async def _on_idle(self, event: events.Idle) -> None:
        """Under an opaque screen nothing this one draws is seen, but Textual counts the screen just under the top
        as visible: once it had anything to repaint it marks itself for a repaint again after passing the change up,
        so every message it took (a poll's, each second) repainted the whole screen on top. Covered, it keeps no
        repaint pending; shown again, Textual lays it out and draws it whole. (Private: pinned by
        tests/tui/test_covered_screen_repaint.py.)"""
        top = self.app.screen
        if top is not self and top.styles.background.a == 1:
            self._repaint_required = False
        await super()._on_idle(event)

    def on_screen_resume(self) -> None:
        """Shown again: its header takes the figures that came while it was hidden."""
        for header in self.query(RunHeader):
            header.catch_up()

    def focus_now(self, widget: Widget) -> None:
        """Focus ``widget`` before the next key is handled.

        Keys typed in one burst after ``/`` went to the table as commands (``e`` switched train/eval, ``s``
        sorted, ``m`` opened the metrics) instead of into the filter box: the app hands each key to the widget
        focused when the key is taken off its queue, which is before the table has run ``/``'s action, and
        ``Widget.focus()`` defers the move further. So ``/`` is a priority binding (run as the key is taken)
        and its action moves the focus at once, here.
        """
        self.set_focus(widget)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``/`` (a priority binding) stays out of a focused text box: there it is the character typed."""
        return not (action == "filter" and isinstance(self.focused, Input))
