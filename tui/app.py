"""The miles-tui Textual app: screens, global bindings, and the poll worker.

The app owns the :class:`RunWatcher` (all reads of the run) and the
:class:`RunModel` (what is known); workers post messages, handlers update the
model and forward the message to every screen on the stack.

Strings from the run are made inert where they become text
(:func:`miles_tui.core.base.inert_text.inert`); the app adds :class:`InertLineFilter` to
Textual's line filters, so a control character a view let through is removed
from the drawn line before anything reaches the terminal.

Once :meth:`MilesApp.exit` has begun (``q``), the app only winds down: keys and
clicks already queued behind the ``q`` are dropped, and no action runs, no
screen is pushed and no message is forwarded to a screen, so nothing mounts
into an app being torn down (typing ``qu`` quickly used to push the GPUs screen
mid-teardown: a traceback and exit status 1).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events, on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.filter import LineFilter
from textual.message import Message
from textual.screen import Screen
from textual.signal import Signal
from textual.timer import Timer

from miles_tui.core.analysis import Advisory, Level, run_health
from miles_tui.core.analysis.advisories import step_advisories
from miles_tui.core.analysis.advisory_log import merged, step_history
from miles_tui.core.analysis.format_drift import schema_label
from miles_tui.core.analysis.health import run_name
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import Run, StepKey
from miles_tui.core.follow.steps import LANDING_SECONDS
from miles_tui.core.telemetry import RunMeta, TelemetryColumns, WandbLink, wandb_link
from miles_tui.core.telemetry.engine_hours import EngineHours
from miles_tui.core.telemetry.streams import read_meta
from miles_tui.tui.formatting import significant
from miles_tui.tui.model.messages import (
    FollowToggled,
    StepFailure,
    StepsChanged,
    StepsSummarized,
    TelemetryAppended,
)
from miles_tui.tui.model.run_model import RunModel
from miles_tui.tui.navigation import Navigation
from miles_tui.tui.palette.commands import RunCommands
from miles_tui.tui.runtime import gc_policy
from miles_tui.tui.runtime.baseline_watch import BaselineApp, BaselinesChanged, BaselineWatch
from miles_tui.tui.runtime.daemon_threads import DaemonThreadExecutor
from miles_tui.tui.runtime.inert_line_filter import InertLineFilter
from miles_tui.tui.runtime.run_watcher import RunWatcher, StepsPoll
from miles_tui.tui.runtime.stream_watch import METRIC_WORKER_NICE as PARSE_NICE
from miles_tui.tui.runtime.terminal_diff import TerminalDiff
from miles_tui.tui.runtime.textual_private import CompositorUpdate, FilteredDisplayApp
from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.views.clipboard import copy_wandb_url

if TYPE_CHECKING:
    from miles_tui.tui.model.monitor_app import MonitorApp

HERE = Path(__file__).parent

BACKFILL_REPOLL_SECONDS = 0.05
"""While steps remain to summarize, the next poll starts this soon after the last one's update."""

BACKLOG_SHOWN = 2
"""More steps than this still to summarize are shown in the header (a live run's newest steps are not)."""

HELPER_REPOLL_SECONDS = 0.25
"""While helper processes summarize steps, their results are collected this often."""

VIEWS_WAIT_SECONDS = 3.0
"""The first telemetry poll waits this long at most for the views' imports (:meth:`Navigation.preload_views`)."""

IDLE_TICK_SECONDS = 1.0
"""How often the app asks its :class:`~miles_tui.tui.runtime.gc_policy.IdleCollector` whether a full collection is
due."""


