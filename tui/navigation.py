"""Where the app goes: the one way to open a step, a sample, a global view, and the views the palette names.

An object the app owns (``app.navigation``); the screens and the command
palette call it through the app's :class:`~miles_tui.tui.model.monitor_app.MonitorApp`
protocol, and no screen is pushed any other way. The screens are imported when first opened, or
earlier by :meth:`Navigation.preload_views` in a background thread once the
first screen is up: a first ``m`` imported the metrics view and plotext in the
key's handler (~150 ms idle, 350 ms during a metrics load). The app's first
telemetry poll waits for those imports (:attr:`Navigation.views_imported`): a
long first load would otherwise share the GIL with them, and a key pressed
meanwhile would wait on the import lock for the whole of them.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from textual.app import App
from textual.screen import ModalScreen, Screen
from textual.widget import Widget

from miles_tui.core.analysis import Advisory
from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import OpenStep, SampleRow, StepKey
from miles_tui.tui.runtime import gc_policy
from miles_tui.tui.screens.help_screen import HelpScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen

if TYPE_CHECKING:
    from miles_tui.tui.model.monitor_app import MonitorApp


VIEW_MODULES: Final = tuple(
    f"miles_tui.tui.screens.{name}"
    for name in ("metrics_screen", "step_screen", "compute_screen", "sample_screen", "engines_screen",
                 "outlier_screen", "scatter_screen", "compare_screen", "anatomy_screen")
)  # fmt: skip
"""The screens a key opens, in the order :meth:`Navigation.preload_views` imports them."""


def _import_views() -> None:
    for name in VIEW_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # the key that opens it imports it again, and says what went wrong there
            continue


class Navigation:
    """Opening screens: steps, samples, global views and the palette's views (the app owns one)."""

    def __init__(self, app: App[None], monitor: MonitorApp) -> None:
        """``app`` and ``monitor`` are the same object: the Textual app that pushes, and what it knows."""
        self.app = app
        self.monitor = monitor
        self.views_imported = threading.Event()
        """Set once :meth:`preload_views` has imported the screens' modules (or failed to)."""

    def preload_views(self) -> None:
        """Import the screens' modules in a daemon thread (the GIL is shared: keys stay answered meanwhile)."""
        done = self.views_imported

        def run() -> None:
            try:
                _import_views()
                # Start-up's objects, the views' modules among them, are all made now; the collection runs
                # before the first telemetry load starts (it waits for ``done``), not in the middle of it.
                gc_policy.after_start()
            finally:
                done.set()

        threading.Thread(target=run, name="miles-tui-preload", daemon=True).start()

    def open_step(self, rollout_id: int, evaluation: bool = False, sample_index: int | None = None) -> None:
        """Go to a step (and a sample of it) with the overview and the step behind it, as if walked to."""
        from miles_tui.tui.screens.step_screen import StepScreen

        while len(self.app.screen_stack) > 2 and not isinstance(self.app.screen, OverviewScreen):
            self.app.pop_screen()
        # With a sample, the step screen opens it once its rows are there (cursor on its row).
        self.app.push_screen(StepScreen(rollout_id, evaluation, focus_sample=sample_index))

    def show_sample(
        self,
        rollout_id: int,
        evaluation: bool,
        sample_index: int,
        *,
        cursor: int | Callable[[OpenStep], int | None] | None = None,
        busy: Widget | None = None,
    ) -> None:
        """Open a sample's screen: the one way every view does it.

        The step, its conversations and the tokenizer are read in one serialized thread call
        (never on the event loop); ``busy`` shows a loading state meanwhile; a failure is a toast.
        """
        work = self._show_sample(rollout_id, evaluation, sample_index, cursor, busy)
        self.app.run_worker(work, exclusive=True, group="show-sample", exit_on_error=False)

    async def _show_sample(
        self,
        rollout_id: int,
        evaluation: bool,
        sample_index: int,
        cursor: int | Callable[[OpenStep], int | None] | None,
        busy: Widget | None,
    ) -> None:
        from miles_tui.tui.screens.sample_screen import SampleScreen
        from miles_tui.tui.views.sample_tracks import SampleTracks

        cold = self.monitor.reader.cached_open(rollout_id, evaluation) is None
        if cold:
            self.app.notify(f"loading step {rollout_id}'s per-token data…", timeout=3)
            if busy is not None:
                busy.loading = True
        try:
            context = await self.monitor.watcher.sample_context(rollout_id, evaluation, sample_index, cursor)
            shown = context.step, context.sample_index, context.detokenizer, context.sidecar
            # the token texts are decoded here, off the event loop (up to the detokenizer's time budget)
            tracks = await asyncio.to_thread(SampleTracks.load, *shown[:3])
            screen = SampleScreen(*shown, cursor=context.cursor, tracks=tracks)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a bad file or a vanished sample: say so, keep the current screen
            self.app.notify(inert(str(err)), severity="error", markup=False, timeout=8)
            return
        finally:
            if busy is not None:
                busy.loading = False
        self.app.push_screen(screen)

    # -- navigation the palette and the screens share -----------------------------------

    def context_step(self) -> StepKey | None:
        """The step the user is looking at: the current screen's, the overview's selection, else the newest."""
        screen = self.app.screen
        rid = getattr(screen, "rollout_id", None)
        if isinstance(rid, int):
            return StepKey(rid, bool(getattr(screen, "evaluation", False)))
        step = getattr(screen, "step", None)
        summary = getattr(step, "summary", None)
        if summary is not None:
            return StepKey(summary.rollout_id, summary.evaluation)
        if isinstance(screen, OverviewScreen) and (selected := screen.selected_step()) is not None:
            return selected
        return None if self.monitor.model.latest is None else StepKey(self.monitor.model.latest, False)

    def show_outliers(self, rollout_id: int | None = None, evaluation: bool = False) -> None:
        """The outliers of a step (default: the one in context)."""
        from miles_tui.tui.screens.outlier_screen import OutlierScreen

        key = StepKey(rollout_id, evaluation) if rollout_id is not None else self.context_step()
        if key is None:
            self.app.notify("no step yet: no outliers to show", timeout=3)
            return
        self.app.push_screen(OutlierScreen(*key))

    def show_scatter(self, rollout_id: int | None = None, evaluation: bool = False) -> None:
        """Reward against response length of a step (default: the one in context)."""
        from miles_tui.tui.screens.scatter_screen import ScatterScreen

        key = StepKey(rollout_id, evaluation) if rollout_id is not None else self.context_step()
        if key is None:
            self.app.notify("no step yet: nothing to plot", timeout=3)
            return
        self.app.push_screen(ScatterScreen(*key))

    def show_anatomy(self, rollout_id: int | None = None, evaluation: bool = False) -> None:
        """Each sample's lifecycle in a step (default: the one in context): queued, generating, tool calls,
        consumed."""
        from miles_tui.tui.screens.anatomy_screen import AnatomyScreen

        key = StepKey(rollout_id, evaluation) if rollout_id is not None else self.context_step()
        if key is None:
            self.app.notify("no step yet: no batch to draw", timeout=3)
            return
        self.app.push_screen(AnatomyScreen(*key))

    def show_compare(
        self,
        rollout_id: int | None = None,
        evaluation: bool = False,
        sample_index: int | None = None,
        baseline: str | None = None,
    ) -> None:
        """Compare a step (default: the one in context) with the previous visible one of its kind, on
        ``sample_index`` when given, or (``baseline``: a baseline's mark) with that baseline's step of the same id."""
        from miles_tui.tui.screens.compare_screen import CompareScreen

        key = StepKey(rollout_id, evaluation) if rollout_id is not None else self.context_step()
        if key is None:
            self.app.notify("no step yet: nothing to compare", timeout=3)
            return
        rid, evaluation = key
        if baseline is not None:
            self.app.push_screen(CompareScreen(rid, rid, evaluation, baseline=baseline))
            return
        earlier = [r for r in (self.monitor.model.evaluation if evaluation else self.monitor.model.train) if r < rid]
        if not earlier:
            self.app.notify("no earlier step to compare with", timeout=3)
            return
        self.app.push_screen(CompareScreen(earlier[-1], rid, evaluation, sample_index=sample_index))

    def show_baseline_path(self) -> None:
        """The dialog that asks for a baseline run's folder (the palette's "Add baseline run…")."""
        from miles_tui.tui.screens.baseline_path_screen import BaselinePathScreen

        self.app.push_screen(BaselinePathScreen())

    def show_save_csv(self, rows: list[SampleRow], rollout_id: int, evaluation: bool) -> None:
        """The dialog that saves a step's shown rows as CSV (under the run's name by default)."""
        from miles_tui.tui.screens.save_csv_screen import SaveCsvScreen
        from miles_tui.tui.views.clipboard import default_csv_path

        run_dir = self.monitor.reader.path
        self.app.push_screen(SaveCsvScreen(rows, default_csv_path(rollout_id, evaluation, run_dir), run_dir))

    def views_with_data(self) -> dict[str, bool]:
        """Which global views have something to show in this run: metrics, compute (GPUs), engines."""
        reader = self.monitor.watcher.follower.dashboard
        counts = reader.record_counts()

        def has(stream: str) -> bool:
            try:
                return bool(reader.partitions(stream)) or counts.get(stream, 0) > 0
            except KeyError:
                return False

        gpus = has("gpu_util") or self.monitor.watcher.follower.has_hours("gpu_util")
        return {"metrics": counts.get("metrics", 0) > 0, "compute": gpus, "engines": has("engine_series")}

    def go_to_advisory(self, advisory: Advisory) -> None:
        """What an advisory is about: its step (and sample), the view of its telemetry, or a toast saying why
        nothing opens (never a silent key)."""
        from miles_tui.tui.views.advisory_rows import view_of

        if advisory.rollout_id is not None:
            self.open_step(advisory.rollout_id, advisory.evaluation, advisory.sample_index)
            return
        view = view_of(advisory.code)
        if view is not None:
            getattr(self, view)()
            return
        where = f" (it is about {inert(str(advisory.path))})" if advisory.path is not None else ""
        self.app.notify(f"{advisory.code} names no step or view to open{where}: its message says it all", timeout=4)

    def show_advisory_log(self) -> None:
        """Every advisory the run has had, active or cleared."""
        from miles_tui.tui.screens.advisory_log_screen import AdvisoryLogScreen

        if not isinstance(self.app.screen, AdvisoryLogScreen):
            self.app.push_screen(AdvisoryLogScreen())

    def show_advisories(self) -> None:
        """Back to the overview, with the advisory list focused."""
        while len(self.app.screen_stack) > 2 and not isinstance(self.app.screen, OverviewScreen):
            self.app.pop_screen()
        self.app.call_after_refresh(lambda: self.app.screen.run_action("focus_advisories"))

    def help(self) -> None:
        if not isinstance(self.app.screen, HelpScreen):
            self.app.push_screen(HelpScreen(self.app.screen))

    def open_global_view(self, view: type[Screen[None]], make: Callable[[], Screen[None]]) -> None:
        """Show a global view (a screen every screen opens with one key: metrics, GPUs ...).

        A help box or another modal on top is closed first; from one global view to another the new one
        replaces the old (``m u m u`` never stacks screens); from any other screen it is pushed, so Back
        returns there.
        """
        while isinstance(self.app.screen, ModalScreen) and len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        if isinstance(self.app.screen, view):
            return
        if getattr(self.app.screen, "GLOBAL_VIEW", False):
            self.app.switch_screen(make())
        else:
            self.app.push_screen(make())

    def metrics(self) -> None:
        from miles_tui.tui.screens.metrics_screen import MetricsScreen

        self.open_global_view(MetricsScreen, MetricsScreen)

    def compute(self) -> None:
        from miles_tui.tui.screens.compute_screen import ComputeScreen

        self.open_global_view(ComputeScreen, lambda: ComputeScreen(self.monitor.telemetry_columns))

    def engines(self) -> None:
        from miles_tui.tui.screens.engines_screen import EnginesScreen

        if not isinstance(self.app.screen, EnginesScreen):
            self.app.push_screen(EnginesScreen())
