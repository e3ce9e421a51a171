"""The miles-tui Textual app: screens, global bindings, and the poll worker.

The app owns the :class:`RunWatcher` (all reads of the run) and the
:class:`RunModel` (what is known); workers post messages, handlers update the
model and forward the message to every screen on the stack.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, cast

from rich.console import RenderableType
from textual import on, work
from textual._compositor import CompositorUpdate
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen

from core.advisories import Advisory, ordered
from core.run import Run
from core.telemetry_columns import TelemetryColumns
from tui.messages import (
    AdvisoriesChanged,
    FollowToggled,
    RunStatusChanged,
    StepFailure,
    StepsChanged,
    StepsSummarized,
    TelemetryAppended,
)
from tui.run_model import RunModel
from tui.run_watcher import LANDING_SECONDS, PollResult, RunWatcher
from tui.screens.help_screen import HelpScreen
from tui.screens.overview_screen import OverviewScreen
from tui.terminal_diff import TerminalDiff

BACKFILL_REPOLL_SECONDS = 0.05
"""While steps remain to summarize, the next poll starts this soon after the last one's update."""

BACKLOG_SHOWN = 2
"""More steps than this still to summarize are shown in the header (a live run's newest steps are not)."""

HELPER_REPOLL_SECONDS = 0.25
"""While helper processes summarize steps, their results are collected this often."""