class MilesApp(BaselineApp, FilteredDisplayApp):
    """Monitor one miles run directory."""

    TITLE = "miles-tui"
    CSS_PATH: ClassVar[list[str | PurePath]] = [HERE / "app.tcss", *sorted((HERE / "screens").glob("*.tcss"))]
    """The app's CSS and every screen's, parsed once at start: a screen's own CSS_PATH, read when the screen is
    first pushed, made Textual reparse and restyle everything then (~120 ms on the first press of each view)."""
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {RunCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        # The habit over SSH: ctrl+c quits (exit 0) wherever the focus is, as in LEET and toolong.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark", "help", "Help", key_display="?"),
        # Keys of every screen: in `?` help and the palette, kept out of the footers (which then fit 80 columns).
        Binding("f", "toggle_follow", "Track the newest step", show=False),
        Binding("m", "metrics", "Metrics", show=False),
        Binding("u", "compute", "GPUs", show=False),
        Binding("E", "engines", "Engines", key_display="E", show=False),
    ]

    def __init__(
        self,
        run: Run,
        *,
        poll_seconds: float = 2.0,
        follow: bool = True,
        clock: Callable[[], float] = time.time,
        start: tuple[int, bool, int | None] | None = None,
        bell: bool = True,
        baselines: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.baselines = BaselineWatch(run.use_cache)
        self.baseline_paths = tuple(baselines)
        self._navigation = Navigation(self, self)
        self.bell_on_critical = bell
        """Ring the terminal bell once per new critical advisory (tmux then flags the window)."""
        self._critical_seen: set[tuple[object, ...]] = set()
        self._sources_reported: set[str] = set()
        """Which advisory sources ('steps', 'streams') have reported once: what is there at start rings no bell."""
        self._start = start
        """A deep link to open on: (step, eval, sample or None)."""
        self._poll_timer: Timer | None = None
        self.watcher = RunWatcher(run, clock)
        # meta.json alone names the run: the first frame has the name, before any stream is read.
        self._first_meta = read_meta(run.dir.dashboard_dir)
        self.model = RunModel(first_name=run_name(self._first_meta, run.path), live=follow)
        self.run_changed: Signal[RunModel] = Signal(self, "run_changed")
        """Published with :attr:`model` after every poll and follow toggle: headers and screens subscribe."""
        self.poll_seconds = poll_seconds
        self._dump_advisories: tuple[Advisory, ...] = ()
        self._stream_advisories: tuple[Advisory, ...] = ()
        self._dump_newest: float | None = None
        self._stream_newest: float | None = None
        self._polled_steps: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
        self._meta_seen: object = None
        self._meta_unapplied = False
        """meta.json as the last telemetry poll read it (the watcher's step rules take it at their next poll)."""
        self.telemetry_columns = TelemetryColumns(
            self.watcher.follower.dashboard, workers=os.cpu_count() or 1, nice=PARSE_NICE
        )
        """GPU/phase columns kept for the session, so the compute view converts records once."""
        self.engine_hours = EngineHours(
            self.watcher.follower.dashboard.directory, workers=os.cpu_count() or 1, nice=PARSE_NICE
        )
        """``engine_series`` by hour for the engines view: a window reads only the hours it touches."""
        self.exiting = False
        """Set by :meth:`exit`: from then on no input, action, screen push or forwarded message is handled."""
        self._inert_filter = InertLineFilter()
        self.terminal = TerminalDiff()
        """What the terminal shows: only changed cells are written to it."""
        self.collector = gc_policy.IdleCollector()
        """Full collections when no key came for a while, not when a threshold says (a key would wait for them)."""

    @property
    def meta(self) -> RunMeta | None:
        """meta.json as the last telemetry poll read it (before any poll: as read at start)."""
        return self.watcher.follower.dashboard.meta or self._first_meta

    def wandb(self) -> WandbLink | None:
        """The run's W&B page as its meta.json args name it (None: they name no W&B project)."""
        meta = self.meta
        return None if meta is None else wandb_link(meta.args)

    def action_copy_wandb(self) -> None:
        """Copy the run's W&B URL (the run's page, else the project's) to the clipboard."""
        copy_wandb_url(self, self.wandb())

    @property
    def live(self) -> bool:
        """Following the run as it writes (False: ``--no-follow``, read once)."""
        return self.model.live

    @property
    def navigation(self) -> Navigation:
        """The one way to open a view (every push goes through it)."""
        return self._navigation

    @property
    def reader(self) -> Run:
        """The run being monitored (named so as not to shadow App.run)."""
        return self.watcher.run

    def action_help(self) -> None:
        self.navigation.help()

    def action_metrics(self) -> None:
        self.navigation.metrics()

    def action_compute(self) -> None:
        self.navigation.compute()

    def action_engines(self) -> None:
        self.navigation.engines()

    @property
    def follow_latest(self) -> bool:
        """The views move to the newest step as it appears (``f`` toggles)."""
        return self.model.following

    def filter_update(self, screen: Screen[object], update: CompositorUpdate) -> CompositorUpdate | None:
        """Only the cells that change (None when the screen looks the same)."""
        return self.terminal.update(update, self.console, (self.size.width, self.size.height), screen)

    def on_mount(self) -> None:
        # Reads of the run run in daemon threads: one stuck in I/O (a hung mount) never holds up the exit.
        asyncio.get_running_loop().set_default_executor(DaemonThreadExecutor())
        self.app_resume_signal.subscribe(self, lambda _app: self.terminal.reset())
        self.push_screen(OverviewScreen())
        if self._start is not None:
            self.navigation.open_step(*self._start)
        if self.reader.cache_notice is not None:
            self.notify(self.reader.cache_notice, severity="warning", timeout=10, markup=False)
        self.poll_now()
        self.open_baselines()
        if self.live:
            self._poll_timer = self.set_interval(self.poll_seconds, self.poll_now, name="poll")
        self.call_after_refresh(self.navigation.preload_views)
        self.set_interval(gc_policy.TRIM_SECONDS, self._trim_memory, name="trim")
        self.collector.hold()
        self.set_interval(IDLE_TICK_SECONDS, self.collector.tick, name="collect")

    def _trim_memory(self) -> None:
        """Hand freed memory back to the system, off the event loop (the call releases the GIL)."""
        asyncio.get_running_loop().run_in_executor(None, gc_policy.trim)

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then :class:`InertLineFilter` (no control character reaches the terminal)."""
        return [*super().get_line_filters(), self._inert_filter]

    def exit(self, result: None = None, return_code: int = 0, message: Any = None) -> None:
        """Begin exiting; what is still queued behind it is dropped (see the module docstring)."""
        self.exiting = True
        super().exit(result, return_code, message)

    async def on_event(self, event: events.Event) -> None:
        """Note when each key or click came (the idle collector waits for a pause); drop those that arrive once
        exit has begun (``q`` then ``u`` typed quickly)."""
        if isinstance(event, events.InputEvent):
            if self.exiting:
                return
            self.collector.note_input()
        await super().on_event(event)

    async def run_action(self, action: Any, default_namespace: Any = None, namespaces: Any = None) -> bool:
        """Run an action, unless exit has begun."""
        if self.exiting:
            return False
        return await super().run_action(action, default_namespace, namespaces)

    def push_screen(self, *args: Any, **kwargs: Any) -> Any:
        """Push a screen, unless exit has begun (then nothing mounts; the awaitable is already done)."""
        if self.exiting:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        return super().push_screen(*args, **kwargs)

    def on_unmount(self) -> None:
        self.collector.release()
        self.watcher.close()

    def poll_now(self) -> None:
        """Start a poll unless one is already running."""
        self._poll()

    @work(exclusive=False, group="poll", exit_on_error=False)
    async def _poll(self) -> None:
        if self.watcher.lock.locked():
            if self._meta_unapplied:  # a static run has no next tick: come back for the new meta.json
                self.set_timer(LANDING_SECONDS, self.poll_now)
            return  # a poll or a step load is running; the next tick catches up
        applies_meta = self._meta_unapplied
        try:
            # First list the steps (no file is read) so the step list paints at once, then summarize.
            result = await self.watcher.poll(summarize=False)
            self._report(result)
            if result.pending or result.preparable:
                result = await self.watcher.poll(summarize=True)
                self._report(result)
        except Exception as err:  # the monitor keeps running whatever the filesystem does
            self.notify(inert(f"poll failed: {err}"), severity="error", markup=False, timeout=6)
            return
        if applies_meta:
            self._meta_unapplied = False
        if result.more:
            self.set_timer(BACKFILL_REPOLL_SECONDS, self.poll_now)  # a beat for keys between two batches
        elif result.helpers:
            self.set_timer(HELPER_REPOLL_SECONDS, self.poll_now)
        elif result.landing:
            self.set_timer(LANDING_SECONDS / 2, self.poll_now)
        self._poll_streams()

    def _report(self, result: StepsPoll) -> None:
        """Post what a poll found."""
        if (
            result.new_train
            or result.new_evaluation
            or not self.model.polled
            or result.looks_like_a_run != self.model.looks_like_a_run
            or (result.train, result.evaluation) != (self.model.train, self.model.evaluation)  # a step went away
        ):
            self.post_message(
                StepsChanged(
                    result.train, result.evaluation, result.new_train, result.new_evaluation, result.looks_like_a_run
                )
            )
        if result.summaries or result.failures:
            failures = tuple(StepFailure(*failure) for failure in result.failures)
            self.post_message(StepsSummarized(tuple(result.summaries), failures))
        self._dump_advisories = result.advisories
        self._dump_newest = result.newest_write
        self._polled_steps = (result.train, result.evaluation)
        self._sources_reported.add("steps")
        self.model.backlog = result.pending if result.pending > BACKLOG_SHOWN else 0
        self.model.quiet_after = result.quiet_after
        self.model.looks_like_a_run = result.looks_like_a_run  # the run's state is judged on it below
        self._take_health()

    def _take_health(self) -> None:
        """Join what both polls last said into the run's health (core's one function, as ``report``),
        keep it in the model and publish the model."""
        train, evaluation = self._polled_steps
        health = run_health(
            self.reader.path,
            self.meta,
            train,
            evaluation,
            dump=self._dump_advisories,
            streams=self._stream_advisories,
            newest_writes=(self._dump_newest, self._stream_newest),
            now=self.watcher.clock(),
            record_time=span[1] if (span := self.watcher.follower.dashboard.time_range()) is not None else None,
            quiet_seconds=self.model.quiet_after,
            is_dump=self.model.looks_like_a_run,
        )
        model = self.model
        changed = health.advisories != model.advisories
        model.health = health
        model.live_log = model.live_log.observe(health.advisories, model.latest, self.watcher.clock())
        self._merge_advisory_log()
        if changed:
            self._ring_for_new_critical(health.advisories)
        self._publish()

    def _publish(self) -> None:
        if not self.exiting:
            self.run_changed.publish(self.model)

    @work(exclusive=False, group="streams", exit_on_error=False)
    async def _poll_streams(self) -> None:
        deadline = time.monotonic() + VIEWS_WAIT_SECONDS
        while not self.navigation.views_imported.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # the views' imports first (see navigation's docstring)
        if self.watcher.stream_lock.locked():
            return
        try:
            result = await self.watcher.poll_streams()
        except Exception as err:  # telemetry problems never stop the monitor
            self.notify(inert(f"telemetry poll failed: {err}"), severity="warning", markup=False, timeout=6)
            return
        self._stream_advisories = result.advisories
        self._stream_newest = result.delta.newest_write
        self.model.starvation = result.starvation
        self._sources_reported.add("streams")
        self._take_health()
        if result.delta.meta is not self._meta_seen:
            # The step rules read the run's arguments (a truncation cap): apply them again with the new meta.json.
            self._meta_seen = result.delta.meta
            self._meta_unapplied = True
            self.poll_now()
        if result.delta.metric_keys or result.delta.records:
            self.post_message(TelemetryAppended(result.delta.metric_keys, tuple(result.delta.records)))
        self.poll_baselines()

    def _forward(self, message: Message) -> None:
        # The default blank screen under ours never needs them (and would pass them on).
        if self.exiting:
            return
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
        self._publish()  # the headers' latest step

    @on(StepsSummarized)
    def _steps_summarized(self, message: StepsSummarized) -> None:
        """Store one poll's summaries and failures, then tell the screens once."""
        for summary in message.summaries:
            self.model.summaries[StepKey(summary.rollout_id, summary.evaluation)] = summary
            self.model.failures.pop(StepKey(summary.rollout_id, summary.evaluation), None)
        for failure in message.failures:
            self.model.failures[failure.key] = (failure.message, failure.still_writing)
        meta = self.watcher.follower.dashboard.meta
        trained = [s for s in message.summaries if not s.evaluation]
        for summary in trained:  # the log's history: the step rules over every step, not only the newest
            found = step_advisories(summary, meta.args if meta is not None else None, schema_label(meta))
            self.model.step_advisories[summary.rollout_id] = tuple(found)
        if trained:
            self._merge_advisory_log()
            self._publish()
        self._forward(message)

    def _merge_advisory_log(self) -> None:
        """The advisory log: the steps' history (oldest first) joined with what the polls found holding."""
        model = self.model
        model.advisory_log = merged(step_history(model.step_advisories), model.live_log)

    def _ring_for_new_critical(self, advisories: tuple[Advisory, ...]) -> None:
        critical = {_identity(a) for a in advisories if a.level is Level.CRITICAL}
        new = critical - self._critical_seen
        self._critical_seen |= critical
        if new and self.bell_on_critical and len(self._sources_reported) == 2:
            self.bell()

    @on(BaselinesChanged)
    def _baselines_changed(self, message: BaselinesChanged) -> None:
        """A baseline was added or brought new figures: the screens that show baselines redraw."""
        self._forward(message)

    @on(TelemetryAppended)
    def _telemetry_appended(self, message: TelemetryAppended) -> None:
        """New metric points or telemetry records: the screens that show them redraw."""
        self._forward(message)

    def set_follow(self, on: bool) -> None:
        if on != self.follow_latest:
            self.action_toggle_follow()

    def set_poll(self, seconds: float) -> None:
        """Poll every ``seconds`` from now on (live runs only)."""
        self.poll_seconds = seconds
        if self._poll_timer is not None:
            self._poll_timer.stop()
        if self.live:
            self._poll_timer = self.set_interval(seconds, self.poll_now, name="poll")
        self.notify(f"polling every {significant(seconds, 6)} s", timeout=2)

    def action_toggle_follow(self) -> None:
        # On "N new steps (f: track)" (tracking on, the cursor moved off the newest step) f goes to the newest.
        away = isinstance(self.screen, OverviewScreen) and self.screen.new_steps > 0
        self.model.following = away or not self.model.following
        self._forward(FollowToggled(self.follow_latest))
        self._publish()
        said = "tracking the newest step" if self.follow_latest else "tracking off: staying where you are"
        self.notify(said, timeout=2)


