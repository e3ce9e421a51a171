"""The one-line run header: name, latest step, the run's state on its one clock, data age, new-step badge.

The state comes from core (``RunModel.clock``, judged by ``analysis.run_state`` on the
newest record's own timestamp, file times only where no record has one), so the header,
the views and ``report`` agree: ``● LIVE`` only while data keeps coming at the run's
cadence, ``○ QUIET since DATE`` when it stopped, ``■ ENDED · last data DATE`` when it
reached its last step, ``✗ NOT A DUMP`` for a folder that is not one (never LIVE).

It keeps itself current: on mount it subscribes to the app's ``run_changed``
signal (published with the run model after every poll and follow toggle), so
no screen refreshes it. It redraws only when its text changes: the data age is kept as the text it
shows ("3m12s"), so a poll that moves the age by less than the unit shown
draws nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from miles_tui.core.analysis import RunState
from miles_tui.core.base.inert_text import inert
from miles_tui.tui.formatting import date_time, duration
from miles_tui.tui.run_model import RunModel

if TYPE_CHECKING:
    from miles_tui.tui.monitor_app import MonitorApp


class RunHeader(Widget):
    """Run name · latest step · LIVE/IDLE/PAUSED/STATIC · data age (a warning when the run goes quiet)."""

    DEFAULT_CSS = """
    RunHeader { height: 1; background: $panel; padding: 0 1; }
    """

    run_name: reactive[str] = reactive("")
    latest: reactive[int | None] = reactive(None)
    live: reactive[bool] = reactive(True)
    following: reactive[bool] = reactive(True)
    age_text: reactive[str | None] = reactive(None)
    """The data age as shown (None: no data yet)."""
    quiet: reactive[bool] = reactive(False)
    """The run went quiet (no new data for longer than its usual step interval allows)."""
    state: reactive[RunState | None] = reactive(None)
    """The run's state as core judged it (None before the first poll)."""
    last_data: reactive[str] = reactive("")
    """The newest data time, absolute (shown once the run is quiet or ended)."""
    new_steps: reactive[int] = reactive(0)
    context: reactive[str] = reactive("")
    backlog: reactive[int] = reactive(0)
    """Steps still to summarize (a long run back-filling)."""

    def render(self) -> Text:
        text = Text()
        text.append("miles-tui ", style="bold")
        text.append(inert(self.run_name) or "?", style="bold cyan")
        text.append("  step ")
        text.append("–" if self.latest is None else str(self.latest), style="bold")
        if self.context:
            text.append(f"  {self.context}")
        text.append("  ")
        if self.state is RunState.NOT_A_DUMP:
            text.append("✗ NOT A DUMP", style="bold red")
            return text
        if self.state is RunState.ENDED:
            text.append("■ ENDED", style="bold")
            text.append(f" · last data {self.last_data}")
            return self._badges(text)
        if not self.live:
            text.append("■ STATIC", style="dim")
            if self.quiet:
                text.append(f" · quiet since {self.last_data}", style="yellow")
        elif not self.following:
            text.append("‖ PAUSED", style="bold yellow")
            if self.quiet:
                text.append(f" · quiet since {self.last_data}", style="yellow")
        elif self.quiet:  # a run that stopped writing is not "live": since when, and how long ago
            text.append(f"○ QUIET since {self.last_data}", style="bold yellow")
            if self.age_text is not None:
                text.append(f" · {self.age_text} ago", style="bold red")
            return self._badges(text)
        else:
            text.append("● LIVE", style="bold green")
        if self.age_text is not None:
            quiet = self.live and self.quiet
            text.append("  data ")
            text.append(f"{self.age_text} old", style="bold red" if quiet else "")
            if quiet:
                text.append(" · no new data", style="bold red")
        return self._badges(text)

    def _badges(self, text: Text) -> Text:
        if self.backlog:
            text.append(f"  summarizing {self.backlog:,} step{'s' if self.backlog > 1 else ''}…", style="dim")
        if self.new_steps:
            text.append("  ")
            text.append(
                f" {self.new_steps} new step{'s' if self.new_steps > 1 else ''} (f: track) ", style="reverse yellow"
            )
        return text

    def on_mount(self) -> None:
        app = cast("MonitorApp", self.app)
        self.show_run(app.model)
        app.run_changed.subscribe(self, self.show_run)

    def show_run(self, model: RunModel) -> None:
        """Take the run's current figures (every screen's header shows the same)."""
        self.run_name = model.run_name
        self.live = model.live
        self.latest = model.latest
        self.age_text = None if model.data_age is None else duration(model.data_age, padded=True)
        self.state = model.state
        self.quiet = model.state is RunState.QUIET
        self.last_data = date_time(model.clock.last_data) if model.clock is not None else ""
        self.backlog = model.backlog
        self.following = model.following