class MilesApp(App[None]):
    """Monitor one miles run directory."""

    TITLE = "miles-tui"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("m", "metrics", "Metrics"),
        Binding("u", "compute", "GPUs"),
    ]

    def __init__(
        self,
        run: Run,
        *,
        poll_seconds: float = 2.0,
        follow: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.watcher = RunWatcher(run, clock)
        self.model = RunModel(run_name=run.path.name)
        self.poll_seconds = poll_seconds
        self.live = follow
        self.follow_latest = True
        self.step_advisories: tuple[Advisory, ...] = ()
        self.stream_advisories: tuple[Advisory, ...] = ()
        self.step_data_age: float | None = None
        self.stream_data_age: float | None = None
        self.telemetry_columns = TelemetryColumns(self.watcher.follower.dashboard)
        """GPU/phase columns kept for the session, so the compute view converts records once."""
        self.terminal = TerminalDiff()
        """What the terminal shows: only changed cells are written to it."""

    @property
    def reader(self) -> Run:
        """The run being monitored (named so as not to shadow App.run)."""
        return self.watcher.run

    def _display(self, screen: Screen[object], renderable: RenderableType | None) -> None:
        """Hand Textual only the cells that change (nothing at all when the screen looks the same)."""
        update: object = renderable
        # Only updates Textual will really write may change the copy of the screen (its own tests, as in
        # App._display: a batch in progress, a closed or headless app or no driver writes nothing).
        writes = self._running and not self._closed and not self._batch_count and self._driver is not None
        if isinstance(update, CompositorUpdate) and writes and not self.is_headless and not self.is_inline:
            size = (self.size.width, self.size.height)
            renderable = cast("RenderableType | None", self.terminal.update(update, self.console, size))
        super()._display(screen, renderable)

    def on_mount(self) -> None:
        self.app_resume_signal.subscribe(self, lambda _app: self.terminal.reset())
        self.push_screen(OverviewScreen())
        self.poll_now()
        if self.live:
            self.set_interval(self.poll_seconds, self.poll_now, name="poll")

    def on_unmount(self) -> None:
        self.watcher.close()

    def poll_now(self) -> None:
        """Start a poll unless one is already running."""
        self._poll()

    @work(exclusive=False, group="poll", exit_on_error=False)
    async def _poll(self) -> None:
        if self.watcher.lock.locked():
            return  # a poll or a step load is running; the next tick catches up
        try:
            # First list the steps (no file is read) so the step list paints at once, then summarize.
            result = await self.watcher.poll(summarize=False)
            self._report(result)
            if result.pending or result.preparable:
                result = await self.watcher.poll(summarize=True)
                self._report(result)
        except Exception as err:  # the monitor keeps running whatever the filesystem does
            self.notify(f"poll failed: {err}", severity="error", timeout=6)
            return
        if result.more:
            self.set_timer(BACKFILL_REPOLL_SECONDS, self.poll_now)  # a beat for keys between two batches
        elif result.helpers:
            self.set_timer(HELPER_REPOLL_SECONDS, self.poll_now)
        elif result.landing:
            self.set_timer(LANDING_SECONDS / 2, self.poll_now)
        self._poll_streams()

    def _report(self, result: PollResult) -> None:
        """Post what a poll found."""
        if (
            result.new_train
            or result.new_evaluation
            or not self.model.polled
            or result.looks_like_a_run != self.model.looks_like_a_run
        ):
            self.post_message(
                StepsChanged(
                    result.train, result.evaluation, result.new_train, result.new_evaluation, result.looks_like_a_run
                )
            )
        if result.summaries or result.failures:
            failures = tuple(StepFailure(*failure) for failure in result.failures)
            self.post_message(StepsSummarized(tuple(result.summaries), failures))
        if result.advisories != self.step_advisories:
            self.step_advisories = result.advisories
            self.post_message(AdvisoriesChanged(tuple(ordered([*self.step_advisories, *self.stream_advisories]))))
        self.step_data_age = result.data_age
        self.model.backlog = result.pending if result.pending > BACKLOG_SHOWN else 0
        self.post_message(RunStatusChanged(result.run_name, result.latest, self._data_age(), result.quiet_after))

    def _data_age(self) -> float | None:
        ages = [a for a in (self.step_data_age, self.stream_data_age) if a is not None]
        return min(ages) if ages else None

    @work(exclusive=False, group="streams", exit_on_error=False)
    async def _poll_streams(self) -> None:
        if self.watcher.stream_lock.locked():
            return
        try:
            result = await self.watcher.poll_streams()
        except Exception as err:  # telemetry problems never stop the monitor
            self.notify(f"telemetry poll failed: {err}", severity="warning", timeout=6)
            return
        self.stream_data_age = result.delta.data_age
        model = self.model
        self.post_message(RunStatusChanged(model.run_name, model.latest, self._data_age(), model.quiet_after))
        if result.advisories != self.stream_advisories:
            self.stream_advisories = result.advisories
            self.post_message(AdvisoriesChanged(tuple(ordered([*self.step_advisories, *self.stream_advisories]))))
        if result.delta.metric_keys or result.delta.records:
            self.post_message(TelemetryAppended(result.delta.metric_keys, tuple(result.delta.records)))

    def _forward(self, message: Message) -> None:
        # The default blank screen under ours never needs them (and would pass them on).
        for screen in self.screen_stack:
            if type(screen) is not Screen:
                screen.post_message(message)

    @on(StepsChanged)
    def _steps_changed(self, message: StepsChanged) -> None:
        """Record the visible steps and tell the screens."""
        self.model.train, self.model.evaluation = message.train, message.evaluation
        self.model.looks_like_a_run = message.looks_like_a_run
        self.model.polled = True
        self._forward(message)

    @on(StepsSummarized)
    def _steps_summarized(self, message: StepsSummarized) -> None:
        """Store one poll's summaries and failures, then tell the screens once."""
        for summary in message.summaries:
            self.model.summaries[(summary.rollout_id, summary.evaluation)] = summary
            self.model.failures.pop((summary.rollout_id, summary.evaluation), None)
        for failure in message.failures:
            self.model.failures[failure.key] = (failure.message, failure.still_writing)
        self._forward(message)

    @on(AdvisoriesChanged)
    def _advisories_changed(self, message: AdvisoriesChanged) -> None:
        """Replace the advisories."""
        if message.advisories != self.model.advisories:
            self.model.advisories = message.advisories
            self._forward(message)

    @on(TelemetryAppended)
    def _telemetry_appended(self, message: TelemetryAppended) -> None:
        """New metric points or telemetry records: the screens that show them redraw."""
        self._forward(message)

    @on(RunStatusChanged)
    def _status_changed(self, message: RunStatusChanged) -> None:
        """Update the header figures."""
        self.model.run_name = message.run_name
        self.model.data_age = message.data_age
        self.model.quiet_after = message.quiet_after
        self._forward(message)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_metrics(self) -> None:
        from tui.screens.metrics_screen import MetricsScreen

        if not isinstance(self.screen, MetricsScreen):
            self.push_screen(MetricsScreen())

    def action_compute(self) -> None:
        from tui.screens.compute_screen import ComputeScreen

        if not isinstance(self.screen, ComputeScreen):
            self.push_screen(ComputeScreen(self.telemetry_columns))

    def action_toggle_follow(self) -> None:
        self.follow_latest = not self.follow_latest
        self._forward(FollowToggled(self.follow_latest))
        self.notify("following the newest step" if self.follow_latest else "follow paused", timeout=2)


def make_app(
    run_dir: Path | str,
    *,
    poll_seconds: float = 2.0,
    follow: bool = True,
    clock: Callable[[], float] = time.time,
    use_cache: bool = True,
) -> MilesApp:
    """The app for a run directory: shared by the CLI, tests and the screenshot script."""
    return MilesApp(Run(run_dir, use_cache=use_cache), poll_seconds=poll_seconds, follow=follow, clock=clock)
