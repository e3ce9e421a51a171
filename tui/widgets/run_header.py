"""The one-line run header: name, latest step, the run's state on its one clock, data age, new-step badge, MFU.

The state comes from core (``RunModel.clock``, judged by ``analysis.run_state`` on the
newest record's own timestamp, file times only where no record has one), so the header,
the views and ``report`` agree: ``● LIVE`` only while data keeps coming at the run's
cadence, ``○ QUIET since DATE`` when it stopped, ``■ ENDED · last data DATE`` when it
reached its last step, ``✗ NOT A DUMP`` for a folder that is not one (never LIVE).

It keeps itself current: on mount it subscribes to the app's ``run_changed``
signal (published with the run model after every poll and follow toggle), so
no screen refreshes it. The run's MFU sits at the right end in the longest form that fits after
everything else (latest · mean of the peak, latest · mean, latest), or not at all: the status is never
cut for it. It redraws only when its text changes: the data age is kept as the text it
shows ("3m12s"), so a poll that moves the age by less than the unit shown
draws nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from miles_tui.core.analysis import RunState
from miles_tui.core.inert_text import inert
from miles_tui.tui.formatting import age, date_time
from miles_tui.tui.run_model import RunModel
from miles_tui.tui.starvation_lines import mfu_header

if TYPE_CHECKING:
    from miles_tui.tui.app import MilesApp


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
    mfu: reactive[tuple[str, ...]] = reactive(())
    """The run's MFU, longest form first: the first that fits is shown at the right end, none when none fits."""

    _pending: RunModel | None = None
    """The newest figures that came while its screen was under another (see :meth:`show_run`)."""

    def render(self) -> Text:
        return self._with_mfu(self._status())

    def _with_mfu(self, text: Text) -> Text:
        """The MFU at the right end in the longest form that fits after the status (never cut, else left out)."""
        room = self.content_size.width - text.cell_len - 2
        form = next((f for f in self.mfu if len(f) <= room), None)
        if form is not None:
            text.append(" " * (room - len(form) + 2))
            text.append(form, style="bold")
        return text

    def _status(self) -> Text:
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
        app = cast("MilesApp", self.app)
        self.show_run(app.model)
        app.run_changed.subscribe(self, self.show_run)

    def show_run(self, model: RunModel) -> None:
        """Take the run's current figures (every screen's header shows the same); a header under another screen
        keeps the newest until its screen is shown again (:meth:`catch_up`): repainting a hidden header every
        poll made Textual repaint the screen on top."""
        if not self.screen.is_active:  # is_current holds for the screen just under the top one too
            self._pending = model
            return
        self._pending = None
        self._take(model)

    def catch_up(self) -> None:
        """Its screen is shown again: take the figures that came while it was hidden."""
        if self._pending is not None:
            self.show_run(self._pending)

    def _take(self, model: RunModel) -> None:
        self.run_name = model.run_name
        self.live = model.live
        self.latest = model.latest
        self.age_text = None if model.data_age is None else age(model.data_age)
        self.state = model.state
        self.quiet = model.state is RunState.QUIET
        self.last_data = date_time(model.clock.last_data) if model.clock is not None else ""
        self.backlog = model.backlog
        self.following = model.following
        self.mfu = mfu_header(model.starvation.mfu if model.starvation is not None else None)