def _identity(advisory: Advisory) -> tuple[object, ...]:
    """What makes an advisory the same one from poll to poll (its message may carry a changing age)."""
    return advisory.code, advisory.rollout_id, advisory.evaluation, advisory.sample_index, advisory.path


def make_app(
    run_dir: Path | str,
    *,
    poll_seconds: float = 2.0,
    follow: bool = True,
    clock: Callable[[], float] = time.time,
    use_cache: bool = True,
    start: tuple[int, bool, int | None] | None = None,
    bell: bool = True,
    low_mfu_threshold: float | None = None,
    baselines: Sequence[str] = (),
) -> MilesApp:
    """The app for a run directory: shared by the CLI, tests and the screenshot script
    (``low_mfu_threshold``: ``--low-mfu-threshold``; None keeps the rule's default)."""
    run = Run(run_dir, use_cache=use_cache)
    app = MilesApp(
        run, poll_seconds=poll_seconds, follow=follow, clock=clock, start=start, bell=bell, baselines=baselines
    )
    if low_mfu_threshold is not None:
        app.watcher.streams.low_mfu_threshold = low_mfu_threshold
    return app


if TYPE_CHECKING:

    def _keeps_the_protocol(app: MilesApp) -> MonitorApp:
        """mypy checks here that the app is what its screens type against."""
        return app
