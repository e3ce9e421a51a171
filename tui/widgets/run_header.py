"""The one-line run header: name, latest step, live state, data age, new-step badge."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from miles_tui.core.inert_text import inert
from miles_tui.tui.formatting import age
from miles_tui.tui.run_model import RunModel


class RunHeader(Widget):
    """Run name · latest step · LIVE/PAUSED · data age (a warning when the run goes quiet)."""

    DEFAULT_CSS = """
    RunHeader { height: 1; background: $panel; padding: 0 1; }
    """

    run_name: reactive[str] = reactive("")
    latest: reactive[int | None] = reactive(None)
    live: reactive[bool] = reactive(True)
    following: reactive[bool] = reactive(True)
    data_age: reactive[float | None] = reactive(None)
    quiet_after: reactive[float] = reactive(600.0)
    new_steps: reactive[int] = reactive(0)
    context: reactive[str] = reactive("")

    def render(self) -> Text:
        text = Text()
        text.append("miles-tui ", style="bold")
        text.append(inert(self.run_name) or "?", style="bold cyan")
        text.append("  step ")
        text.append("–" if self.latest is None else str(self.latest), style="bold")
        if self.context:
            text.append(f"  {self.context}")
        text.append("  ")
        if not self.live:
            text.append("■ STATIC", style="dim")
        elif self.following:
            text.append("● LIVE", style="bold green")
        else:
            text.append("‖ PAUSED", style="bold yellow")
        if self.data_age is not None:
            quiet = self.live and self.data_age > self.quiet_after
            text.append("  data ")
            text.append(f"{age(self.data_age)} old", style="bold red" if quiet else "")
            if quiet:
                text.append(" QUIET: no new data", style="bold red")
        if self.new_steps:
            text.append("  ")
            text.append(
                f" {self.new_steps} new step{'s' if self.new_steps > 1 else ''} (f: follow) ", style="reverse yellow"
            )
        return text

    def show_run(self, model: RunModel, following: bool) -> None:
        """Take the run's current figures (every screen's header shows the same)."""
        self.run_name = model.run_name
        self.latest = model.latest
        self.data_age = model.data_age
        self.quiet_after = model.quiet_after
        self.following = following
