"""One way to drive the real app from tests, screenshot scenes and benchmarks.

- :func:`frozen_app`: the app on a run folder with a fixed clock and no background polling, so a
  screen depends only on the files and on the keys pressed.
- :func:`settle`: wait until every worker has finished and the screen is repainted.
- :func:`screen_text`: the screen as a user reads it (plain text, one line per row).
- :class:`MessageRecorder`: pass it as ``run_test(message_hook=...)`` to see which messages the
  app handled, in order.

Nothing here is a mock: the app, its workers and core all run for real.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from textual.app import App
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Input

from miles_tui.tui.app import MilesApp, make_app
from tests.conftest import EPOCH

M = TypeVar("M", bound=Message)


def frozen_app(run_dir: Path, now: float | Callable[[], float] = EPOCH, **options: Any) -> MilesApp:
    """The app on ``run_dir`` at a fixed ``now`` (or a clock), polling only when a test asks."""
    clock = now if callable(now) else (lambda: now)
    return make_app(run_dir, poll_seconds=3600, clock=clock, **options)


async def settle(pilot: Pilot[Any], *, rounds: int = 4, linger: float | None = None, quiet: bool = False) -> None:
    """Wait until the app's workers are done and it has repainted.

    ``linger`` waits that long at the end (past a screen's own settle timer); ``quiet`` drops toasts
    and stops input cursors blinking, so a screenshot is the same every time.
    """
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        await app.workers.wait_for_complete()
    if quiet:
        app.clear_notifications()
        for input_box in app.screen.query(Input):
            input_box.cursor_blink = False
    await pilot.pause(linger)


def screen_text(app: App[None]) -> str:
    """The screen as a user reads it: plain text, one line per terminal row (what a screenshot shows)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), color_system=None, record=True)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


class MessageRecorder:
    """Every message the app handles, in order (``run_test(message_hook=recorder)``)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def __call__(self, message: Message) -> None:
        self.messages.append(message)

    def of_type(self, kind: type[M]) -> list[M]:
        """The recorded messages of one type."""
        return [message for message in self.messages if isinstance(message, kind)]

    def clear(self) -> None:
        self.messages.clear()
