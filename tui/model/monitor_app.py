"""What the screens, the header and the palette's commands may ask of the app: the :class:`MonitorApp` protocol.

They type against this protocol, never against :class:`~miles_tui.tui.app.MilesApp`, so no module below the
app imports it (not even for typing): the app imports the screens, and nothing imports the app back. The
app's own module checks, for mypy, that ``MilesApp`` keeps the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.signal import Signal
    from textual.widget import Widget
    from textual.worker import Worker

    from miles_tui.core.analysis import Advisory
    from miles_tui.core.dump import OpenStep, Run, SampleRow
    from miles_tui.core.telemetry import TelemetryColumns, WandbLink
    from miles_tui.tui.model.run_model import RunModel
    from miles_tui.tui.runtime.baseline_watch import Baseline, BaselineWatch
    from miles_tui.tui.runtime.run_watcher import RunWatcher


class MonitorApp(Protocol):
    """The monitor app as its screens see it: what is known, the reads, and every way to open a view."""

    model: RunModel
    """What is known about the run (filled by the app from the watcher's polls)."""
    watcher: RunWatcher
    """Every read of the run, serialized off the event loop."""
    run_changed: Signal[RunModel]
    """Published with the model after every poll and follow toggle."""
    telemetry_columns: TelemetryColumns
    """GPU/phase columns kept for the session."""
    poll_seconds: float
    """How often the run is polled."""
    baselines: BaselineWatch
    """The baseline runs followed beside this one (``--baseline``, the palette)."""

    def wandb(self) -> WandbLink | None:
        """The run's W&B page as meta.json's arguments name it (None: they name no project)."""
        ...

    def action_copy_wandb(self) -> None:
        """Copy the W&B page's URL (W)."""
        ...

    async def follow_baseline(self, path: str) -> Baseline:
        """Open ``path`` as the next baseline and follow it; raises MilesTuiError naming it when it cannot be one."""
        ...

    def add_baseline(self, path: str) -> Worker[None]:
        """Follow ``path`` as a baseline (a toast naming it when it cannot be one)."""
        ...

    @property
    def reader(self) -> Run:
        """The run being monitored."""
        ...

    @property
    def follow_latest(self) -> bool:
        """The views move to the newest step as it appears."""
        ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...

    def set_follow(self, on: bool) -> None: ...

    def set_poll(self, seconds: float) -> None: ...

    @property
    def navigation(self) -> Navigator:
        """The one way to open a view."""
        ...


class Navigator(Protocol):
    """Every way to open a view (:class:`~miles_tui.tui.navigation.Navigation` is the app's)."""

    def open_step(self, rollout_id: int, evaluation: bool = False, sample_index: int | None = None) -> None: ...

    def show_sample(
        self,
        rollout_id: int,
        evaluation: bool,
        sample_index: int,
        *,
        cursor: int | Callable[[OpenStep], int | None] | None = None,
        busy: Widget | None = None,
    ) -> None: ...

    def show_outliers(self, rollout_id: int | None = None, evaluation: bool = False) -> None: ...

    def show_scatter(self, rollout_id: int | None = None, evaluation: bool = False) -> None: ...

    def show_compare(
        self,
        rollout_id: int | None = None,
        evaluation: bool = False,
        sample_index: int | None = None,
        baseline: str | None = None,
    ) -> None: ...

    def show_baseline_path(self) -> None: ...

    def show_anatomy(self, rollout_id: int | None = None, evaluation: bool = False) -> None: ...

    def show_save_csv(self, rows: list[SampleRow], rollout_id: int, evaluation: bool) -> None: ...

    def show_advisories(self) -> None: ...

    def show_advisory_log(self) -> None: ...

    def go_to_advisory(self, advisory: Advisory) -> None: ...

    def views_with_data(self) -> dict[str, bool]: ...

    def metrics(self) -> None: ...

    def compute(self) -> None: ...

    def engines(self) -> None: ...
