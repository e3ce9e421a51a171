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

from rich.text import Span, Text
from textual.reactive import reactive
from textual.widget import Widget

from miles_tui.core.analysis import RunState
from miles_tui.core.base.inert_text import inert
from miles_tui.tui.formatting import count_text, date_time, duration
from miles_tui.tui.model.run_model import RunModel
from miles_tui.tui.views.starvation_lines import mfu_header

if TYPE_CHECKING:
    from miles_tui.tui.model.monitor_app import MonitorApp


def _merged(spans: list[Span]) -> list[Span]:
    """Adjacent spans of one style as one (the pieces of a phrase draw as the phrase did)."""
    out: list[Span] = []
    for span in sorted(spans, key=lambda s: s.start):
        if out and out[-1].end == span.start and out[-1].style == span.style:
            out[-1] = Span(out[-1].start, span.end, span.style)
        else:
            out.append(span)
    return out


def fit_pieces(pieces: list[tuple[Text, int]], width: int) -> Text:
    """The pieces joined in ``width`` cells: whole pieces only, the ones that give way soonest left out first
    (the rightmost of equals), so an age or a date is never cut to a prefix that reads as another; the
    state (priority 0) stays, and only a pane too narrow for the run's name and state cuts it (with …).
    ``width`` 0 (not laid out yet): every piece."""
    kept = list(pieces)
    while width > 0 and sum(p.cell_len for p, _ in kept) > width:
        soonest = max(priority for _, priority in kept)
        if soonest == 0:
            break
        drop = max(i for i, (_, priority) in enumerate(kept) if priority == soonest)
        del kept[drop]
    text = Text.assemble(*(piece for piece, _ in kept))
    text.spans = _merged(text.spans)
    if width > 0 and text.cell_len > width:
        text.truncate(width, overflow="ellipsis")
    return text


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
        pieces = self.pieces()
        text = fit_pieces(pieces, self.content_size.width)
        whole = sum(piece.cell_len for piece, _ in pieces)
        return self._with_mfu(text) if text.cell_len >= whole else text  # the MFU gives way before any status piece

    def _with_mfu(self, text: Text) -> Text:
        """The MFU at the right end in the longest form that fits after the status (never cut, else left out)."""
        room = self.content_size.width - text.cell_len - 2
        form = next((f for f in self.mfu if len(f) <= room), None)
        if form is not None:
            text.append(" " * (room - len(form) + 2))
            text.append(form, style="bold")
        return text

    def pieces(self) -> list[tuple[Text, int]]:
        """The header's pieces, left to right, each with how soon it gives way to a narrow pane (0: last)."""
        out: list[tuple[Text, int]] = [
            (Text("miles-tui ", style="bold"), 5),
            (Text(inert(self.run_name) or "?", style="bold cyan"), 1),
            (Text.assemble("  step ", ("–" if self.latest is None else str(self.latest), "bold")), 2),
        ]
        if self.context:
            out.append((Text(f"  {self.context}"), 4))
        if self.state is RunState.NOT_A_DUMP:
            return [*out, (Text.assemble("  ", ("✗ NOT A DUMP", "bold red")), 0)]
        if self.state is RunState.ENDED:
            out += [(Text.assemble("  ", ("■ ENDED", "bold")), 0), (Text(f" · last data {self.last_data}"), 3)]
            return out + self._badges()
        if not self.live:
            out.append((Text.assemble("  ", ("■ STATIC", "dim")), 0))
            if self.quiet:
                out.append((Text.styled(f" · quiet since {self.last_data}", "yellow"), 3))
        elif not self.following:
            out.append((Text.assemble("  ", ("‖ PAUSED", "bold yellow")), 0))
            if self.quiet:
                out.append((Text.styled(f" · quiet since {self.last_data}", "yellow"), 3))
        elif self.quiet:  # a run that stopped writing is not "live": since when, and how long ago
            out += [(Text.assemble("  ", ("○ QUIET", "bold yellow")), 0)]
            out.append((Text.styled(f" since {self.last_data}", "bold yellow"), 3))
            if self.age_text is not None:
                out.append((Text.styled(f" · {self.age_text} ago", "bold red"), 2))
            return out + self._badges()
        else:
            out.append((Text.assemble("  ", ("● LIVE", "bold green")), 0))
        if self.age_text is not None:
            quiet = self.live and self.quiet
            out.append((Text.assemble("  data ", (f"{self.age_text} old", "bold red" if quiet else "")), 2))
            if quiet:
                out.append((Text.styled(" · no new data", "bold red"), 2))
        return out + self._badges()

    def _badges(self) -> list[tuple[Text, int]]:
        out: list[tuple[Text, int]] = []
        if self.backlog:
            label = f"  summarizing {count_text(self.backlog)} step{'s' if self.backlog > 1 else ''}…"
            out.append((Text.styled(label, "dim"), 4))
        if self.new_steps:
            badge = f" {self.new_steps} new step{'s' if self.new_steps > 1 else ''} (f: track) "
            out.append((Text.assemble("  ", (badge, "reverse yellow")), 4))
        return out

    def on_mount(self) -> None:
        app = cast("MonitorApp", self.app)
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
        self.age_text = None if model.data_age is None else duration(model.data_age, padded=True)
        self.state = model.state
        self.quiet = model.state is RunState.QUIET
        self.last_data = date_time(model.clock.last_data) if model.clock is not None else ""
        self.backlog = model.backlog
        self.following = model.following
        self.mfu = mfu_header(model.starvation.mfu if model.starvation is not None else None)
